package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestTableStoreEqualsTheChangelog: whatever happens to the table's
// records on their way to Kafka (injected through the producer builder: a
// record that fails, two records of one key stored in the other order),
// the scheduler's store ends up holding exactly the compacted changelog.
func TestTableStoreEqualsTheChangelog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inject func(table string) func(goka.Producer) goka.Producer
	}{
		{"a failed table write", func(table string) func(goka.Producer) goka.Producer {
			return func(p goka.Producer) goka.Producer { return &faultyProducer{Producer: p, table: table, failAt: 6} }
		}},
		{"two table writes stored in the other order", func(table string) func(goka.Producer) goka.Producer {
			return func(p goka.Producer) goka.Producer { return &faultyProducer{Producer: p, table: table, swapAt: 5} }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := kafkatest.New(t)
			topics := schema.NewTopics(kafkatest.UniquePrefix(t))
			// One partition: the table's records are counted in the order
			// the one partition's goroutine writes them.
			const partitions = 1
			c.Provision(t, topics, partitions)
			client := processors.Client{Brokers: c.Brokers()}
			wrap := tc.inject(topics.SchedulerTable())
			// Only the first processor is faulty: the one started after
			// it failed writes as it should.
			var once sync.Once
			base := processors.ProducerBuilder(client)
			s, err := New(Config{
				Config:     processors.Config{Client: client, Topics: topics},
				Namespaces: kafkatest.EveryNamespace{},
				testProducer: func(brokers []string, clientID string, h func() hash.Hash32) (goka.Producer, error) {
					p, err := base(brokers, clientID, h)
					if err != nil {
						return nil, err
					}
					injected := p
					once.Do(func() { injected = wrap(p) })
					return injected, nil
				},
			})
			require.NoError(t, err)
			lifecycletest.Start(t, s)
			prod, err := producer.New(producer.Brokers(c.Brokers()), producer.TopicPrefix(topics.Prefix))
			require.NoError(t, err)
			t.Cleanup(prod.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			later := timestamppb.New(time.Now().Add(time.Hour))
			for i := range 12 {
				spec := &chimev1.JobSpec{Namespace: "ns", Id: fmt.Sprintf("j%d", i/2%4), Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: later}},
					Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: fmt.Sprintf("http://127.0.0.1:9/%d", i)}}}}
				_, err := prod.Schedule(ctx, spec)
				require.NoError(t, err)
			}
			kafkatest.WaitFor(t, 60*time.Second, "the store to hold the compacted changelog", func() bool {
				want := changelog(t, c, topics.SchedulerTable(), partitions)
				got := map[string][]byte{}
				for p := range int32(partitions) {
					require.NoError(t, s.db.Rows(p, func(k string, v []byte) bool { got[k] = v; return true }))
				}
				if len(want) != len(got) {
					return false
				}
				for k, v := range want {
					if !bytes.Equal(got[k], v) {
						return false
					}
				}
				return len(want) == 4 // j0 … j3
			})
		})
	}
}

// changelog reads a table topic from its start to its end and keeps each
// key's last value, as compaction would.
func changelog(t *testing.T, c *kafkatest.Cluster, topic string, partitions int32) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	// Read until each partition's last offset: compaction may have
	// removed records before it, never the last.
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset - 1
		}
	})
	out := map[string][]byte{}
	if len(left) == 0 {
		return out
	}
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading %s: partitions %v not read to their end", topic, left)
		fs.EachRecord(func(r *kgo.Record) {
			if last, ok := left[r.Partition]; ok && r.Offset >= last {
				delete(left, r.Partition)
			}
			if r.Value == nil {
				delete(out, string(r.Key))
			} else {
				out[string(r.Key)] = r.Value
			}
		})
	}
	return out
}

// faultyProducer fails, or delays past the next one, the table record it
// is told to.
type faultyProducer struct {
	goka.Producer
	table          string
	failAt, swapAt int

	mu   sync.Mutex
	n    int
	held func()
}

var errInjected = errors.New("injected: the broker refused this record")

func (f *faultyProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return f.EmitWithHeaders(topic, key, value, nil)
}

func (f *faultyProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	if topic != f.table {
		return f.Producer.EmitWithHeaders(topic, key, value, headers)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	switch {
	case f.n == f.failAt:
		p, finish := goka.NewPromiseWithFinisher()
		go finish(&sarama.ProducerMessage{Topic: topic}, errInjected)
		return p
	case f.n == f.swapAt:
		p, finish := goka.NewPromiseWithFinisher()
		f.held = func() {
			f.Producer.EmitWithHeaders(topic, key, value, headers).ThenWithMessage(func(m *sarama.ProducerMessage, err error) { finish(m, err) })
		}
		return p
	}
	p := f.Producer.EmitWithHeaders(topic, key, value, headers)
	if f.held != nil {
		f.held()
		f.held = nil
	}
	return p
}
