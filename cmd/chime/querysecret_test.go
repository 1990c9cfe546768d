package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/freeport"
)

var apiListeningLine = regexp.MustCompile(`msg="api listening".* addr=(\S+)`)

// A `chime api` whose CHIME_QUERY_SECRET the schedulers refuse can
// neither read nor create jobs: it says so at start and is not ready,
// GET /readyz naming the scheduler that refuses it. (It used to report
// ready and answer 503 to every create.)
func TestAPIWithAWrongQuerySecretIsNotReady(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	port := freeport.For(t)
	startDevAPI(t, stateDir, port)
	env := append(standaloneAPIEnv(t, stateDir, port, readAdminToken(t, stateDir)), "CHIME_QUERY_SECRET=not-the-schedulers-query-secret")
	addr, refused := make(chan string, 1), make(chan string, 1)
	var ready atomic.Bool
	startChildEnv(t, env, nil, func(line string) {
		if m := apiListeningLine.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
		if strings.Contains(line, `msg="api not ready`) {
			select {
			case refused <- line:
			default:
			}
		}
		if apiReadyLine.MatchString(line) {
			ready.Store(true)
		}
	}, "api")
	base := "http://" + <-addr
	select {
	case line := <-refused:
		require.Contains(t, line, "refuses this API process's query signature")
		require.Contains(t, line, "the signature does not match")
	case <-time.After(90 * time.Second):
		t.Fatal("no `api not ready` line saying the schedulers refuse the query secret")
	}
	res, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", raw)
	var p map[string]any
	require.NoError(t, json.Unmarshal(raw, &p))
	require.Contains(t, p["detail"], "query secret: the scheduler at ")
	require.Contains(t, p["detail"], "refuses this API process's query signature")
	require.False(t, ready.Load(), "no `api ready` line")
}
