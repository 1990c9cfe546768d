package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/infra/kafkatest"
)

// TestKillEachRoleProcessLosesNothing runs chime as separate role
// processes, two each of api, scheduler, dispatcher and breaker, on the
// test's broker (kfake, or Apache Kafka under `make test-kafka`). Jobs are
// posted through both APIs at a steady rate while one process of each role
// is killed with SIGKILL in turn, each time after the survivors took the
// role's partitions over. Every job an API accepted must be called back.
// (The sink's crash safety has its own tests in analytics/sink; the
// failover benchmark kills a sink process too.)
func TestKillEachRoleProcessLosesNothing(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	tt := c.Topics()
	c.Provision(t, tt, 4)
	const admin = "roles-admin-token"
	root := t.TempDir()

	var mu sync.Mutex
	calls := map[string]int{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[strings.TrimPrefix(r.URL.Path, "/j/")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)

	type proc struct {
		role string
		p    *devProc
		addr string // api: base URL
	}
	start := func(role string, i int) *proc {
		env := []string{
			"CHIME_BROKERS=" + strings.Join(c.Brokers(), ","),
			"CHIME_TOPIC_PREFIX=" + tt.Prefix,
			"CHIME_PARTITIONS=4",
			"CHIME_STATE_DIR=" + filepath.Join(root, fmt.Sprintf("%s%d", role, i)),
			"CHIME_ADMIN_TOKEN=" + admin,
			"CHIME_DISPATCHER_ALLOW_LOOPBACK=true",
			"CHIME_CLICKHOUSE_DSN=",
			"CHIME_METRICS_ADDR=",
			"CHIME_API_ADDR=127.0.0.1:0",
		}
		addr := make(chan string, 1)
		p := startChildEnv(t, env, nil, func(line string) {
			if m := apiReadyLine.FindStringSubmatch(line); m != nil {
				select {
				case addr <- "http://" + m[1]:
				default:
				}
			}
		}, role)
		pr := &proc{role: role, p: p}
		if role == "api" {
			select {
			case pr.addr = <-addr:
			case err := <-p.exited:
				t.Fatalf("chime api exited before it was ready: %v", err)
			case <-time.After(90 * time.Second):
				t.Fatal("chime api not ready within 90s")
			}
		}
		return pr
	}
	procs := map[string][]*proc{}
	for _, role := range []string{"scheduler", "dispatcher", "breaker", "api"} {
		for i := range 2 {
			procs[role] = append(procs[role], start(role, i))
		}
	}
	groupOf := map[string]string{
		"scheduler":  tt.SchedulerGroup(),
		"dispatcher": dispatcher.GroupName(tt),
		"breaker":    tt.BreakerGroup(),
	}
	adm := c.Admin(t)
	for role, g := range groupOf {
		waitUntil(t, 3*time.Minute, role+"'s group stable with two members", func() bool { return stableMembers(adm, g) == 2 })
	}

	apis := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, p := range procs["api"] {
			out = append(out, p.addr)
		}
		return out
	}
	post := func(base, method, path, body string) (int, error) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	waitUntil(t, time.Minute, "the namespace created", func() bool {
		st, err := post(apis()[0], "PUT", "/v1/namespaces/roles", `{}`)
		return err == nil && st < 300
	})
	waitUntil(t, time.Minute, "both APIs see the namespace", func() bool {
		for _, a := range apis() {
			if st, err := post(a, "GET", "/v1/namespaces/roles", ""); err != nil || st != 200 {
				return false
			}
		}
		return true
	})

	// The load: a batch of 10 jobs due in 2 s every 200 ms, through the
	// APIs in turn; a batch whose API is gone is sent again (same job ids,
	// same Idempotency-Key) to the other.
	var accepted sync.Map
	var batches atomic.Int64
	loadCtx, stopLoad := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for b := 0; loadCtx.Err() == nil; b++ {
			var jobs []map[string]any
			var ids []string
			for j := range 10 {
				id := fmt.Sprintf("b%04d-%d", b, j)
				ids = append(ids, id)
				jobs = append(jobs, map[string]any{"id": id, "schedule": map[string]any{"in": "2s"},
					"callback": map[string]any{"url": rcv.URL + "/j/" + id}})
			}
			raw, _ := json.Marshal(map[string]any{"jobs": jobs})
			for try := 0; loadCtx.Err() == nil; try++ {
				as := apis()
				base := as[(b+try)%len(as)]
				req, _ := http.NewRequest("POST", base+"/v1/namespaces/roles/jobs:batch", bytes.NewReader(raw))
				req.Header.Set("Authorization", "Bearer "+admin)
				req.Header.Set("Idempotency-Key", fmt.Sprintf("batch-%d", b))
				res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode < 300 {
						for _, id := range ids {
							accepted.Store(id, true)
						}
						batches.Add(1)
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case <-loadCtx.Done():
			case <-tick.C:
			}
		}
	}()
	waitUntil(t, time.Minute, "callbacks flowing", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 50
	})

	for _, role := range []string{"scheduler", "dispatcher", "breaker", "api"} {
		mu.Lock()
		victim := procs[role][0]
		procs[role] = procs[role][1:]
		mu.Unlock()
		require.NoError(t, victim.p.cmd.Process.Signal(syscall.SIGKILL))
		<-victim.p.exited
		killed := time.Now()
		if g, ok := groupOf[role]; ok {
			waitUntil(t, 2*time.Minute, role+"'s survivor owns the group", func() bool { return stableMembers(adm, g) == 1 })
		}
		t.Logf("kill -9 %s: group settled after %s", role, time.Since(killed).Round(100*time.Millisecond))
		time.Sleep(2 * time.Second) // load under the survivors before the next kill
	}
	stopLoad()
	<-loadDone

	var want []string
	accepted.Range(func(k, _ any) bool { want = append(want, k.(string)); return true })
	require.NotEmpty(t, want)
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, id := range want {
			if calls[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	waitUntil(t, 3*time.Minute, "a callback for every accepted job", func() bool { return len(missing()) == 0 })
	mu.Lock()
	repeated := 0
	for _, n := range calls {
		repeated += n - 1
	}
	mu.Unlock()
	t.Logf("%d jobs accepted in %d batches, all called back; %d calls repeated (at-least-once across kills)", len(want), batches.Load(), repeated)
}

// stableMembers is the number of members of a stable group, or -1.
func stableMembers(adm *kadm.Client, group string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return -1
	}
	g, ok := gs[group]
	if !ok || g.Err != nil || g.State != "Stable" {
		return -1
	}
	return len(g.Members)
}
