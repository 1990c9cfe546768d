package main

import (
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
// moves and warns. Every start logs the address and where the SASL
// credential is, as docs/operations.md shows it.
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
