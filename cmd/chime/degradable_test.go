package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/credential"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/internal/freeport"
)

// onTime bounds how late a callback may arrive after its scheduled time in
// the tests of this file: due events leave in 5 s buckets under load
// (docs/capacity.md), and the tests run under -race on two busy cores.
const onTime = 15 * time.Second

// TestDevRunsOnWhenAnalyticsFails breaks analytics under a running `chime
// dev` while jobs fire: its local ClickHouse is killed (-9), or ClickHouse
// refuses the sink's inserts for a while (TOO_MANY_PARTS, an error the sink
// does not retry: it stops). chime dev keeps running and ready, no job is
// lost, every callback comes on time, the failed part is restarted, and
// once ClickHouse takes inserts again the sink has stored every callback
// attempt made meanwhile.
func TestDevRunsOnWhenAnalyticsFails(t *testing.T) {
	t.Parallel()
	clickhousetest.Tools(t)
	for _, tc := range []struct {
		name string
		// part is the part that fails and is restarted.
		part string
		// fail breaks analytics; it returns what mends it, if anything.
		fail func(t *testing.T, dev *devAPI, query func(string) (string, error)) (mend func())
	}{
		{"kill -9 of the local ClickHouse", "local ClickHouse", func(t *testing.T, dev *devAPI, _ func(string) (string, error)) func() {
			chimech := childNamed(t, dev.cmd.Process.Pid, "chimech")
			require.NoError(t, syscall.Kill(chimech, syscall.SIGKILL))
			t.Logf("kill -9 chimech (pid %d)", chimech)
			return func() {}
		}},
		{"ClickHouse refusing inserts", "analytics sink", func(t *testing.T, _ *devAPI, query func(string) (string, error)) func() {
			_, err := query("ALTER TABLE chime.callback_attempts MODIFY SETTING parts_to_delay_insert = 1, parts_to_throw_insert = 1")
			require.NoError(t, err)
			return func() {
				_, err := query("ALTER TABLE chime.callback_attempts RESET SETTING parts_to_delay_insert, parts_to_throw_insert")
				require.NoError(t, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runWhileAnalyticsFails(t, tc.part, tc.fail)
		})
	}
}

func runWhileAnalyticsFails(t *testing.T, part string, fail func(*testing.T, *devAPI, func(string) (string, error)) func()) {
	stateDir := filepath.Join(t.TempDir(), "state")
	var mu sync.Mutex
	var chStarts int
	dev := startDevAPIWatching(t, stateDir, freeport.For(t), func(line string) {
		if strings.Contains(line, `msg="local ClickHouse started"`) {
			mu.Lock()
			chStarts++
			mu.Unlock()
		}
	})
	admin := readAdminToken(t, stateDir)
	var dsn string
	select {
	case dsn = <-dev.clickhouse:
	case <-time.After(90 * time.Second):
		t.Fatal("no `local ClickHouse started` line")
	}
	query := clickhouseQuerier(t, stateDir, dsn)
	storedOnce := func(pattern string) (int, error) {
		got, err := query("SELECT count(DISTINCT job_id) FROM chime.callback_attempts WHERE namespace = 'load' AND class = 'success' AND job_id LIKE '" + pattern + "'")
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(got)
	}

	rcv := newReceiver(t)
	st, out := dev.call(t, "PUT", "/v1/namespaces/load", admin, `{"allowed_hosts": ["127.0.0.1"]}`)
	require.Equal(t, 201, st, "%v", out)
	// A job every second, and 160 one-shots, one every 125 ms for 20 s,
	// from once the sink has stored the first attempt: analytics fails
	// 5 s into them.
	st, out = dev.call(t, "POST", "/v1/namespaces/load/jobs", admin, `{"id": "every", "schedule": {"every": "1s"}, "callback": {"url": "`+rcv.URL+`/every"}}`)
	require.Equal(t, 201, st, "%v", out)
	waitFor(t, 90*time.Second, "the sink's first row", func() bool {
		n, err := storedOnce("every")
		return err == nil && n == 1
	})
	const jobs = 160
	start := time.Now().Add(3 * time.Second)
	var ids []string
	for i := range jobs {
		at := start.Add(time.Duration(i) * 125 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		id := fmt.Sprintf("once-%03d", i)
		st, out := dev.call(t, "POST", "/v1/namespaces/load/jobs", admin,
			fmt.Sprintf(`{"id": %q, "schedule": {"at": %q}, "callback": {"url": "%s/%s"}}`, id, at, rcv.URL, id))
		require.Equal(t, 201, st, "%v", out)
		ids = append(ids, id)
	}

	// The API stays ready throughout.
	stopProbe := make(chan struct{})
	notReady := make(chan string, 1)
	var probes sync.WaitGroup
	probes.Go(func() {
		c := &http.Client{Timeout: 10 * time.Second}
		for {
			select {
			case <-stopProbe:
				return
			case <-time.After(200 * time.Millisecond):
			}
			res, err := c.Get(dev.base + "/readyz")
			if err == nil {
				res.Body.Close()
			}
			if err != nil || res.StatusCode != http.StatusOK {
				select {
				case notReady <- fmt.Sprintf("GET /readyz: %v %v", err, res):
				default:
				}
			}
		}
	})
	defer func() { close(stopProbe); probes.Wait() }()

	time.Sleep(time.Until(start.Add(5 * time.Second)))
	mend := fail(t, dev, query)
	select {
	case err := <-dev.exited:
		t.Fatalf("chime dev exited while analytics failed: %v", err)
	case <-time.After(5 * time.Second):
	}
	mend()

	waitFor(t, 90*time.Second, "every one-shot called back", func() bool {
		for _, id := range ids {
			if len(rcv.at("/"+id)) == 0 {
				return false
			}
		}
		return true
	})
	select {
	case err := <-dev.exited:
		t.Fatalf("chime dev exited: %v", err)
	case why := <-notReady:
		t.Fatalf("the API was not ready while analytics failed: %s", why)
	default:
	}
	rcv.mu.Lock()
	seen := append([]arrival(nil), rcv.seen...)
	rcv.mu.Unlock()
	for _, a := range seen {
		scheduled, err := time.Parse(time.RFC3339Nano, a.header.Get("X-Chime-Scheduled-At"))
		require.NoError(t, err)
		require.Less(t, a.at.Sub(scheduled), onTime, "%s called %s after its time", a.path, a.at.Sub(scheduled))
	}

	// Every attempt made, before and after the failure, reaches ClickHouse.
	waitFor(t, 2*time.Minute, "every one-shot's attempt in ClickHouse", func() bool {
		n, err := storedOnce("once-%")
		return err == nil && n == jobs
	})
	st, out = dev.call(t, "GET", "/v1/namespaces/load/jobs/"+ids[len(ids)-1]+"/attempts", admin, "")
	require.Equal(t, 200, st, "the API's analytics routes read ClickHouse again: %v", out)
	if part == "local ClickHouse" {
		mu.Lock()
		require.GreaterOrEqual(t, chStarts, 2, "the local ClickHouse was started again")
		mu.Unlock()
	}
	var metrics string
	select {
	case addr := <-dev.metrics:
		metrics = scrape(t, "http://"+addr+"/metrics", "")
	default:
		t.Fatal("no `metrics listening` line")
	}
	require.Regexp(t, `chime_part_restarts_total\{part="`+part+`"\} [1-9]`, metrics)
	require.Contains(t, metrics, `chime_part_ready{part="analytics sink"} 1`)
}

// clickhouseQuerier returns a function that runs a query on the local
// ClickHouse of the chime dev in stateDir (dsn from its log line) and
// returns the answer, trimmed.
func clickhouseQuerier(t *testing.T, stateDir, dsn string) func(q string) (string, error) {
	t.Helper()
	cred, err := credential.Load(filepath.Join(stateDir, "clickhouse-credential"))
	require.NoError(t, err)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	c := &http.Client{Timeout: 10 * time.Second}
	return func(q string) (string, error) {
		req, err := http.NewRequest("POST", "http://"+u.Host+"/", strings.NewReader(q))
		if err != nil {
			return "", err
		}
		req.SetBasicAuth(cred.User, cred.Password)
		res, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", res.Status, body)
		}
		return strings.TrimSpace(string(body)), err
	}
}

// childNamed is the pid of the child process of pid named name.
func childNamed(t *testing.T, pid int, name string) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	require.NoError(t, err)
	for _, f := range tasks {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(raw)) {
			comm, _ := os.ReadFile("/proc/" + c + "/comm")
			if strings.TrimSpace(string(comm)) == name {
				n, err := strconv.Atoi(c)
				require.NoError(t, err)
				return n
			}
		}
	}
	t.Fatalf("no child process %q of %d", name, pid)
	return 0
}
