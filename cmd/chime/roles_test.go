package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/kafkacluster"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
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
	rs := newRoles(t, c.Brokers(), tt)
	rs.startEach(2)
	load := rs.startLoad("roles")

	for _, role := range []string{"scheduler", "dispatcher", "breaker", "api"} {
		killed := rs.kill9(role)
		if g, ok := rs.groupOf(role); ok {
			waitFor(t, 2*time.Minute, role+"'s survivor owns the group", func() bool { return rs.stableMembers(g) == 1 })
		}
		t.Logf("kill -9 %s: group settled after %s", role, time.Since(killed).Round(100*time.Millisecond))
		time.Sleep(2 * time.Second) // load on the survivors before the next kill
	}
	accepted := load.stop()
	rs.waitAllCalled(accepted)
	rs.requireAllRunning()
	t.Logf("longest pause between two callbacks: %s", rs.longestPause().Round(10*time.Millisecond))
	// The surviving API holds no job rows: it reads them from the
	// surviving scheduler, which took every partition over.
	for _, id := range accepted[:min(len(accepted), 20)] {
		waitFor(t, time.Minute, "job "+id+" completed, read through the API", func() bool {
			st, body, err := rs.getJSON(rs.api(0), "/v1/namespaces/roles/jobs/"+id)
			return err == nil && st == 200 && body["state"] == "completed"
		})
	}
}

// TestBrokerKillLosesNothing runs chime's roles as processes on a
// three-node Apache Kafka cluster (replication 3, min.insync.replicas 2),
// kills -9 the broker that coordinates the dispatchers' group under load,
// restarts it later, and checks that every job the API accepted is called
// back and that no chime process had to be restarted. It needs Kafka's
// jars (`make kafka-jars`; `make test-kafka` runs it) and is skipped on
// the kfake pass, which has no brokers to kill.
func TestBrokerKillLosesNothing(t *testing.T) {
	t.Parallel()
	libs := kafkacluster.FindLibs()
	if libs == "" || os.Getenv(kafkatest.EnvBrokers) == "" {
		t.Skip("needs Apache Kafka: run under `make test-kafka`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kc, err := kafkacluster.Start(ctx, kafkacluster.Options{Libs: libs, Dir: t.TempDir(), Nodes: 3, HeapMB: 384, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(kc.Close)

	tt := schema.NewTopics(kafkatest.UniquePrefix(t))
	rs := newRoles(t, kc.Addrs(), tt, "CHIME_REPLICATION=3")
	rs.startEach(1)
	load := rs.startLoad("brokers")

	victim := rs.coordinator(tt.DispatcherGroup()) - 1 // node IDs are 1-based
	require.GreaterOrEqual(t, victim, 0)
	// The broker stays down for a while under load (leaders and the
	// coordinator move), then comes back and catches up.
	const down = 15 * time.Second
	before := rs.called()
	require.NoError(t, kc.Kill(victim))
	killed := time.Now()
	t.Logf("kill -9 broker %d (the dispatchers' group coordinator); %d jobs called back before", victim+1, before)
	waitFor(t, 2*time.Minute, "callbacks continuing on two brokers", func() bool { return rs.called() >= before+200 })
	time.Sleep(time.Until(killed.Add(down)))
	t.Logf("%d jobs called back in the %s broker %d was down", rs.called()-before, time.Since(killed).Round(time.Second), victim+1)
	require.NoError(t, kc.Restart(victim))
	require.NoError(t, kc.WaitReady(ctx, 3))
	restarted := rs.called()
	waitFor(t, 2*time.Minute, "callbacks continuing after the restart", func() bool { return rs.called() >= restarted+200 })
	rs.waitAllCalled(load.stop())
	rs.requireAllRunning()
	t.Logf("longest pause between two callbacks: %s", rs.longestPause().Round(10*time.Millisecond))
}

// roles runs chime role processes against brokers and counts the
// callbacks they make to a receiver of the test.
type roles struct {
	t       *testing.T
	brokers []string
	tt      schema.Topics
	env     []string
	root    string
	adm     *kadm.Client

	mu    sync.Mutex
	procs map[string][]*devProc
	apis  []string
	calls map[string]int // by job id
	last  time.Time      // of the last callback
	pause time.Duration  // the longest time without a callback
	rcv   *httptest.Server
	seq   int
}

const (
	rolesAdmin       = "roles-admin-token"
	rolesQuerySecret = "roles-query-secret-0123"
)

func newRoles(t *testing.T, brokers []string, tt schema.Topics, env ...string) *roles {
	rs := &roles{t: t, brokers: brokers, tt: tt, env: env, root: t.TempDir(), procs: map[string][]*devProc{}, calls: map[string]int{}}
	rs.rcv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.calls[strings.TrimPrefix(r.URL.Path, "/j/")]++
		if now := time.Now(); !rs.last.IsZero() {
			rs.pause = max(rs.pause, now.Sub(rs.last))
			rs.last = now
		} else {
			rs.last = now
		}
		rs.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rs.rcv.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	rs.adm = kadm.NewClient(cl)
	return rs
}

// start runs one more process of role; an api is started when it says
// it is ready.
func (rs *roles) start(role string) {
	t := rs.t
	t.Helper()
	rs.mu.Lock()
	rs.seq++
	dir := filepath.Join(rs.root, fmt.Sprintf("%s%d", role, rs.seq))
	rs.mu.Unlock()
	env := append([]string{
		"CHIME_BROKERS=" + strings.Join(rs.brokers, ","),
		"CHIME_TOPIC_PREFIX=" + rs.tt.Prefix,
		"CHIME_PARTITIONS=4",
		"CHIME_STATE_DIR=" + dir,
		"CHIME_ADMIN_TOKEN=" + rolesAdmin,
		// Each process has its own state dir: they share the query secret
		// by configuration, as on separate hosts.
		"CHIME_QUERY_SECRET=" + rolesQuerySecret,
		"CHIME_DISPATCHER_ALLOW_LOOPBACK=true",
		"CHIME_CLICKHOUSE_DSN=",
		"CHIME_METRICS_ADDR=",
		"CHIME_API_ADDR=127.0.0.1:0",
	}, rs.env...)
	addr := make(chan string, 1)
	p := startChildEnv(t, env, nil, func(line string) {
		if m := apiReadyLine.FindStringSubmatch(line); m != nil {
			select {
			case addr <- "http://" + m[1]:
			default:
			}
		}
	}, role)
	rs.mu.Lock()
	rs.procs[role] = append(rs.procs[role], p)
	rs.mu.Unlock()
	if role != "api" {
		return
	}
	select {
	case a := <-addr:
		rs.mu.Lock()
		rs.apis = append(rs.apis, a)
		rs.mu.Unlock()
	case err := <-p.exited:
		t.Fatalf("chime api exited before it was ready: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("chime api not ready within 90s")
	}
}

// startEach starts n processes of every role and waits until each role's
// group is stable with n members.
func (rs *roles) startEach(n int) {
	for _, role := range []string{"scheduler", "dispatcher", "breaker", "api"} {
		for range n {
			rs.start(role)
		}
	}
	for _, g := range rs.groups() {
		waitFor(rs.t, 3*time.Minute, fmt.Sprintf("%s stable with %d members", g, n), func() bool { return rs.stableMembers(g) == n })
	}
}

// kill9 kills the oldest process of role with SIGKILL.
func (rs *roles) kill9(role string) time.Time {
	rs.mu.Lock()
	p := rs.procs[role][0]
	rs.procs[role] = rs.procs[role][1:]
	if role == "api" {
		rs.apis = rs.apis[1:]
	}
	rs.mu.Unlock()
	require.NoError(rs.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
	return time.Now()
}

// requireAllRunning fails if a process not killed by the test exited.
func (rs *roles) requireAllRunning() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for role, ps := range rs.procs {
		for _, p := range ps {
			select {
			case err := <-p.exited:
				rs.t.Fatalf("a chime %s process exited by itself: %v", role, err)
			default:
			}
		}
	}
}

func (rs *roles) groupOf(role string) (string, bool) {
	g, ok := map[string]string{
		"scheduler":  rs.tt.SchedulerGroup(),
		"dispatcher": rs.tt.DispatcherGroup(),
		"breaker":    rs.tt.BreakerGroup(),
	}[role]
	return g, ok
}

func (rs *roles) groups() []string {
	var out []string
	for _, r := range []string{"scheduler", "dispatcher", "breaker"} {
		g, _ := rs.groupOf(r)
		out = append(out, g)
	}
	return out
}

// stableMembers is the number of members of a stable group, or -1.
func (rs *roles) stableMembers(group string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := rs.adm.DescribeGroups(ctx, group)
	if err != nil {
		return -1
	}
	g, ok := gs[group]
	if !ok || g.Err != nil || g.State != "Stable" {
		return -1
	}
	return len(g.Members)
}

// coordinator is the node ID of group's coordinator (-1 if unknown).
func (rs *roles) coordinator(group string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := rs.adm.DescribeGroups(ctx, group)
	if err != nil {
		return -1
	}
	return int(gs[group].Coordinator.NodeID)
}

func (rs *roles) api(i int) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.apis[i%len(rs.apis)]
}

func (rs *roles) request(base, method, path, idemKey string, body []byte) (int, error) {
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+rolesAdmin)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// getJSON GETs path from an API and decodes its answer.
func (rs *roles) getJSON(base, path string) (int, map[string]any, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+rolesAdmin)
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var body map[string]any
	err = json.NewDecoder(res.Body).Decode(&body)
	return res.StatusCode, body, err
}

// createNamespace creates ns and waits until every API sees it.
func (rs *roles) createNamespace(ns string) {
	waitFor(rs.t, time.Minute, "namespace "+ns+" created", func() bool {
		st, err := rs.request(rs.api(0), "PUT", "/v1/namespaces/"+ns, "", []byte(`{}`))
		return err == nil && st < 300
	})
	rs.mu.Lock()
	n := len(rs.apis)
	rs.mu.Unlock()
	waitFor(rs.t, time.Minute, "every API sees namespace "+ns, func() bool {
		for i := range n {
			if st, err := rs.request(rs.api(i), "GET", "/v1/namespaces/"+ns, "", nil); err != nil || st != 200 {
				return false
			}
		}
		return true
	})
}

// longestPause is the longest time without a callback since the first.
func (rs *roles) longestPause() time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.pause
}

// called is the number of jobs called back at least once.
func (rs *roles) called() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.calls)
}

type load struct {
	cancel   context.CancelFunc
	done     chan struct{}
	accepted sync.Map
	batches  atomic.Int64
}

// startLoad creates namespace ns and posts a batch of 10 jobs due in 2 s
// every 200 ms, through the APIs in turn; a batch whose API is gone (or
// that failed) is posted again, same job ids and Idempotency-Key, to the
// next one. It returns once callbacks flow.
func (rs *roles) startLoad(ns string) *load {
	rs.createNamespace(ns)
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for b := 0; ctx.Err() == nil; b++ {
			var jobs []map[string]any
			var ids []string
			for j := range 10 {
				id := fmt.Sprintf("b%05d-%d", b, j)
				ids = append(ids, id)
				jobs = append(jobs, map[string]any{"id": id, "schedule": map[string]any{"in": "2s"},
					"callback": map[string]any{"url": rs.rcv.URL + "/j/" + id}})
			}
			raw, _ := json.Marshal(map[string]any{"jobs": jobs})
			for try := 0; ctx.Err() == nil; try++ {
				st, err := rs.request(rs.api(b+try), "POST", "/v1/namespaces/"+ns+"/jobs:batch", fmt.Sprintf("batch-%d", b), raw)
				if err == nil && st < 300 {
					for _, id := range ids {
						l.accepted.Store(id, true)
					}
					l.batches.Add(1)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	waitFor(rs.t, time.Minute, "callbacks flowing", func() bool { return rs.called() >= 50 })
	return l
}

// stop ends the load and returns the ids of the jobs accepted.
func (l *load) stop() []string {
	l.cancel()
	<-l.done
	var ids []string
	l.accepted.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	return ids
}

// waitAllCalled waits until every job in ids was called back.
func (rs *roles) waitAllCalled(ids []string) {
	t := rs.t
	t.Helper()
	require.NotEmpty(t, ids)
	missing := func() int {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		n := 0
		for _, id := range ids {
			if rs.calls[id] == 0 {
				n++
			}
		}
		return n
	}
	waitFor(t, 3*time.Minute, "a callback for every accepted job", func() bool { return missing() == 0 })
	rs.mu.Lock()
	repeated := 0
	for _, n := range rs.calls {
		repeated += n - 1
	}
	rs.mu.Unlock()
	t.Logf("%d jobs accepted, all called back; %d calls repeated (at-least-once across kills)", len(ids), repeated)
}
