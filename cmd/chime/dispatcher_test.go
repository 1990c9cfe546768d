package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/config"
)

func TestDispatcherGuardSettings(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) config.Config {
		cfg, err := config.Load(func(k string) string { return env[k] }, nil, nil)
		require.NoError(t, err)
		return cfg
	}

	g := dispatcherGuard(load(nil), true)
	require.True(t, g.AllowLoopback, "chime dev allows loopback by default")
	require.NoError(t, g.Check(netip.MustParseAddr("127.0.0.1")))

	g = dispatcherGuard(load(nil), false)
	require.False(t, g.AllowLoopback, "chime dispatcher refuses loopback by default")

	g = dispatcherGuard(load(map[string]string{"CHIME_DISPATCHER_ALLOW_LOOPBACK": "false", "CHIME_DISPATCHER_ALLOW_CIDRS": "10.1.0.0/16, 192.168.7.9"}), true)
	require.False(t, g.AllowLoopback)
	require.NoError(t, g.Check(netip.MustParseAddr("10.1.2.3")))
	require.NoError(t, g.Check(netip.MustParseAddr("192.168.7.9")))
	require.Error(t, g.Check(netip.MustParseAddr("192.168.7.10")))

	g = dispatcherGuard(load(map[string]string{"CHIME_DISPATCHER_ALLOW_LOOPBACK": "true"}), false)
	require.True(t, g.AllowLoopback)
}
