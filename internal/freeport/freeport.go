// Package freeport hands out TCP ports on 127.0.0.1 that nothing listens
// on, for servers that a test, the bench or a launcher starts and must
// name the port of before they listen (a child process, a Kafka node's
// listeners, ClickHouse's HTTP port).
//
// A port is free only when it is checked: it can be taken before its server
// binds it. A port that Listen(":0") picks is the worst choice: it comes
// from the kernel's ephemeral range, where the kernel also picks the local
// port of every outgoing connection and of every other listener on port
// 0, so parallel tests talking to Kafka take it easily (an echo test
// flaked so in CI). Ports are therefore drawn at random below that range,
// and one process never hands out the same port twice.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port handed out: above the well-known and most
// registered ports services listen on.
const lowest = 20000

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Get returns a port that was free on 127.0.0.1 a moment ago.
func Get() (int, error) {
	ports, err := GetN(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// GetN returns n distinct ports that were free on 127.0.0.1 a moment ago.
func GetN(n int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	hi := ephemeralStart()
	var (
		ports []int
		held  []net.Listener
	)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("freeport: no free port between %d and %d after %d tries", lowest, hi, tries)
		}
		p := lowest + rand.IntN(hi-lowest)
		if given[p] {
			continue
		}
		// Held until all n are picked, so they differ.
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	for _, p := range ports {
		given[p] = true
	}
	return ports, nil
}

// TB is what For needs of a testing.TB (this package imports no testing:
// the bench and launchers use it too).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// For returns a free port, failing t if there is none.
func For(t TB) int {
	t.Helper()
	p, err := Get()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// ephemeralStart is where the kernel's ephemeral ports begin (Linux's
// default when it cannot be read), kept above lowest.
func ephemeralStart() int {
	const linuxDefault = 32768
	start := linuxDefault
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				start = v
			}
		}
	}
	if start < lowest+1000 {
		// A range starting this low leaves no room below it: draw from
		// the default's instead.
		start = linuxDefault
	}
	return start
}
