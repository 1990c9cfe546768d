package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDispatcherGuardSettings(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	g, err := dispatcherGuard(env(nil), true)
	require.NoError(t, err)
	require.True(t, g.AllowLoopback, "chime dev allows loopback by default")
	require.NoError(t, g.Check(netip.MustParseAddr("127.0.0.1")))

	g, err = dispatcherGuard(env(nil), false)
	require.NoError(t, err)
	require.False(t, g.AllowLoopback, "chime dispatcher refuses loopback by default")

	g, err = dispatcherGuard(env(map[string]string{envAllowLoopback: "false", envAllowCIDRs: "10.1.0.0/16, 192.168.7.9"}), true)
	require.NoError(t, err)
	require.False(t, g.AllowLoopback)
	require.NoError(t, g.Check(netip.MustParseAddr("10.1.2.3")))
	require.NoError(t, g.Check(netip.MustParseAddr("192.168.7.9")))
	require.Error(t, g.Check(netip.MustParseAddr("192.168.7.10")))

	_, err = dispatcherGuard(env(map[string]string{envAllowCIDRs: "nope"}), false)
	require.ErrorContains(t, err, envAllowCIDRs)
	_, err = dispatcherGuard(env(map[string]string{envAllowLoopback: "maybe"}), false)
	require.ErrorContains(t, err, envAllowLoopback)
}
