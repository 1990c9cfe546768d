package jobquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
	"github.com/chime-sched/chime/views/jobquery"
)

// The rebalance tests read every job of a set continuously through a real
// API process (its HTTP routes, over the router) while scheduler instances
// join, stop and die. Every answer must be right or a 503 with
// Retry-After; the 503s must stop once the group has settled.

const adminToken = "rebalance-test-admin-token"

// apiProcess is an API process on the test's broker: its own views of
// the namespace and breaker tables, and job reads through the router.
type apiProcess struct {
	base string
	jobs api.JobView
	hc   *http.Client
}

func (b *bundle) startAPI() *apiProcess {
	t := b.t
	t.Helper()
	nsView, err := views.NewNamespaces(processors.Client{Brokers: b.cluster.Brokers(), ClientID: "api-namespaces", Logger: testLogger(t)}, b.topics)
	require.NoError(t, err)
	brkView, err := views.NewBreakers(processors.Client{Brokers: b.cluster.Brokers(), ClientID: "api-breakers", Logger: testLogger(t)}, b.topics)
	require.NoError(t, err)
	be, err := api.NewBackend(api.BackendConfig{Brokers: b.cluster.Brokers(), Topics: b.topics, Logger: testLogger(t),
		Partitions: testPartitions, QuerySecret: testSecret, Namespaces: nsView, Breakers: brkView})
	require.NoError(t, err)
	t.Cleanup(be.Close) // after the parts stopped (cleanups run last first)
	cfg := be.Config()
	cfg.AdminToken, cfg.Logger = adminToken, testLogger(t)
	app, err := api.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lifecycletest.Start(t, nsView, brkView, api.Listen(app, ln))
	return &apiProcess{base: "http://" + ln.Addr().String(), jobs: be.Jobs, hc: &http.Client{Timeout: 30 * time.Second}}
}

// get answers status, Retry-After and the JSON body of GET path.
func (p *apiProcess) get(path string) (int, string, map[string]any, error) {
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := p.hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer res.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		return 0, "", nil, fmt.Errorf("GET %s: %d %q is not JSON", path, res.StatusCode, raw)
	}
	return res.StatusCode, res.Header.Get("Retry-After"), body, nil
}

// readers read one namespace's jobs through an API process in rounds
// (every job's GET, the whole listing, the live count) until stopped,
// and judge every answer.
type readers struct {
	t    *testing.T
	api  *apiProcess
	ns   string
	want map[string]chimev1.JobStatus
	list []string // the whole listing, newest first
	live int64

	mu sync.Mutex
	// rounds counts the rounds read; clean those in a row with no 503.
	rounds, clean int
	right, busy   int // answers right, and 503s with Retry-After
	mark          int // busy when the last settle returned
	// busyRows counts the 503s of rows (GET .../jobs/{id}) by partition
	// since the last settle: only a partition that moves may have them.
	busyRows map[int32]int
	// firstBusy and lastBusy bound the 503s since the last settle.
	firstBusy, lastBusy time.Time
	wrong               []string
	stop                chan struct{}
	done                sync.WaitGroup
}

func (b *bundle) startReaders(p *apiProcess, ns string, list []jobindex.Entry, n int) *readers {
	r := &readers{t: b.t, api: p, ns: ns, want: b.want[ns], list: ids(list), live: b.live(ns), stop: make(chan struct{}), busyRows: map[int32]int{}}
	require.Len(b.t, r.list, len(r.want))
	for range n {
		r.done.Add(1)
		go r.run()
	}
	b.t.Cleanup(r.halt)
	return r
}

func (r *readers) run() {
	defer r.done.Done()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		r.round()
		// Pacing only: the machine is shared.
		time.Sleep(5 * time.Millisecond)
	}
}

// verdict records one answer: nil right, errBusy a 503 with Retry-After,
// any other error wrong.
var errBusy = errors.New("503 with Retry-After")

func (r *readers) round() {
	busy := false
	judge := func(err error, partition int32) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case err == nil:
			r.right++
		case errors.Is(err, errBusy):
			r.busy++
			if partition >= 0 {
				r.busyRows[partition]++
			}
			busy = true
			if r.firstBusy.IsZero() {
				r.firstBusy = time.Now()
			}
			r.lastBusy = time.Now()
		default:
			if len(r.wrong) < 20 {
				r.wrong = append(r.wrong, err.Error())
			}
		}
	}
	for id, st := range r.want {
		judge(r.getJob(id, st), processors.PartitionOf(schema.JobKey(r.ns, id), testPartitions))
	}
	judge(r.listing(), -1)
	judge(r.count(), -1)
	r.mu.Lock()
	r.rounds++
	r.clean++
	if busy {
		r.clean = 0
	}
	r.mu.Unlock()
}

// answer judges an API answer that is not the 200 expected.
func answer(what string, status int, retryAfter string, body map[string]any) error {
	if status == http.StatusServiceUnavailable && retryAfter != "" {
		return fmt.Errorf("%s: %w (%v)", what, errBusy, body["detail"])
	}
	return fmt.Errorf("%s: %d %v", what, status, body)
}

func (r *readers) getJob(id string, want chimev1.JobStatus) error {
	path := "/v1/namespaces/" + r.ns + "/jobs/" + url.PathEscape(id)
	st, ra, body, err := r.api.get(path)
	switch {
	case err != nil:
		return err
	case st != http.StatusOK:
		return answer("GET "+path, st, ra, body)
	case body["id"] != id || body["state"] != schema.JobStatusName(want):
		return fmt.Errorf("GET %s: %v, want state %s", path, body, schema.JobStatusName(want))
	}
	return nil
}

// listing walks the whole listing, 17 a page.
func (r *readers) listing() error {
	var got []string
	cursor := ""
	for range 100 {
		path := "/v1/namespaces/" + r.ns + "/jobs?limit=17&cursor=" + url.QueryEscape(cursor)
		st, ra, body, err := r.api.get(path)
		if err != nil {
			return err
		}
		if st != http.StatusOK {
			return answer("GET "+path, st, ra, body)
		}
		jobs, _ := body["jobs"].([]any)
		for _, j := range jobs {
			got = append(got, fmt.Sprint(j.(map[string]any)["id"]))
		}
		cursor, _ = body["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(r.list, ",") {
		return fmt.Errorf("the listing of %s read %d jobs %v, want %d %v", r.ns, len(got), got, len(r.list), r.list)
	}
	return nil
}

// count reads the live count the pending-jobs quota uses (the API's
// JobView: no route shows it).
func (r *readers) count() error {
	n, err := r.api.jobs.LiveJobs(r.ns, nil)
	switch {
	case errors.Is(err, jobquery.ErrUnavailable):
		return fmt.Errorf("live count: %w (%v)", errBusy, err)
	case err != nil:
		return err
	case n != r.live:
		return fmt.Errorf("live count of %s: %d, want %d", r.ns, n, r.live)
	}
	return nil
}

// phase is what the readers met between two settles: the 503s, the time
// from the first to the last, and the 503s of rows by partition.
type phase struct {
	busy     int
	window   time.Duration
	busyRows map[int32]int
}

func (p phase) String() string {
	return fmt.Sprintf("%d in %s, rows by partition %v", p.busy, p.window.Round(10*time.Millisecond), p.busyRows)
}

// onlyMoved fails the test if rows of a partition that did not move met
// a 503.
func (p phase) onlyMoved(t *testing.T, what string, moved []int32) {
	t.Helper()
	for part, n := range p.busyRows {
		require.Contains(t, moved, part, "%s: %d reads of rows of partition %d, which did not move, were 503 (moved: %v)", what, n, part, moved)
	}
}

// settle waits until the readers read clean rounds in a row started after
// now, and returns the 503s they met since the last settle returned.
func (r *readers) settle(what string, rounds int) phase {
	r.t.Helper()
	r.mu.Lock()
	r.clean = 0
	r.mu.Unlock()
	kafkatest.WaitFor(r.t, 2*time.Minute, what+": reads answered without 503 again", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		require.Empty(r.t, r.wrong, "wrong answers")
		return r.clean >= rounds
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	p := phase{busy: r.busy - r.mark, window: r.lastBusy.Sub(r.firstBusy), busyRows: r.busyRows}
	r.mark, r.firstBusy, r.lastBusy, r.busyRows = r.busy, time.Time{}, time.Time{}, map[int32]int{}
	return p
}

func (r *readers) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
}

// report stops the readers and fails the test on any wrong answer.
func (r *readers) report() (right, busy int) {
	r.halt()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(r.t, r.wrong, "every answer is right or a 503 with Retry-After")
	return r.right, r.busy
}

// TestReadsStayRightAcrossRebalances: while an API process reads every
// job of a set, a second scheduler instance joins and later the first
// stops. The reads are right or 503 with Retry-After throughout, and the
// 503s stop once the group settled. A rebalance costs only the partitions
// that move: rows of the others are read throughout it.
func TestReadsStayRightAcrossRebalances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.startInstance()
	b.create("r", 80, a)
	list := localListing("r", jobindex.Query{}, a)
	p := b.startAPI()
	rd := b.startReaders(p, "r", list, 2)
	before := rd.settle("one instance", 2)

	c := b.startInstance()
	settled(t, "the second instance to take its share", a, c)
	joined := rd.settle("after the join", 3)
	joined.onlyMoved(t, "the join", served(c))

	moved := served(a)
	a.stop()
	settled(t, "the survivor to own every partition", c)
	left := rd.settle("after the first stopped", 3)
	left.onlyMoved(t, "the stop", moved)

	right, busy := rd.report()
	require.Zero(t, before.busy, "no 503 while nothing moves")
	t.Logf("%d rounds, %d answers right, %d 503s with Retry-After (before the join: %s; around it: %s; around the stop: %s)", rd.rounds, right, busy, before, joined, left)
}

// TestQueryInstanceHelper is not a test: it is the scheduler instance with
// its query server that TestReadsStayRightWhenOwnerKilled kills -9.
func TestQueryInstanceHelper(t *testing.T) {
	if os.Getenv("CHIME_QUERY_HELPER") != "1" {
		t.Skip("helper process for TestReadsStayRightWhenOwnerKilled")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client:     processors.Client{Brokers: strings.Split(os.Getenv("CHIME_BROKERS"), ","), Logger: testLogger(t)},
			Topics:     schema.NewTopics(os.Getenv("CHIME_TOPIC_PREFIX")),
			Membership: groups.Membership{Advertise: ln.Addr().String()},
		},
		Namespaces: kafkatest.EveryNamespace{},
	})
	require.NoError(t, err)
	srv, err := jobquery.NewServer(jobquery.ServerConfig{Source: s, Partitions: testPartitions, Secret: testSecret, Logger: testLogger(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	query := jobquery.Listen(srv, ln)
	require.NoError(t, query.Start(ctx))
	go func() {
		if lifecycle.Wait(ctx, s) == nil {
			fmt.Println("instance-ready")
		}
	}()
	require.NoError(t, s.Start(ctx))
	<-s.Stopped()
	query.Stop()
}

// TestReadsStayRightWhenOwnerKilled: an instance owning half the
// partitions is killed with SIGKILL while an API process reads. Until the
// group's session timeout gives its partitions to the survivor, reads of
// them find no one answering and are 503 with Retry-After; then they are
// right again. Never a wrong answer.
func TestReadsStayRightWhenOwnerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.startInstance()
	b.create("k", 80, a)
	list := localListing("k", jobindex.Query{}, a)
	p := b.startAPI()
	rd := b.startReaders(p, "k", list, 2)
	before := rd.settle("one instance", 2)
	require.Zero(t, before.busy, "no 503 while nothing moves")

	proc := kafkatest.StartHelperProcess(t, "TestQueryInstanceHelper", "instance-ready",
		"CHIME_QUERY_HELPER=1",
		"CHIME_BROKERS="+strings.Join(b.cluster.Brokers(), ","),
		"CHIME_TOPIC_PREFIX="+b.topics.Prefix,
	)
	kafkatest.WaitFor(t, 2*time.Minute, "the helper to take half the partitions", func() bool {
		return len(a.s.Partitions()) == testPartitions/2 && a.s.Ready() == nil
	})
	joined := rd.settle("after the helper joined", 3)

	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait()
	killed := time.Now()
	settled(t, "the survivor to own every partition", a)
	died := rd.settle("after the kill", 3)
	require.Positive(t, died.busy, "reads of the dead instance's partitions were refused until the group moved them")

	right, busy := rd.report()
	t.Logf("%d rounds, %d answers right, %d 503s with Retry-After (around the join: %s; after the kill: %s, settled %s after it)",
		rd.rounds, right, busy, joined, died, time.Since(killed).Round(100*time.Millisecond))
}
