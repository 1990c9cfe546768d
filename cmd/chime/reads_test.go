package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
)

// Job reads as a client meets them: an API process shows its own writes
// in its listings and counts at once, and a scheduler joining or leaving
// costs only the reads of the partitions that move.

// checkQuickStart runs the README's quick start against dev: the job just
// created is in `chime client jobs acme` at once (five times over, each
// job another id).
func checkQuickStart(t *testing.T, dev *devAPI, admin string) {
	t.Helper()
	waitFor(t, 90*time.Second, "chime dev ready (its scheduler too)", func() bool {
		st, _ := dev.call(t, "GET", "/readyz", "", "")
		return st == 200
	})
	st, out := dev.call(t, "PUT", "/v1/namespaces/acme", admin, `{}`)
	require.Equal(t, 201, st, "%v", out)
	env := map[string]string{"CHIME_API_URL": dev.base, "CHIME_TOKEN": admin}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for i := range 5 {
		id := fmt.Sprintf("tick%d", i)
		st, out = dev.call(t, "POST", "/v1/namespaces/acme/jobs", admin,
			`{"id": "`+id+`", "schedule": {"every": "5s"}, "callback": {"url": "http://127.0.0.1:9999/hook", "body": {"hello": "chime"}}}`)
		require.Equal(t, 201, st, "%v", out)
		var stdout, stderr strings.Builder
		code := runClient(context.Background(), proc{args: []string{"jobs", "acme"}, lookupEnv: lookup, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr})
		require.Equal(t, 0, code, stderr.String())
		require.Regexp(t, `(?m)^`+id+`\s+scheduled\s`, stdout.String(), "the job just created is listed")
	}
	for i := range 5 {
		st, out = dev.call(t, "DELETE", fmt.Sprintf("/v1/namespaces/acme/jobs/tick%d", i), admin, "")
		require.Equal(t, 200, st, "%v", out)
	}
}

// checkReadsItsWrites: through api (a `chime api` of its own, reading
// the jobs from a scheduler in another process) with a quota of 20
// pending jobs, 20 creates each followed at once by a listing are all
// listed; a pause and a cancel show at once in the state filters, and the
// cancel in the pending-jobs count (the quota then has room for one
// more). On a namespace of its own.
func checkReadsItsWrites(t *testing.T, api *devAPI, admin string) {
	t.Helper()
	const ns = "ryw"
	st, out := api.call(t, "PUT", "/v1/namespaces/"+ns, admin, `{}`)
	require.Equal(t, 201, st, "%v", out)
	st, out = api.call(t, "POST", "/v1/namespaces/"+ns+"/keys", admin, "")
	require.Equal(t, 201, st, "%v", out)
	key := out["key"].(string)

	create := func(id string) int {
		st, _ := api.call(t, "POST", "/v1/namespaces/"+ns+"/jobs", key, `{"id": "`+id+`", "schedule": {"in": "1h"}, "callback": {"url": "http://127.0.0.1:9/x"}}`)
		return st
	}
	list := func(query string) []string {
		t.Helper()
		st, out := api.call(t, "GET", "/v1/namespaces/"+ns+"/jobs?limit=500"+query, key, "")
		require.Equal(t, 200, st, "%v", out)
		var ids []string
		for _, j := range out["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["id"].(string))
		}
		slices.Sort(ids)
		return ids
	}
	var want []string
	missed := 0
	for i := range 20 {
		id := fmt.Sprintf("ryw-%02d", i)
		require.Equal(t, 201, create(id), "create %d", i+1)
		want = append(want, id)
		if got := list(""); !slices.Equal(got, want) {
			missed++
			t.Logf("the listing right after create %d: %v", i+1, got)
		}
	}
	require.Zero(t, missed, "listings right after a create that missed a job")
	// Paged as a client would, three a page.
	var paged []string
	cursor := ""
	for range 10 {
		st, out := api.call(t, "GET", "/v1/namespaces/"+ns+"/jobs?limit=3&cursor="+url.QueryEscape(cursor), key, "")
		require.Equal(t, 200, st, "%v", out)
		for _, j := range out["jobs"].([]any) {
			paged = append(paged, j.(map[string]any)["id"].(string))
		}
		if cursor, _ = out["next_cursor"].(string); cursor == "" {
			break
		}
	}
	slices.Sort(paged)
	require.Equal(t, want, paged, "every job once, three a page")
	require.Equal(t, 429, create("ryw-20"), "20 jobs pending: the quota is full")

	st, out = api.call(t, "POST", "/v1/namespaces/"+ns+"/jobs/ryw-03/pause", key, "")
	require.Equal(t, 200, st, "%v", out)
	require.Equal(t, []string{"ryw-03"}, list("&state=paused"), "the pause, at once")
	st, out = api.call(t, "DELETE", "/v1/namespaces/"+ns+"/jobs/ryw-07", key, "")
	require.Equal(t, 200, st, "%v", out)
	require.Equal(t, []string{"ryw-07"}, list("&state=cancelled"), "the cancel, at once")
	require.NotContains(t, list("&state=scheduled"), "ryw-07")
	require.Equal(t, 201, create("ryw-20"), "the cancel made room at once")
	require.Equal(t, 429, create("ryw-21"))
}

// TestSchedulerJoinAndLeaveCostOnlyMovedPartitions: a client creates jobs
// with a namespace key (under the default pending-jobs quota) and reads
// them through a `chime api` for 30 s, while a second `chime scheduler`
// joins the group and later leaves it cleanly. No create fails, and only
// reads of the partitions that moved may be 503 (with Retry-After).
func TestSchedulerJoinAndLeaveCostOnlyMovedPartitions(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	tt := c.Topics()
	c.Provision(t, tt, 4)
	rs := newRoles(t, c.Brokers(), tt)
	for _, role := range []string{"scheduler", "breaker", "api"} {
		rs.start(role)
	}
	waitFor(t, 3*time.Minute, "one scheduler", func() bool { return rs.stableMembers(tt.SchedulerGroup()) == 1 })
	first := rs.schedulerOwners()
	require.Len(t, first, 1)
	var firstAddr string
	for a := range first {
		firstAddr = a
	}

	rs.createNamespace("move")
	st, out, err := rs.call(rs.api(0), "POST", "/v1/namespaces/move/keys", rolesAdmin, "")
	require.NoError(t, err)
	require.Equal(t, 201, st, "%v", out)
	cl := &moveClient{rs: rs, key: out["key"].(string), busyRows: map[int32]int{}}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.run(ctx)
	}()

	time.Sleep(5 * time.Second) // reads and creates before anything moves
	rs.start("scheduler")
	waitFor(t, 2*time.Minute, "two schedulers", func() bool { return rs.stableMembers(tt.SchedulerGroup()) == 2 })
	var moved []int32
	for addr, ps := range rs.schedulerOwners() {
		if addr != firstAddr {
			moved = ps
		}
	}
	require.NotEmpty(t, moved, "the second scheduler took partitions")
	time.Sleep(5 * time.Second)
	rs.stop("scheduler", 1)
	waitFor(t, 2*time.Minute, "one scheduler again", func() bool { return rs.stableMembers(tt.SchedulerGroup()) == 1 })
	<-done

	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("%d creates, %d row reads, %d listings; 503s: rows by partition %v (moved: %v), listings %d", cl.creates, cl.rows, cl.listings, cl.busyRows, moved, cl.busyListings)
	require.Empty(t, cl.wrong, "every answer a 201, a 200 or a 503 with Retry-After")
	require.Zero(t, cl.failedCreates, "creates that failed")
	require.Positive(t, cl.rows)
	for p, n := range cl.busyRows {
		require.Contains(t, moved, p, "%d reads of partition %d, which did not move, were 503", n, p)
	}
}

// moveClient creates a job and reads one back, in turn, and a listing
// every tenth time.
type moveClient struct {
	rs  *roles
	key string

	mu                          sync.Mutex
	created                     []string
	creates, rows, listings     int
	failedCreates, busyListings int
	busyRows                    map[int32]int
	wrong                       []string
}

func (m *moveClient) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("m%05d", i)
		st, out, err := m.rs.call(m.rs.api(0), "POST", "/v1/namespaces/move/jobs", m.key, `{"id": "`+id+`", "schedule": {"in": "1h"}, "callback": {"url": "http://127.0.0.1:9/x"}}`)
		m.mu.Lock()
		m.creates++
		if err != nil || st != 201 {
			m.failedCreates++
			m.note(fmt.Sprintf("create %s: %d %v %v", id, st, out, err))
		} else {
			m.created = append(m.created, id)
		}
		if len(m.created) == 0 {
			m.mu.Unlock()
			continue
		}
		read := m.created[(i*7)%len(m.created)]
		m.mu.Unlock()

		st, out, err = m.rs.call(m.rs.api(0), "GET", "/v1/namespaces/move/jobs/"+read, m.key, "")
		m.mu.Lock()
		m.rows++
		switch {
		case err == nil && st == 200:
		case err == nil && st == 503 && out["retry_after"] != "":
			m.busyRows[processors.PartitionOf(schema.JobKey("move", read), 4)]++
		default:
			m.note(fmt.Sprintf("GET %s: %d %v %v", read, st, out, err))
		}
		m.mu.Unlock()

		if i%10 == 0 {
			st, out, err = m.rs.call(m.rs.api(0), "GET", "/v1/namespaces/move/jobs?limit=5", m.key, "")
			m.mu.Lock()
			m.listings++
			switch {
			case err == nil && st == 200:
			case err == nil && st == 503 && out["retry_after"] != "":
				m.busyListings++
			default:
				m.note(fmt.Sprintf("listing: %d %v %v", st, out, err))
			}
			m.mu.Unlock()
		}
		time.Sleep(20 * time.Millisecond) // pacing only: the machine is shared
	}
}

// note records a wrong answer; call with mu held.
func (m *moveClient) note(s string) {
	if len(m.wrong) < 20 {
		m.wrong = append(m.wrong, s)
	}
}

// call sends a request with token and decodes the JSON answer; a 503's
// Retry-After is set in it as "retry_after".
func (rs *roles) call(base, method, path, token, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	if res.StatusCode == http.StatusServiceUnavailable {
		out["retry_after"] = res.Header.Get("Retry-After")
	}
	return res.StatusCode, out, nil
}

// stop stops the i-th process of role cleanly (SIGTERM) and waits for it.
func (rs *roles) stop(role string, i int) {
	rs.mu.Lock()
	p := rs.procs[role][i]
	rs.procs[role] = slices.Delete(rs.procs[role], i, i+1)
	rs.mu.Unlock()
	require.NoError(rs.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(rs.t, err, "chime %s stopped cleanly", role)
	case <-time.After(time.Minute):
		rs.t.Fatalf("chime %s did not stop within a minute of SIGTERM", role)
	}
}

// schedulerOwners is the job-commands partitions of each member of the
// stable scheduler group, by the query address it advertises.
func (rs *roles) schedulerOwners() map[string][]int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := rs.adm.DescribeGroups(ctx, rs.tt.SchedulerGroup())
	require.NoError(rs.t, err)
	g := gs[rs.tt.SchedulerGroup()]
	require.Equal(rs.t, "Stable", g.State)
	out := map[string][]int32{}
	for _, m := range g.Members {
		meta, ok := m.Join.AsConsumer()
		require.True(rs.t, ok)
		as, ok := m.Assigned.AsConsumer()
		require.True(rs.t, ok)
		addr := groups.Advertised(meta.UserData)
		for _, tp := range as.Topics {
			if tp.Topic == rs.tt.JobCommands() {
				out[addr] = append(out[addr], tp.Partitions...)
			}
		}
		slices.Sort(out[addr])
	}
	return out
}
