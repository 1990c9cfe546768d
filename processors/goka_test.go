package processors

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/kafkatest"
)

// TestSaramaMembership: a goka member takes infra/groups' settings, and
// sarama accepts the result.
func TestSaramaMembership(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m                  groups.Membership
		session, heartbeat time.Duration
		instance, addr     string
	}{
		{m: groups.Membership{InstanceID: "a-1"}, session: groups.DefaultSessionTimeout, heartbeat: groups.DefaultSessionTimeout / 6, instance: "a-1"},
		{m: groups.Membership{SessionTimeout: 12 * time.Second}, session: 12 * time.Second, heartbeat: 2 * time.Second},
		{m: groups.Membership{Advertise: "10.0.0.5:7070"}, session: groups.DefaultSessionTimeout, heartbeat: groups.DefaultSessionTimeout / 6, addr: "10.0.0.5:7070"},
	} {
		cfg := SaramaConfig(Client{ClientID: "test"})
		withMembership(cfg, tc.m)
		require.Equal(t, tc.session, cfg.Consumer.Group.Session.Timeout)
		require.Equal(t, tc.heartbeat, cfg.Consumer.Group.Heartbeat.Interval)
		require.Equal(t, groups.DefaultRebalanceTimeout, cfg.Consumer.Group.Rebalance.Timeout)
		require.Equal(t, tc.instance, cfg.Consumer.Group.InstanceId, "no ID: a dynamic member")
		require.Equal(t, tc.addr, groups.Advertised(cfg.Consumer.Group.Member.UserData))
		require.NoError(t, cfg.Validate())
	}
}

// TestSaramaSASL: a component authenticates with the credential in its
// Client, and with none when it has none (no process-wide fallback).
func TestSaramaSASL(t *testing.T) {
	t.Parallel()
	cfg := SaramaConfig(Client{ClientID: "test"})
	require.False(t, cfg.Net.SASL.Enable, "no credential, no SASL")
	cfg = SaramaConfig(Client{ClientID: "test", SASL: kafkaauth.Credential{User: "chime", Password: "secret"}})
	require.True(t, cfg.Net.SASL.Enable)
	require.Equal(t, sarama.SASLMechanism(sarama.SASLTypePlaintext), cfg.Net.SASL.Mechanism)
	require.Equal(t, "chime", cfg.Net.SASL.User)
	require.Equal(t, "secret", cfg.Net.SASL.Password)
	require.NoError(t, cfg.Validate())
}

// TestBatchedFetchesRestWhileIdle: a consumer whose fetches wait for a
// batch asks the broker every IdleFetchWait while nothing comes, not
// every batch wait (chime's sarama fork, Consumer.Fetch.IdleWait), and
// still reads what comes then, in order, and in batches again.
func TestBatchedFetchesRestWhileIdle(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	topic := c.Prefix() + "batched"
	_, err := c.Admin(t).CreateTopic(context.Background(), 1, 1, nil, topic)
	require.NoError(t, err)

	cfg := SaramaConfig(Client{ClientID: "test"})
	batchedFetches(cfg, 20*time.Millisecond)
	// Each request is one write on the connection: count them.
	var writes atomic.Int64
	cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, countingDialer{&writes}
	consumer, err := sarama.NewConsumer(c.Brokers(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = consumer.Close() })
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Close() })
	requests := writes.Load

	// Three seconds with nothing to read: at the batch wait of 20 ms,
	// about 150 fetches; resting, two or three.
	time.Sleep(200 * time.Millisecond)
	before := requests()
	time.Sleep(3 * time.Second)
	idle := requests() - before
	require.Less(t, idle, int64(15), "requests in 3 s of idle fetching")

	cl := c.Client(t)
	for round := range 3 {
		var want []string
		for i := range 50 {
			v := fmt.Sprintf("%d-%d", round, i)
			want = append(want, v)
			require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr())
		}
		var got []string
		timeout := time.After(20 * time.Second)
		for len(got) < len(want) {
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				t.Fatalf("consumer: %v", err)
			case <-timeout:
				t.Fatalf("round %d: %d of %d records read", round, len(got), len(want))
			}
		}
		require.Equal(t, want, got)
		time.Sleep(500 * time.Millisecond) // a lull between rounds
	}
}

// countingDialer counts the writes on the connections it dials.
type countingDialer struct{ writes *atomic.Int64 }

func (d countingDialer) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{c, d.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}
