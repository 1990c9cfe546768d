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
	c := kafkatest.New(t)
	topics := schema.NewTopics(kafkatest.UniquePrefix(t))
	c.Provision(t, topics, 2)
	s, err := New(Config{
		Config:        processors.Config{Client: processors.Client{Brokers: c.Brokers()}, Topics: topics},
		missTimer:     func(key string) bool { return key == "ns/job" },
		Namespaces:    kafkatest.EveryNamespace{},
		SweepInterval: 200 * time.Millisecond,
		SweepOverdue:  100 * time.Millisecond,
	})
	require.NoError(t, err)
	lifecycletest.Start(t, s)
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()

	dues := kafkatest.CollectEach(t, c.Brokers(), topics.Due(), func(r *kgo.Record, keep func(string, *chimev1.Due)) {
		d := new(chimev1.Due)
		require.NoError(t, proto.Unmarshal(r.Value, d))
		for _, d := range schema.DuesOf(d) {
			keep(d.JobId, d)
		}
	})
	p, err := producer.New(producer.Brokers(c.Brokers()), producer.TopicPrefix(topics.Prefix))
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Schedule(wctx, &chimev1.JobSpec{
		Namespace: "ns", Id: "job",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(time.Now().Add(500 * time.Millisecond))}},
		Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}},
	})
	require.NoError(t, err)
	kafkatest.WaitFor(t, 30*time.Second, "the sweep to fire the job", func() bool { return len(dues.Get("job")) == 1 })
	require.EqualValues(t, 1, dues.Get("job")[0].FireSeq)
}
