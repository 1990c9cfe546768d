package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/schema"
)

// TestOneTenantCannotStallTheScheduler plays a hostile tenant with nothing
// but its namespace key against a whole `chime dev`: a job whose fires stay
// open (its endpoint answers 500, retries an hour apart, a 2,000-byte URL)
// triggered 700 times at about 30 a second. Each open fire stays in the
// job's row with its attempt history; before the row was bounded, the row
// passed Kafka's 1 MiB after about 380 triggers and the scheduler, shared by
// every tenant, crash-looped. Now: triggers past the bound are refused with
// 409, the scheduler never restarts, another namespace's every-second job
// keeps firing every second (each occurrence called, within a bound of its
// time), and the API keeps answering.
func TestOneTenantCannotStallTheScheduler(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	var restarts atomic.Int32
	dev := startDevAPIWatching(t, stateDir, freeport.For(t), func(line string) {
		if strings.Contains(line, "restarting") || strings.Contains(line, "decision not written") {
			restarts.Add(1)
		}
	})
	admin := readAdminToken(t, stateDir)

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(strings.Repeat("the endpoint is down. ", 60)))
	}))
	t.Cleanup(failing.Close)
	good := newReceiver(t)
	key := map[string]string{}
	for _, ns := range []string{"hostile", "steady"} {
		st, out := dev.call(t, "PUT", "/v1/namespaces/"+ns, admin, `{"allowed_hosts": ["127.0.0.1"]}`)
		require.Equal(t, 201, st, "%v", out)
		st, out = dev.call(t, "POST", "/v1/namespaces/"+ns+"/keys", admin, "")
		require.Equal(t, 201, st, "%v", out)
		key[ns] = out["key"].(string)
	}
	longURL := failing.URL + "/" + strings.Repeat("p", 2000-len(failing.URL))
	st, out := dev.call(t, "POST", "/v1/namespaces/hostile/jobs", key["hostile"], `{"id": "hog", "schedule": {"in": "24h"},
		"retry": {"max_attempts": 20, "initial_interval": "1h", "max_interval": "1h", "multiplier": 1},
		"callback": {"url": "`+longURL+`"}}`)
	require.Equal(t, 201, st, "%v", out)
	st, out = dev.call(t, "POST", "/v1/namespaces/steady/jobs", key["steady"], `{"id": "tick", "schedule": {"every": "1s"}, "callback": {"url": "`+good.URL+`/tick"}}`)
	require.Equal(t, 201, st, "%v", out)
	waitFor(t, 30*time.Second, "the steady job's first fires", func() bool { return len(good.at("/tick")) >= 2 })

	// The other tenant reads its job all along: every answer is 200.
	var reads, failedReads atomic.Int32
	stopReads := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stopReads:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if st, _ := dev.call(t, "GET", "/v1/namespaces/steady/jobs/tick", key["steady"], ""); st != 200 {
				failedReads.Add(1)
			}
			reads.Add(1)
		}
	}()

	start := time.Now()
	statuses := map[int]int{}
	pace := time.NewTicker(33 * time.Millisecond)
	for range 700 {
		<-pace.C
		st, out := dev.call(t, "POST", "/v1/namespaces/hostile/jobs/hog/trigger", key["hostile"], "")
		statuses[st]++
		if st == http.StatusConflict {
			require.Equal(t, "https://chime.dev/problems/too-many-open-fires", out["type"], "%v", out)
		}
	}
	pace.Stop()
	// The retries of the accepted triggers come an hour later; what is
	// left to see is that the scheduler took them all in.
	waitFor(t, 60*time.Second, "the hostile job's fires all open", func() bool {
		_, job := dev.call(t, "GET", "/v1/namespaces/hostile/jobs/hog", key["hostile"], "")
		fires, _ := job["current_fires"].([]any)
		return len(fires) == schema.MaxOpenFires
	})
	end := time.Now()
	close(stopReads)
	readers.Wait()
	t.Logf("triggers: %v in %s; steady reads: %d (%d failed)", statuses, end.Sub(start).Round(time.Millisecond), reads.Load(), failedReads.Load())

	require.Equal(t, 700, statuses[http.StatusAccepted]+statuses[http.StatusConflict], "every trigger answered 202 or 409: %v", statuses)
	require.Positive(t, statuses[http.StatusConflict], "triggers past the bound are refused")
	require.Zero(t, failedReads.Load(), "the other tenant's reads all answered")
	require.Zero(t, restarts.Load(), "the scheduler never stopped")

	// The steady job fired every second throughout: every occurrence due
	// while the hostile tenant ran was called, none skipped by a scheduler
	// that fell behind, each within steadyLag of its time.
	const steadyLag = 3 * time.Second
	_, job := dev.call(t, "GET", "/v1/namespaces/steady/jobs/tick", key["steady"], "")
	require.EqualValues(t, 0, job["skipped"], "no occurrence of the steady job was skipped: %v", job)
	lags := map[time.Time]time.Duration{} // occurrence → its first call's lag
	for _, a := range good.at("/tick") {
		at, err := time.Parse(time.RFC3339Nano, a.header.Get(dispatcher.HeaderScheduledAt))
		require.NoError(t, err)
		if l, ok := lags[at]; !ok || a.at.Sub(at) < l {
			lags[at] = a.at.Sub(at)
		}
	}
	var first time.Time
	for at := range lags {
		if !at.Before(start) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	require.False(t, first.IsZero(), "the steady job fired while the other tenant ran")
	n := 0
	for at := first; !at.After(end.Add(-steadyLag)); at = at.Add(time.Second) {
		lag, ok := lags[at]
		require.True(t, ok, "the steady job's occurrence at %s was not called", at.Format(time.RFC3339Nano))
		require.LessOrEqual(t, lag, steadyLag, "the steady job's occurrence at %s was called %s late", at.Format(time.RFC3339Nano), lag)
		n++
	}
	require.Positive(t, n)
}
