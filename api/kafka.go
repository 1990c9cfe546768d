package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// KafkaControl publishes namespace and breaker commands, keyed by
// namespace and partitioned as goka reads them.
type KafkaControl struct {
	cl     *kgo.Client
	topics schema.Topics
}

// NewKafkaControl connects to brokers; extra options (client id, TLS, SASL)
// come after chime's.
func NewKafkaControl(brokers []string, topics schema.Topics, opts ...kgo.Opt) (*KafkaControl, error) {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(producer.GokaPartitioner()),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("api: kafka client: %w", err)
	}
	return &KafkaControl{cl: cl, topics: topics}, nil
}

// PublishNamespace writes cmd to the namespace-commands topic.
func (k *KafkaControl) PublishNamespace(ctx context.Context, cmd *chimev1.NamespaceCommand) error {
	return k.publish(ctx, k.topics.NamespaceCommands(), cmd.GetNamespace(), cmd)
}

// PublishBreaker writes cmd to the breaker-commands topic.
func (k *KafkaControl) PublishBreaker(ctx context.Context, cmd *chimev1.BreakerCommand) error {
	return k.publish(ctx, k.topics.BreakerCommands(), cmd.GetNamespace(), cmd)
}

func (k *KafkaControl) publish(ctx context.Context, topic, key string, m proto.Message) error {
	raw, err := schema.Marshal(m)
	if err != nil {
		return err
	}
	return k.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: raw}).FirstErr()
}

// Close flushes and closes the client.
func (k *KafkaControl) Close() { k.cl.Close() }
