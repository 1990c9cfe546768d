package kafkatest_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/kafkatest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestUniquePrefix(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^t[0-9a-f]{10}\.$`)
	p := kafkatest.UniquePrefix(t)
	require.Regexp(t, shape, p)
	require.Equal(t, p, kafkatest.UniquePrefix(t), "stable within a test")

	// Subtests run one after the other so their prefixes can be compared.
	seen := map[string]string{p: t.Name()}
	for _, name := range []string{"a", "b", "a/b", "with space"} {
		t.Run(name, func(t *testing.T) {
			sub := kafkatest.UniquePrefix(t)
			require.Regexp(t, shape, sub)
			require.NotContains(t, seen, sub, "same prefix as %s", seen[sub])
			seen[sub] = t.Name()
		})
	}
}

func TestEmbeddedClusterRestartKeepsDataAndPort(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	if c.External() {
		t.Skip("tests the embedded broker; " + kafkatest.EnvBrokers + " is set")
	}
	require.NotEmpty(t, c.DataDir())
	require.Len(t, c.Brokers(), 1)
	require.True(t, strings.HasPrefix(c.Brokers()[0], "127.0.0.1:"))

	tt := c.Topics()
	require.Equal(t, c.Prefix(), tt.Prefix)
	c.Provision(t, tt, 3)
	c.Provision(t, tt, 3) // idempotent

	cl := c.Client(t)
	require.NoError(t, cl.ProduceSync(ctxT(t), &kgo.Record{Topic: tt.Due(), Key: []byte("ns"), Value: []byte("v")}).FirstErr())
	cl.Close()

	before := c.Brokers()
	c.Restart(t)
	require.Equal(t, before, c.Brokers(), "the port was free, so it is reused")

	rd := c.Client(t, kgo.ConsumeTopics(tt.Due()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t)
	fs := rd.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.NoError(t, fs.Err())
	require.Len(t, fs.Records(), 1)
	require.Equal(t, "v", string(fs.Records()[0].Value))
}

// TestEmbeddedClusterWithSASL: WithSASL gives the test a broker that, as
// chime dev's, refuses clients without the credential; the cluster's own
// clients carry it.
func TestEmbeddedClusterWithSASL(t *testing.T) {
	t.Parallel()
	cred := kafkaauth.Credential{User: "chime", Password: "test-secret"}
	c := kafkatest.New(t, kafkatest.WithSASL(cred))
	tt := c.Topics()
	c.Provision(t, tt, 1)
	rec := func() *kgo.Record { return &kgo.Record{Topic: tt.Due(), Value: []byte("v")} }
	require.NoError(t, c.Client(t).ProduceSync(ctxT(t), rec()).FirstErr())

	tests := []struct {
		name string
		opts []kgo.Opt
	}{
		{name: "no credential"},
		{name: "wrong password", opts: kafkaauth.Credential{User: "chime", Password: "guess"}.Kgo()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl, err := kgo.NewClient(append(tc.opts, kgo.SeedBrokers(c.Brokers()...), kgo.RequestRetries(0))...)
			require.NoError(t, err)
			defer cl.Close()
			_, err = kadm.NewClient(cl).BrokerMetadata(ctxT(t))
			require.Error(t, err)
		})
	}
}

func TestExternalClusterUsesPrefixAndCleansUp(t *testing.T) {
	t.Parallel()
	shared := kafkatest.New(t)
	adm := shared.Admin(t)

	var prefix string
	t.Run("test on the shared cluster", func(t *testing.T) {
		c := kafkatest.New(t, kafkatest.WithExternalBrokers(shared.Brokers()...))
		require.True(t, c.External())
		require.Empty(t, c.DataDir())
		require.Equal(t, shared.Brokers(), c.Brokers())
		prefix = c.Prefix()
		require.NotEqual(t, shared.Prefix(), prefix)

		c.Provision(t, c.Topics(), 2)
		offs := make(kadm.Offsets)
		offs.Add(kadm.Offset{Topic: c.Topics().Due(), Partition: 0, At: 0, LeaderEpoch: -1})
		require.NoError(t, c.Admin(t).CommitAllOffsets(ctxT(t), c.Topics().SchedulerGroup(), offs))
		listed, err := adm.ListTopics(kadm.WithAuthorizedOps(ctxT(t)))
		require.NoError(t, err)
		require.True(t, listed.Has(c.Topics().JobCommands()))

		t.Run("restart is skipped", func(t *testing.T) {
			c.Restart(t)
			t.Fatal("Restart must skip on an external cluster")
		})
	})

	// The subtest's cleanup deleted its topics from the shared cluster;
	// Kafka deletes them asynchronously, so poll until they are gone.
	// WithAuthorizedOps bypasses kadm's metadata cache.
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := adm.ListTopics(kadm.WithAuthorizedOps(ctxT(t)))
		require.NoError(t, err)
		var left []string
		for _, name := range listed.Names() {
			if strings.HasPrefix(name, prefix) {
				left = append(left, name)
			}
		}
		if len(left) == 0 {
			break
		}
		require.False(t, time.Now().After(deadline), "topics left behind: %v", left)
		time.Sleep(100 * time.Millisecond)
	}
	groups, err := adm.ListGroups(ctxT(t))
	require.NoError(t, err)
	for _, name := range groups.Groups() {
		require.False(t, strings.HasPrefix(name, prefix), "group %s left behind", name)
	}
}
