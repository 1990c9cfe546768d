package processors

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
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
