package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestSweepFiresWhatThePumpMissed: with a job's timer kept out of the
// window (as a bug would), the periodic sweep still fires it (late, by
// SweepOverdue at most one sweep apart).
func TestSweepFiresWhatThePumpMissed(t *testing.T) {
	t.Parallel()
	r := newKafkaRig(t, 2)
	s, err := New(Config{
		Config:        r.config(),
		missTimer:     func(key string) bool { return key == "ns/job" },
		Namespaces:    kafkatest.EveryNamespace{},
		SweepInterval: 200 * time.Millisecond,
		SweepOverdue:  100 * time.Millisecond,
	})
	require.NoError(t, err)
	lifecycletest.Start(t, s)
	r.scheduleHTTP(t, "job", time.Now().Add(500*time.Millisecond))
	kafkatest.WaitFor(t, 30*time.Second, "the sweep to fire the job", func() bool { return len(r.dues.Get("job")) == 1 })
	require.EqualValues(t, 1, r.dues.Get("job")[0].FireSeq)
}

// kafkaRig is a broker (kfake, or the Apache Kafka of CHIME_TEST_BROKERS)
// with chime's topics, a producer of commands, and the due events
// produced, by job id: for tests of the scheduler's internals that need
// the whole processor.
type kafkaRig struct {
	c      *kafkatest.Cluster
	topics schema.Topics
	prod   *producer.Producer
	dues   *kafkatest.Collector[*chimev1.Due]
}

func newKafkaRig(t *testing.T, partitions int32) *kafkaRig {
	t.Helper()
	r := &kafkaRig{c: kafkatest.New(t), topics: schema.NewTopics(kafkatest.UniquePrefix(t))}
	r.c.Provision(t, r.topics, partitions)
	r.dues = kafkatest.CollectEach(t, r.c.Brokers(), r.topics.Due(), func(rec *kgo.Record, keep func(string, *chimev1.Due)) {
		d := new(chimev1.Due)
		require.NoError(t, proto.Unmarshal(rec.Value, d))
		for _, d := range schema.DuesOf(d) {
			keep(d.JobId, d)
		}
	})
	p, err := producer.New(producer.Brokers(r.c.Brokers()), producer.TopicPrefix(r.topics.Prefix))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	r.prod = p
	return r
}

// config is a scheduler's processors.Config on the rig's broker and topics.
func (r *kafkaRig) config() processors.Config {
	return processors.Config{Client: processors.Client{Brokers: r.c.Brokers()}, Topics: r.topics}
}

// scheduleHTTP creates (or updates) one-shot job ns/id, due at at, calling
// a loopback URL nothing listens on.
func (r *kafkaRig) scheduleHTTP(t *testing.T, id string, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.prod.Schedule(ctx, &chimev1.JobSpec{
		Namespace: "ns", Id: id,
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(at)}},
		Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}},
	})
	require.NoError(t, err)
}
