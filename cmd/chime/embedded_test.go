package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/internal/lifecycle"
)

// logAttr is one key=value of a text slog line.
var logAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

func logAttrs(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range logAttr.FindAllStringSubmatch(line, -1) {
		m[kv[1]] = strings.Trim(kv[2], `"`)
	}
	return m
}

// runTopics runs `chime topics` on the embedded broker of stateDir (the
// same start as chime dev's, without the roles) and returns its log.
func runTopics(t *testing.T, stateDir string) []string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	p := startChild(t, nil, func(line string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line)
	}, "topics", "--state-dir", stateDir, "--partitions", "1")
	select {
	case err := <-p.exited:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("chime topics did not end within 60s")
	}
	mu.Lock()
	defer mu.Unlock()
	return lines
}

func lineWith(lines []string, msg string) string {
	for _, l := range lines {
		if strings.Contains(l, `msg="`+msg) {
			return l
		}
	}
	return ""
}

// TestEmbeddedBrokerKeepsItsPort: the embedded broker comes back on the
// port of its last start, so the address chime dev printed stays good for
// other processes and Go services; if another process took that port it
// moves and warns. Every start writes the address to the state dir and
// logs it, and where the SASL credential is, as docs/operations.md shows it.
func TestEmbeddedBrokerKeepsItsPort(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	credential := filepath.Join(stateDir, "kafka-credential")
	// One after the other: each step restarts the broker of the one before.
	steps := []struct {
		name     string
		occupy   bool // another process listens on the port of the last start
		wantSame bool // the broker listens where it did on the last start
	}{
		{name: "first start"},
		{name: "restart", wantSame: true},
		{name: "restart, its port taken meanwhile", occupy: true},
		{name: "restart after moving", wantSame: true},
	}
	last := ""
	for _, st := range steps {
		if st.occupy {
			ln, err := net.Listen("tcp", last)
			if err == nil {
				t.Cleanup(func() { ln.Close() })
			} else {
				require.ErrorIs(t, err, syscall.EADDRINUSE, "%s: taken by another test meanwhile is as good", st.name)
			}
		}
		lines := runTopics(t, stateDir)
		started := lineWith(lines, "embedded broker started")
		require.NotEmpty(t, started, "%s: %s", st.name, strings.Join(lines, "\n"))
		a := logAttrs(started)
		addr := a["addr"]
		require.Regexp(t, `^127\.0\.0\.1:\d+$`, addr, st.name)
		written, err := os.ReadFile(filepath.Join(stateDir, config.KafkaBrokersFile))
		require.NoError(t, err, st.name)
		require.Equal(t, addr+"\n", string(written), "%s: the address file holds the address of this start", st.name)
		require.Equal(t, filepath.Join(stateDir, config.KafkaBrokersFile), a["addr_file"], st.name)
		require.Equal(t, "chime", a["sasl_user"], st.name)
		require.Equal(t, credential, a["credential"], st.name)
		for _, want := range []string{"CHIME_BROKERS=" + addr, "CHIME_KAFKA_SASL_USER=chime", "CHIME_KAFKA_SASL_PASSWORD=$(cut -d: -f2 " + credential + ")", "producer.SASLPlain"} {
			require.Contains(t, a["hint"], want, st.name)
		}
		moved := lineWith(lines, "embedded broker moved")
		switch {
		case st.wantSame:
			require.Equal(t, last, addr, st.name)
		case last != "":
			require.NotEqual(t, last, addr, st.name)
		}
		if st.occupy {
			require.Equal(t, last, logAttrs(moved)["was"], "%s: the warning names the lost address", st.name)
			require.Equal(t, addr, logAttrs(moved)["addr"], st.name)
		} else {
			require.Empty(t, moved, st.name)
		}
		last = addr
		if st.name == "first start" {
			requireOperationsDocShows(t, started, stateDir, addr)
		}
	}
}

// requireOperationsDocShows holds the line docs/operations.md shows for
// chime dev's start to the line chime logs (with the doc's address and
// state dir).
func requireOperationsDocShows(t *testing.T, line, stateDir, addr string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	documented := lineWith(strings.Split(string(doc), "\n"), "embedded broker started")
	require.NotEmpty(t, documented, "docs/operations.md shows the embedded broker's start")
	docAddr := logAttrs(documented)["addr"]
	_, line, _ = strings.Cut(line, " level=")
	line = "level=" + line
	line = strings.ReplaceAll(line, "role=topics", "role=dev")
	line = strings.ReplaceAll(line, stateDir, ".chime")
	line = strings.ReplaceAll(line, addr, docAddr)
	require.Equal(t, line, documented, "docs/operations.md's line, as chime dev logs it now")
}

// TestEmbeddedBrokerStopsLast: every process runs its parts in one group
// whose first part is the embedded broker, so the broker stops after every
// part of the role: a part that writes to it as it stops (a processor's
// last commits, the API's producer flushing) still reaches it. A role that
// fails while building its parts stops the broker too, releasing its data
// dir for the next start.
func TestEmbeddedBrokerStopsLast(t *testing.T) {
	t.Parallel()
	// GOGC set: runRole leaves the test process's memory settings alone.
	lookupEnv := func(k string) (string, bool) {
		if k == "GOGC" {
			return "100", true
		}
		return "", false
	}
	tests := []struct {
		name    string
		failing bool // the role fails after adding its part
	}{
		{name: "stopped on a signal"},
		{name: "the role fails", failing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stateDir := filepath.Join(t.TempDir(), "state")
			signal, stop := context.WithCancel(context.Background())
			defer stop()
			wrote := make(chan error, 1)
			r := func(e *env, g *lifecycle.Group) error {
				p := lifecycle.Func("writer", func(ctx context.Context, ready func()) error {
					ready()
					<-ctx.Done()
					wrote <- produceOne(e)
					return nil
				})
				g.Add(p).OnReady(stop, p) // the signal, once the role runs
				if tt.failing {
					return errors.New("boom")
				}
				return nil
			}
			var stderr syncBuffer
			err := runRole(signal, proc{args: []string{"--state-dir", stateDir, "--partitions", "1"}, lookupEnv: lookupEnv, stdout: io.Discard, stderr: &stderr}, "test", r)
			if tt.failing {
				require.EqualError(t, err, "boom")
				select {
				case err := <-wrote:
					t.Fatalf("a part of a role that failed to build started: %v", err)
				default:
				}
			} else {
				require.NoError(t, err, stderr.String())
				require.NoError(t, <-wrote, "the broker took the write of a part stopping")
				require.Contains(t, stderr.String(), `msg="stopped cleanly"`)
			}
			b, err := broker.Start(broker.Options{DataDir: filepath.Join(stateDir, "broker")})
			require.NoError(t, err, "the process released the broker's data dir")
			require.NoError(t, b.Close())
		})
	}
}

// produceOne writes a record to the broker of e, as a part flushing on
// its stop does.
func produceOne(e *env) error {
	cl, err := kgo.NewClient(append(e.sasl.Kgo(), kgo.SeedBrokers(e.brokers...))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: e.cfg.Topics().All()[0].Name, Value: []byte("last")}).FirstErr()
}
