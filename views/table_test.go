package views_test

import (
	"context"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// The views keep each key's decoded value and answer from it until the
// table writes the key again: a read after a write must see it, whether
// the key had a row, had none (a cached absence), or loses it.
func TestViewFollowsEveryWriteOfAKey(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	topics := c.Topics()
	c.Provision(t, topics, 2)
	v, err := views.NewNamespaces(processors.Client{Brokers: c.Brokers(), ClientID: "test-view"}, topics)
	require.NoError(t, err)
	lifecycletest.Start(t, v)

	cl := c.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	table := string(goka.GroupTable(goka.Group(topics.NamespaceGroup())))
	write := func(cfg *chimev1.NamespaceConfig) {
		t.Helper()
		var raw []byte
		if cfg != nil {
			var err error
			raw, err = schema.Marshal(cfg)
			require.NoError(t, err)
		}
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: table, Key: []byte("acme"), Value: raw}).FirstErr())
	}
	concurrency := func() int64 {
		cfg, err := v.Get("acme")
		require.NoError(t, err)
		if cfg == nil {
			return -1
		}
		return int64(cfg.GetMaxConcurrency())
	}

	require.EqualValues(t, -1, concurrency(), "no row yet (and its absence is now cached)")
	for _, n := range []uint32{7, 8, 9} {
		write(&chimev1.NamespaceConfig{MaxConcurrency: n})
		kafkatest.WaitFor(t, 30*time.Second, "the view serves the latest write", func() bool { return concurrency() == int64(n) })
		// Read again from the cache: the same answer.
		require.Equal(t, int64(n), concurrency())
	}
	write(nil)
	kafkatest.WaitFor(t, 30*time.Second, "the view forgets a deleted row", func() bool { return concurrency() == -1 })
}
