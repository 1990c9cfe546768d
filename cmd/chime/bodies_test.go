package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/freeport"
)

var schedulerReadyLine = regexp.MustCompile(`msg="scheduler ready".* query_addr=(\S+)`)

// A client without credentials costs chime a header's worth of memory,
// however many bodies it sends and however slowly: 500 connections each
// sending a 1 MiB body in 32 KiB pieces, with no token (to the API) and
// no signature (to the scheduler's query server), grow `chime dev` by at
// most 50 MB, and each gets its 401. (When bodies were read before the
// credentials were checked, `chime dev` grew by about 1 GB.)
func TestUnauthenticatedBodiesCostNoMemory(t *testing.T) {
	t.Parallel()
	// The chime binary itself: the race detector's own memory per
	// goroutine would be most of what is measured.
	chime := buildChime(t)
	for _, tc := range []struct {
		name, path string
		addr       func(dev *devAPI, query string) string
	}{
		{"api", "/v1/namespaces/acme/jobs", func(dev *devAPI, _ string) string { return strings.TrimPrefix(dev.base, "http://") }},
		{"query server", "/query/v1/rows", func(_ *devAPI, query string) string { return query }},
	} {
		// A process each: Go keeps the memory a first measure took.
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			queryAddr := make(chan string, 1)
			dev := startDevAPIOf(t, chime, filepath.Join(t.TempDir(), "state"), freeport.For(t), func(line string) {
				if m := schedulerReadyLine.FindStringSubmatch(line); m != nil {
					select {
					case queryAddr <- m[1]:
					default:
					}
				}
			})
			var query string
			select {
			case query = <-queryAddr:
			case <-time.After(30 * time.Second):
				t.Fatal("no `scheduler ready` line with the query server's address")
			}
			pid := dev.cmd.Process.Pid
			idle := sampleRSS(pid)
			time.Sleep(time.Second)
			before := idle()
			require.Positive(t, before, "/proc/%d/status has a VmRSS", pid)
			hostile := sampleRSS(pid)
			answered := slowBodies(t, tc.addr(dev, query), tc.path)
			peak := hostile()
			t.Logf("%s: 500 slow 1 MiB bodies without credentials: chime dev's RSS %d MB → peak %d MB (+%d MB)",
				tc.name, before>>20, peak>>20, (peak-before)>>20)
			require.Equal(t, 500, answered, "every connection gets its 401")
			require.LessOrEqual(t, peak-before, int64(50<<20), "RSS growth")
		})
	}
}

// slowBodies opens 500 connections to addr, each sending a POST to path
// announcing 1 MiB and sending it in 32 KiB pieces every 100 ms, without
// credentials, until the body is sent or the server closes the connection;
// it returns how many got a 401 answer.
func slowBodies(t *testing.T, addr, path string) int {
	t.Helper()
	const (
		conns = 500
		size  = 1 << 20
		piece = 32 << 10
	)
	chunk := make([]byte, piece)
	for i := range chunk {
		chunk[i] = 'x'
	}
	var unauthorized atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Minute)))
		_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: chime\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, size)
		require.NoError(t, err)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for sent := 0; sent < size; sent += piece {
				if _, err := c.Write(chunk); err != nil {
					return // the server closed the connection
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			defer c.Close()
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			if res.StatusCode == http.StatusUnauthorized {
				unauthorized.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(unauthorized.Load())
}

// sampleRSS samples the resident set of process pid every 20 ms until
// the function it returns is called, which returns the highest seen.
func sampleRSS(pid int) func() int64 {
	stop, peak := make(chan struct{}), make(chan int64)
	go func() {
		high := vmRSS(pid)
		for {
			select {
			case <-stop:
				peak <- max(high, vmRSS(pid))
				return
			case <-time.After(20 * time.Millisecond):
				high = max(high, vmRSS(pid))
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-peak
	}
}

// vmRSS is process pid's resident set in bytes (/proc/PID/status), 0 if
// it cannot be read.
func vmRSS(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
