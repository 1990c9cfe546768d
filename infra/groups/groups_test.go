package groups_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
)

func TestMembershipSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m                  groups.Membership
		session, heartbeat time.Duration
	}{
		{groups.Membership{InstanceID: "a-1"}, groups.DefaultSessionTimeout, groups.DefaultSessionTimeout / 6},
		{groups.Membership{SessionTimeout: 12 * time.Second}, 12 * time.Second, 2 * time.Second},
		{groups.Membership{SessionTimeout: 12 * time.Second, EmbeddedBroker: true}, 12 * time.Second, 4 * time.Second},
	} {
		require.Equal(t, tc.session, tc.m.Session(), "%+v", tc.m)
		require.Equal(t, tc.heartbeat, tc.m.Heartbeat(), "%+v", tc.m)
	}
}

// TestAdvertise: the advertised address rides in the member's user data
// and reads back; anything else there reads as no address.
func TestAdvertise(t *testing.T) {
	t.Parallel()
	require.Equal(t, "10.0.0.5:7070", groups.Advertised(groups.Membership{Advertise: "10.0.0.5:7070"}.UserData()))
	require.Nil(t, groups.Membership{}.UserData(), "nothing advertised, nothing sent")
	for _, raw := range []string{"", "garbage", `{"other":1}`, `[]`} {
		require.Empty(t, groups.Advertised([]byte(raw)), "%q", raw)
	}
	require.Equal(t, "h:1", groups.Advertised([]byte(`{"chime_addr":"h:1","later":true}`)), "fields of a later version are ignored")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    groups.Membership
		want string
	}{
		{groups.Membership{}, ""},
		{groups.Membership{InstanceID: "chime-host.1_a"}, ""},
		{groups.Membership{SessionTimeout: time.Second}, "session timeout 1s is below 2s (0 takes the default 6s)"},
		{groups.Membership{SessionTimeout: -time.Second}, "session timeout -1s is below 2s (0 takes the default 6s)"},
		{groups.Membership{InstanceID: "a b"}, `' ' is not allowed`},
		{groups.Membership{InstanceID: strings.Repeat("a", 250)}, "Kafka allows 249"},
		{groups.Membership{Advertise: "host:7070"}, ""},
		{groups.Membership{Advertise: "host"}, `"host" is not host:port`},
	} {
		err := tc.m.Validate()
		if tc.want == "" {
			require.NoError(t, err, "%+v", tc.m)
		} else {
			require.ErrorContains(t, err, tc.want, "%+v", tc.m)
		}
	}
}

func TestDeriveInstanceID(t *testing.T) {
	t.Parallel()
	a := groups.DeriveInstanceID("chime", "web 1", "/var/lib/chime")
	require.Equal(t, a, groups.DeriveInstanceID("chime", "web 1", "/var/lib/chime"), "stable across restarts")
	require.NotEqual(t, a, groups.DeriveInstanceID("chime", "web 1", "/var/lib/chime2"), "one per state dir")
	require.NotEqual(t, a, groups.DeriveInstanceID("chime", "web 2", "/var/lib/chime"), "one per host")
	require.True(t, strings.HasPrefix(a, "chime-web-1-"), a)
	require.NoError(t, groups.Membership{InstanceID: a}.Validate())
	long := groups.DeriveInstanceID(strings.Repeat("x", 400), "h", "/d")
	require.NoError(t, groups.Membership{InstanceID: long}.Validate())
}

// member is one franz-go group consumer whose current assignment the test
// can read.
type member struct {
	cl *kgo.Client

	mu       sync.Mutex
	parts    []int32
	revokes  int
	assigned chan struct{}
}

func join(t *testing.T, c *kafkatest.Cluster, group, topic string, m groups.Membership) *member {
	t.Helper()
	mem := &member{assigned: make(chan struct{}, 16)}
	cl, err := kgo.NewClient(append(m.Kgo(),
		kgo.SeedBrokers(c.Brokers()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mem.mu.Lock()
			mem.parts = append(mem.parts, a[topic]...)
			slices.Sort(mem.parts)
			mem.mu.Unlock()
			mem.assigned <- struct{}{}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			mem.drop(r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			mem.drop(r[topic])
		}),
	)...)
	require.NoError(t, err)
	mem.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if cl.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); cl.Close(); <-done })
	return mem
}

func (m *member) drop(ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(ps) > 0 {
		m.revokes++
	}
	m.parts = slices.DeleteFunc(m.parts, func(p int32) bool { return slices.Contains(ps, p) })
}

func (m *member) owned() ([]int32, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.parts), m.revokes
}

// waitOwned polls until m owns n partitions, failing after within.
func waitOwned(t *testing.T, m *member, n int, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, _ := m.owned()
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: owns %v after %s, want %d partitions", why, got, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStaticMemberRestartAndLeave shows the two halves of fast failover
// with a session timeout far longer than the test's deadlines, so that
// waiting for it would fail: a static member that restarts under its ID
// gets its partitions back without the others giving theirs up, and Leave
// hands a stopped static member's partitions to the others at once.
func TestStaticMemberRestartAndLeave(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	topic := c.Prefix() + "static"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, topics.Ensure(ctx, c.Admin(t), []schema.Spec{{Name: topic, Cleanup: schema.CleanupDelete}}, 4, 1))
	group := c.Prefix() + "g"
	const session = 45 * time.Second
	a := join(t, c, group, topic, groups.Membership{InstanceID: "a", SessionTimeout: session})
	waitOwned(t, a, 4, 30*time.Second, "a alone")
	b := join(t, c, group, topic, groups.Membership{InstanceID: "b", SessionTimeout: session})
	waitOwned(t, b, 2, 30*time.Second, "b joined")
	waitOwned(t, a, 2, 30*time.Second, "a gave two to b")
	aParts, _ := a.owned()
	bParts, bRevokes := b.owned()

	// a stops without leaving (a static member's close), as a kill -9
	// would; a new process under the same ID takes its place.
	a.cl.Close()
	a2 := join(t, c, group, topic, groups.Membership{InstanceID: "a", SessionTimeout: session})
	waitOwned(t, a2, 2, session/3, "a restarted under its ID")
	got, _ := a2.owned()
	require.Equal(t, aParts, got, "the restarted member gets its own partitions back")
	got, revokes := b.owned()
	require.Equal(t, bParts, got)
	require.Equal(t, bRevokes, revokes, "b kept its partitions throughout")

	// a stops for good and leaves: b takes everything now, not after the
	// session timeout.
	a2.cl.Close()
	lc := c.Client(t)
	require.NoError(t, groups.Leave(ctx, lc, "a", group, c.Prefix()+"not-a-group"))
	waitOwned(t, b, 4, session/3, "b after a left")
	require.NoError(t, groups.Leave(ctx, lc, "a", group), "leaving twice is not an error")
}
