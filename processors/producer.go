package processors

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/internal/promised"
	"github.com/chime-sched/chime/producer"
)

// Every chime goka processor produces through franz-go instead of sarama:
// an idempotent producer (Kafka's default since 3.0, KIP-679) keeps each
// partition's records in the order they were emitted, retries included,
// where sarama's non-idempotent producer with five requests in flight
// could land a retried batch after a later one, or twice. The scheduler's
// table changelog depends on it (processors/jobstore): two writes of a
// key stored in the other order would leave the local store with one row
// and the compacted changelog with the other.

// ProducerLinger is how long the processors' producer waits to fill a
// batch: a due event's delay to the dispatcher, and a command's offset
// commit, wait this long at most.
const ProducerLinger = 5 * time.Millisecond

// ProducerDeliveryTimeout bounds how long a record is retried. A broker
// outage then fails the emit, and so the processor (goka ends Run), which
// Supervise restarts, instead of holding the partition's goroutine for
// ever.
const ProducerDeliveryTimeout = 30 * time.Second

// ProducerBuilder builds the producer of a chime processor: franz-go,
// idempotent, acks from all in-sync replicas, goka's partitioning
// (FNV-1a, sarama-compatible) so that a table's records land on its input
// partitions, and franz-go's default compression (snappy), as every chime
// producer: on Apache Kafka at 2,000 fires/s the log bytes per fired job
// fell from 949 to 572 B, for about 20 µs of the broker's CPU a job (it
// decompresses batches to validate them; docs/capacity.md).
func ProducerBuilder(c Client) goka.ProducerBuilder {
	return func(brokers []string, clientID string, _ func() hash.Hash32) (goka.Producer, error) {
		cl, err := kgo.NewClient(append(c.SASL.Kgo(),
			kgo.SeedBrokers(brokers...),
			kgo.ClientID(clientID),
			kgo.RecordPartitioner(producer.GokaPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(ProducerLinger),
			kgo.RecordDeliveryTimeout(ProducerDeliveryTimeout),
			kgo.MaxBufferedRecords(1<<17),
		)...)
		if err != nil {
			return nil, fmt.Errorf("processor producer: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		return &kgoProducer{cl: cl, ctx: ctx, cancel: cancel}, nil
	}
}

// kgoProducer is a goka.Producer on franz-go.
type kgoProducer struct {
	cl     *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *kgoProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return p.EmitWithHeaders(topic, key, value, nil)
}

func (p *kgoProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	promise, finish := goka.NewPromiseWithFinisher()
	r := promised.New(p.ctx, topic, key, value, finish)
	for k, v := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: v})
	}
	p.cl.Produce(p.ctx, r, emitted)
	return promise
}

// emitted is the promise of every record goka emits: it finishes the
// record's goka promise (promised). goka reads the partition and offset
// of a table's record (Storage.SetOffset).
func emitted(r *kgo.Record, err error) {
	finish := promised.Value[goka.PromiseFinisher](r)
	finish(&sarama.ProducerMessage{Topic: r.Topic, Key: sarama.ByteEncoder(r.Key), Partition: r.Partition, Offset: r.Offset}, err)
}

// Close sends what is buffered (goka closes the producer after its
// partitions stopped) and closes the client.
func (p *kgoProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), ProducerDeliveryTimeout)
	defer cancel()
	err := p.cl.Flush(ctx)
	p.cancel()
	p.cl.Close()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("processor producer: records still unsent after %s", ProducerDeliveryTimeout)
	}
	return err
}
