package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/clickhouse"
)

// chromiumPath is Debian's Chromium, installed by `make chromium`.
const chromiumPath = "/usr/bin/chromium"

// artifactsDir is where the console test keeps its screenshots:
// $CHIME_ARTIFACTS_DIR, else test-artifacts/ at the repository's root.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("CHIME_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	dir = filepath.Join(dir, "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts headless Chromium with the flags this machine needs (no
// background connections: the network is closed) and a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("CHIME_REQUIRE_BROWSER") != "" {
			t.Fatalf("no %s: run `make chromium` (Debian's chromium package)", chromiumPath)
		}
		t.Skipf("no %s: run `make chromium` to test the console in a real browser", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	return ctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), name+".png"), png, 0o644))
}

// do runs browser steps, failing the test on an error.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// innerText reads sel's text now ("" when absent).
func innerText(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`) || {}).innerText || ""`))
}

// text waits for sel to be visible and returns its text.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(sel)))
	s, err := innerText(ctx, sel)
	require.NoError(t, err)
	return s
}

// waitText polls sel's text until it contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		s, err := innerText(ctx, sel)
		if err == nil && strings.Contains(s, want) {
			return
		}
		last = s
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never showed %q (last: %q)", sel, want, last)
}

// TestConsoleInChromium drives the console in headless Chromium against a
// whole `chime dev`: sign in, the namespaces with their breaker state, a
// namespace's charts, breaker history and controls, its jobs and a job's
// detail with run-now, dead letters with replay, and a namespace key's
// narrower view. Screenshots go to test-artifacts/console/.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	analytics := false
	if tools, err := clickhouse.FindTools("."); err == nil && clickhouse.Installed(tools) {
		analytics = true
	} else if os.Getenv("CHIME_REQUIRE_CLICKHOUSE") != "" {
		t.Fatal("CHIME_REQUIRE_CLICKHOUSE is set and no local ClickHouse is installed (make clickhouse)")
	}
	// A receiver: /ok answers 200, /fail 500.
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(rcv.Close)

	stateDir := filepath.Join(t.TempDir(), "state")
	dev := startDevAPI(t, stateDir, freePort(t))
	raw, err := os.ReadFile(filepath.Join(stateDir, "admin-token"))
	require.NoError(t, err)
	admin := strings.TrimSpace(string(raw))
	status, _ := dev.call(t, "PUT", "/v1/namespaces/shop", admin, `{"retry": {"max_attempts": 1}}`)
	require.Equal(t, 201, status)
	_, key := dev.call(t, "POST", "/v1/namespaces/shop/keys", admin, "")
	nsKey := key["key"].(string)
	for _, j := range []string{
		`{"id": "tick", "schedule": {"every": "1s"}, "callback": {"url": "` + rcv.URL + `/ok", "body": {"hello": "<chime>"}}}`,
		`{"id": "later", "schedule": {"in": "1h"}, "callback": {"url": "` + rcv.URL + `/ok"}}`,
		`{"id": "broken", "schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `/fail"}}`,
	} {
		status, body := dev.call(t, "POST", "/v1/namespaces/shop/jobs", nsKey, j)
		require.Equal(t, 201, status, "%v", body)
	}

	// Sign in with the admin token.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	screenshot(t, ctx, "01-sign-in")
	do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)))
	waitText(t, ctx, "#signin-error", "not valid")
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#token"), admin),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)))

	// Namespaces, with the breaker state.
	waitText(t, ctx, "#namespaces", "shop")
	require.Contains(t, text(t, ctx, "#namespaces"), "closed")
	screenshot(t, ctx, "02-namespaces")

	// A namespace: breaker, jobs (newest first), charts.
	do(t, ctx, chromedp.Click(chromedp.CSS(`#namespaces tr[data-ns="shop"]`)))
	waitText(t, ctx, "#breaker-state", "closed")
	waitText(t, ctx, "#jobs", "tick")
	jobs := text(t, ctx, "#jobs tbody")
	require.Less(t, strings.Index(jobs, "broken"), strings.Index(jobs, "tick"), "newest first: %q", jobs)
	if analytics {
		// The sink writes per-minute aggregates; the charts draw them.
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg polyline[data-name="requests"]`)))
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-latency svg polyline[data-name="p99"]`)))
	}

	// Breaker controls: force open, shown at once; the trip is in the
	// history and marked on the charts; then automatic again.
	do(t, ctx, chromedp.Click(chromedp.CSS(`#breaker-controls button[data-mode="force_open"]`)))
	waitText(t, ctx, "#breaker-state", "forced_open")
	waitText(t, ctx, "#toast", "forced_open")
	if analytics {
		waitText(t, ctx, "#history", "forced_open")
		do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg line.trip`)))
	}
	screenshot(t, ctx, "03-namespace-forced-open")
	do(t, ctx, chromedp.Click(chromedp.CSS(`#breaker-controls button[data-mode="auto"]`)))
	waitText(t, ctx, "#breaker-state", "closed")

	// State filter.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#job-state"), "dead"), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`document.getElementById("job-state").dispatchEvent(new Event("change"))`)(ctx, t)
		return err
	}))
	waitText(t, ctx, "#jobs tbody", "broken")
	require.NotContains(t, text(t, ctx, "#jobs tbody"), "tick")

	// Dead letters, replayed from the console.
	if analytics {
		do(t, ctx, chromedp.Click(chromedp.CSS("#tab-dead")))
		waitText(t, ctx, "#dead-letters", "broken")
		screenshot(t, ctx, "04-dead-letters")
		do(t, ctx, chromedp.Click(chromedp.CSS("#dead-letters button.replay")))
		waitText(t, ctx, "#toast", "Replayed as job broken.replay-")
	}

	// A job: its fields, JSON body shown as JSON, run now.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/later"))
	waitText(t, ctx, "#job-fields", "scheduled")
	do(t, ctx, chromedp.Click(chromedp.CSS(`#job-actions button[data-act="trigger"]`)))
	waitText(t, ctx, "#toast", "Fired now")
	waitText(t, ctx, "#job-fields", "Fires\n1 (skipped 0)")
	if analytics {
		waitText(t, ctx, "#attempts", "success")
	}
	require.Contains(t, text(t, ctx, "#job-fields"), "scheduled", "run now leaves the schedule")
	screenshot(t, ctx, "05-job")
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/tick"))
	waitText(t, ctx, "#job-fields", `"hello": "<chime>"`)

	// A namespace key sees its namespace only, without the controls.
	do(t, ctx, chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), nsKey), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)))
	waitText(t, ctx, "#who", "namespace shop")
	waitText(t, ctx, "#breaker-controls", "Only the admin token")
	screenshot(t, ctx, "06-namespace-key")

	// The console's files come with a policy that keeps it to its own.
	var res *http.Response
	res, err = http.Get(dev.base + "/ui/app.js")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	t.Logf("screenshots in %s", artifactsDir(t))
}
