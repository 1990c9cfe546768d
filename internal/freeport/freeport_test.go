package freeport_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/freeport"
)

func TestGetNIsFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 20 {
		ports, err := freeport.GetN(5)
		require.NoError(t, err)
		require.Len(t, ports, 5)
		for _, p := range ports {
			require.False(t, seen[p], "port %d handed out twice", p)
			seen[p] = true
			require.GreaterOrEqual(t, p, 20000)
			require.Less(t, p, ephemeralStart(t), "ports come from below the ephemeral range")
		}
	}
	// Free: a server can listen on it.
	p := freeport.For(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// ephemeralStart is where this machine's ephemeral ports begin.
func ephemeralStart(t *testing.T) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	require.Len(t, f, 2)
	v, err := strconv.Atoi(f[0])
	require.NoError(t, err)
	if v < 21000 {
		return 32768 // freeport draws below Linux's default then
	}
	return v
}

type fatalRecorder struct{ failed bool }

func (f *fatalRecorder) Helper()               {}
func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true }

func TestForSucceedsWithoutFailingT(t *testing.T) {
	t.Parallel()
	var r fatalRecorder
	require.NotZero(t, freeport.For(&r))
	require.False(t, r.failed)
}
