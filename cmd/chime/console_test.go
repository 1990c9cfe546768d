package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/internal/kafkatest"
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
	// Start the browser on this context: the first run allocates it, and a
	// step's shorter-lived context must not be the one that owns it.
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(artifactsDir(t), name+".png"), png, 0o644))
}

// do runs browser steps, failing the test on an error or when they take
// over a minute, with a screenshot of the page as it was.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("browser steps failed: %v; %s", err, failShot(t, ctx))
	}
}

// failShot keeps a screenshot of the page as a failing step left it.
func failShot(t *testing.T, ctx context.Context) string {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return "no screenshot: " + err.Error()
	}
	path := filepath.Join(artifactsDir(t), "failed.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return "no screenshot: " + err.Error()
	}
	return "screenshot in " + path
}

// click clicks sel once it is on the page and visible. It finds and clicks
// the element in one script: the console re-renders lists while it polls,
// and a node found in one step and clicked in the next may be gone by then
// (chromedp's Click then waited for it until the test's deadline).
func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	untilTrue(t, ctx, "click "+sel, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
		if (!e || e.getClientRects().length === 0) return false; e.click(); return true; })()`)
}

// fill sets the value of the input or select sel and tells the page, as
// typing or choosing would.
func fill(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	untilTrue(t, ctx, "fill "+sel, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
		if (!e || e.getClientRects().length === 0) return false; e.value = `+strconv.Quote(value)+`;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
}

// untilTrue evaluates script until it returns true, for up to a minute.
func untilTrue(t *testing.T, ctx context.Context, what, script string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](script))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 2000)`))
			t.Fatalf("%s: never possible (last error: %v); %s; the page:\n%s", what, err, failShot(t, ctx), page)
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// eval returns what script evaluates to now.
func eval[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script))
	require.NoError(t, err, "evaluating %s", script)
	return v
}

// count is how many elements sel matches now.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, `document.querySelectorAll(`+strconv.Quote(sel)+`).length`)
}

// chartLabelsOutside lists the chart labels not wholly inside their chart.
const chartLabelsOutside = `[...document.querySelectorAll("svg.chart")].flatMap((svg) => {
	const w = svg.viewBox.baseVal.width;
	return [...svg.querySelectorAll("text")].map((e) => [e.textContent, e.getBBox()])
		.filter(([, b]) => b.x < 0 || b.x + b.width > w + 0.5).map(([s, b]) => s + " at " + b.x.toFixed(1) + "+" + b.width.toFixed(1) + " of " + w);
})`

func berlin(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	return loc
}

// berlinTime is a time as the console shows it in Europe/Berlin: 24-hour,
// with the zone.
var berlinTime = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T`)

// TestConsoleInChromium drives the console in headless Chromium against a
// whole `chime dev`: sign in, the namespaces with their breaker state, a
// namespace's charts (ranges, the current step marked partial, held-back
// callbacks, trips), breaker history and controls, its jobs and a job's
// detail with the controls its state allows, its attempts a page at a time
// and its deferrals apart, dead letters with replay, times in the
// browser's zone or UTC, and a namespace key's narrower view. Screenshots
// go to test-artifacts/console/.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	// A zone that is not UTC, so the UTC switch shows a difference.
	do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
		return err
	}))
	analytics := false
	if tools, err := clickhouse.FindTools("."); err == nil && clickhouse.Installed(tools) {
		analytics = true
	} else if os.Getenv("CHIME_REQUIRE_CLICKHOUSE") != "" {
		t.Fatal("CHIME_REQUIRE_CLICKHOUSE is set and no local ClickHouse is installed (make clickhouse)")
	}
	// A receiver: /ok answers 200, /fail 500, /flaky/... 500 the first
	// time, then 200 (a dead letter's replay succeeds, and makes no new
	// dead letter while the test looks at the list).
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls[r.URL.Path]++
		first := calls[r.URL.Path] == 1
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/fail") || strings.HasPrefix(r.URL.Path, "/flaky/") && first {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(rcv.Close)

	stateDir := filepath.Join(t.TempDir(), "state")
	dev := startDevAPI(t, stateDir, freeport.For(t))
	raw, err := os.ReadFile(filepath.Join(stateDir, "admin-token"))
	require.NoError(t, err)
	admin := strings.TrimSpace(string(raw))
	status, _ := dev.call(t, "PUT", "/v1/namespaces/shop", admin, `{"retry": {"max_attempts": 1}}`)
	require.Equal(t, 201, status)
	_, key := dev.call(t, "POST", "/v1/namespaces/shop/keys", admin, "")
	nsKey := key["key"].(string)
	for _, j := range []string{
		`{"id": "tick", "schedule": {"every": "1s"}, "labels": {"team": "billing"}, "callback": {"url": "` + rcv.URL + `/ok", "body": {"hello": "<chime>"}}}`,
		`{"id": "later", "schedule": {"in": "1h"}, "labels": {"team": "ops"}, "callback": {"url": "` + rcv.URL + `/ok"}}`,
		`{"id": "report", "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin", "exclude": [{"date": "2030-12-25"}, {"cron": "0 0 * * 6", "duration": "48h"}]},
		  "overlap": "skip", "catchup": "all", "catchup_window": "1h", "max_fires": 12, "pause_on_failure": true,
		  "labels": {"team": "billing", "tier": "gold"}, "callback": {"url": "` + rcv.URL + `/ok"}}`,
		`{"id": "broken", "schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `/flaky/1"}}`,
		`{"id": "broken-2", "schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `/flaky/2"}}`,
		`{"id": "broken-3", "schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `/flaky/3"}}`,
	} {
		status, body := dev.call(t, "POST", "/v1/namespaces/shop/jobs", nsKey, j)
		require.Equal(t, 201, status, "%v", body)
	}

	// Sign in with the admin token.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	screenshot(t, ctx, "01-sign-in")
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"))
	click(t, ctx, `#signin button[type="submit"]`)
	waitText(t, ctx, "#signin-error", "not valid")
	fill(t, ctx, "#token", admin)
	click(t, ctx, `#signin button[type="submit"]`)

	// Namespaces, with the breaker state; times 24-hour with their zone,
	// the browser's by default.
	waitText(t, ctx, "#namespaces", "shop")
	namespaces := text(t, ctx, "#namespaces")
	require.Contains(t, namespaces, "closed")
	require.Regexp(t, berlinTime, namespaces)
	require.NotRegexp(t, `\b[AP]M\b`, namespaces)
	screenshot(t, ctx, "02-namespaces")

	// A namespace: breaker, jobs (newest first), charts.
	click(t, ctx, `#namespaces tr[data-ns="shop"]`)
	waitText(t, ctx, "#breaker-state", "closed")
	waitText(t, ctx, "#jobs", "tick")
	jobs := text(t, ctx, "#jobs tbody")
	require.Less(t, strings.Index(jobs, "broken"), strings.Index(jobs, "tick"), "newest first: %q", jobs)
	if analytics {
		// The sink writes per-minute aggregates; the charts draw them, an
		// hour by the minute unless another range is picked, the current
		// minute hatched and dashed, every label inside its chart.
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg polyline[data-name="requests"]`)))
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-latency svg`)))
		require.Equal(t, 1, count(t, ctx, `#chart-requests svg[data-range="1h"][data-steps="60"]`))
		require.Equal(t, "true", eval[string](t, ctx, `document.querySelector('#range button[data-range="1h"]').getAttribute("aria-pressed")`))
		require.Equal(t, 1, count(t, ctx, `#chart-requests svg rect.partial-bucket`))
		require.Equal(t, 1, count(t, ctx, `#chart-latency svg rect.partial-bucket`))
		require.Equal(t, 1, count(t, ctx, `#chart-requests svg polyline.partial[data-name="requests"]`), "the current minute is a dashed segment")
		require.Equal(t, 3, count(t, ctx, `#chart-requests svg circle.partial-point`), "each series marks its partial value")
		require.Contains(t, text(t, ctx, "#chart-requests .legend"), "held back (deferred)")
		require.Contains(t, text(t, ctx, "#chart-requests .legend"), "breaker trip")
		require.Contains(t, text(t, ctx, "#chart-requests .legend"), "times in CE")
		require.Empty(t, eval[[]string](t, ctx, chartLabelsOutside))
	}

	// Breaker controls: force open, shown at once; the trip is in the
	// history and marked on the charts, in another colour than failures,
	// and the callbacks it holds back are drawn; then automatic again.
	click(t, ctx, `#breaker-controls button[data-mode="force_open"]`)
	waitText(t, ctx, "#breaker-state", "forced_open")
	waitText(t, ctx, "#toast", "forced_open")
	if analytics {
		waitText(t, ctx, "#history", "forced_open")
		// The every-second job is held back while the breaker is open.
		waitFor(t, 90*time.Second, "a deferred callback in the stats", func() bool {
			_, stats := dev.call(t, "GET", "/v1/namespaces/shop/stats", admin, "")
			points, _ := stats["points"].([]any)
			for _, p := range points {
				if n, _ := p.(map[string]any)["deferred"].(float64); n > 0 {
					return true
				}
			}
			return false
		})
		do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg line.trip`)))
		require.NotEqual(t,
			eval[string](t, ctx, `document.querySelector('#chart-requests svg line.trip').getAttribute("stroke")`),
			eval[string](t, ctx, `document.querySelector('#chart-requests svg [data-name="failures"]').getAttribute("stroke")`),
			"trips and failures in different colours")
		require.Positive(t, count(t, ctx, `#chart-requests svg rect.open-span`), "the open breaker shaded")
		// The deferred series rises above zero (the plot's bottom).
		require.True(t, eval[bool](t, ctx, `(() => {
			const bottom = 230 - 24;
			return [...document.querySelectorAll('#chart-requests svg [data-name="held back (deferred)"]')].some((e) =>
				e.tagName === "circle" ? +e.getAttribute("cy") < bottom - 1 : e.getAttribute("points").split(" ").some((p) => +p.split(",")[1] < bottom - 1));
		})()`), "held-back callbacks drawn")
	}
	screenshot(t, ctx, "03-namespace-forced-open")
	click(t, ctx, `#breaker-controls button[data-mode="auto"]`)
	waitText(t, ctx, "#breaker-state", "closed")

	if analytics {
		// Another range: 24 hours by 15 minutes, 7 days by the hour, then
		// 15 minutes by the minute; the pick is remembered across a reload.
		click(t, ctx, `#range button[data-range="24h"]`)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg[data-range="24h"][data-steps="96"]`)))
		waitText(t, ctx, "#chart-requests-title", "per 15 minutes, last 24 h")
		waitText(t, ctx, "#history-title", "last 24 h")
		require.Empty(t, eval[[]string](t, ctx, chartLabelsOutside))
		screenshot(t, ctx, "04-charts-24h")
		ticks24 := eval[string](t, ctx, `[...document.querySelectorAll("#chart-requests svg text.tick")].map((e) => e.textContent).join(" ")`)
		click(t, ctx, `#range button[data-range="7d"]`)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg[data-range="7d"][data-steps="168"]`)))
		waitText(t, ctx, "#chart-requests-title", "per hour, last 7 d")
		require.Regexp(t, `^\d\d-\d\d( \d\d-\d\d)+$`, eval[string](t, ctx, `[...document.querySelectorAll("#chart-requests svg text.tick")].map((e) => e.textContent).join(" ")`), "days on a week's axis")
		require.Empty(t, eval[[]string](t, ctx, chartLabelsOutside))
		click(t, ctx, `#range button[data-range="15m"]`)
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg[data-range="15m"][data-steps="15"]`)))
		require.NotEqual(t, ticks24, eval[string](t, ctx, `[...document.querySelectorAll("#chart-requests svg text.tick")].map((e) => e.textContent).join(" ")`))
		require.Equal(t, 1, count(t, ctx, `#chart-requests svg polyline.partial[data-name="requests"]`))
		do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg[data-range="15m"]`)))
		require.Empty(t, eval[[]string](t, ctx, chartLabelsOutside))
		screenshot(t, ctx, "05-charts-15m")
	}

	// State filter. The list is read when the filter changes (it does not
	// poll), so the job must be dead by then: its fire may have waited
	// out the forced-open breaker above.
	kafkatest.WaitFor(t, 90*time.Second, "job broken dead", func() bool {
		_, job := dev.call(t, "GET", "/v1/namespaces/shop/jobs/broken", admin, "")
		return job["state"] == "dead"
	})
	// The list before the filter holds "broken" too: wait for the
	// filtered one, which holds no live job.
	const listedJobs = `[...document.querySelectorAll("#jobs tbody tr[data-id]")].map((r) => r.dataset.id).join(" ")`
	fill(t, ctx, "#job-state", "dead")
	untilTrue(t, ctx, "the dead jobs", `((ids) => ids.includes("broken") && !ids.includes("tick") && !ids.includes("report"))((`+listedJobs+`).split(" "))`)
	require.NotContains(t, text(t, ctx, "#jobs tbody"), "tick")

	// Label filter: typed, then narrowed by clicking a job's label.
	fill(t, ctx, "#job-state", "")
	fill(t, ctx, "#job-labels", "team:billing")
	untilTrue(t, ctx, "the billing jobs", listedJobs+` === "report tick"`)
	click(t, ctx, `#jobs tr[data-id="report"] [data-label="tier:gold"]`)
	untilTrue(t, ctx, "the gold billing job", listedJobs+` === "report"`)
	require.Equal(t, "team:billing tier:gold", eval[string](t, ctx, `document.getElementById("job-labels").value`))
	screenshot(t, ctx, "05b-jobs-by-label")
	fill(t, ctx, "#job-labels", "team:nobody")
	waitText(t, ctx, "#jobs tbody", "No jobs with these labels")
	require.Empty(t, eval[string](t, ctx, listedJobs))

	// A job's policies and its next fires, as the API previews them.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/report"))
	waitText(t, ctx, "#policy-overlap", "skip")
	policies := text(t, ctx, "#job-policies")
	for _, want := range []string{"catch-up", "all, window 1h", "after 12 fires", "pauses itself", "2030-12-25", "cron 0 0 * * 6 for 48h"} {
		require.Contains(t, strings.ToLower(policies), strings.ToLower(want))
	}
	require.Equal(t, 5, count(t, ctx, "#next-fires-table tbody tr"))
	_, job := dev.call(t, "GET", "/v1/namespaces/shop/jobs/report", admin, "")
	first := job["next_fires"].([]any)[0].(map[string]any)
	at, err := time.Parse(time.RFC3339Nano, first["fire_at"].(string))
	require.NoError(t, err)
	require.Contains(t, text(t, ctx, "#next-fires-table"), at.In(berlin(t)).Format("2006-01-02 15:04:05"), "the API's next fire, in the browser's zone")
	require.Contains(t, text(t, ctx, "#job-fields"), "tier:gold")
	screenshot(t, ctx, "05c-job-policies")
	// Back to the namespace, rendered whole (its jobs listed) before its
	// tabs are clicked: a click during the render is undone by it.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop"))
	waitText(t, ctx, "#jobs tbody", "tick")

	// Dead letters, replayed from the console: one from its button, then
	// the rest with the bulk button, which counts only those not replayed.
	if analytics {
		kafkatest.WaitFor(t, 90*time.Second, "the sink stored the three dead letters", func() bool {
			_, body := dev.call(t, "GET", "/v1/namespaces/shop/dead-letters", admin, "")
			dls, _ := body["dead_letters"].([]any)
			return len(dls) == 3
		})
		click(t, ctx, "#tab-dead")
		waitText(t, ctx, "#dead-letters", "broken")
		waitText(t, ctx, "#replay-all", "Replay these 3")
		screenshot(t, ctx, "06-dead-letters")
		click(t, ctx, "#dead-letters button.replay")
		waitText(t, ctx, "#toast", "Replayed as job broken")
		waitText(t, ctx, "#replay-all", "Replay these 2")
		waitText(t, ctx, "#dead-letters tr.replayed", "replayed")
		require.Contains(t, text(t, ctx, "#dead-letters tr.replayed .replay-job"), ".replay-", "the row names the replay's job")
		untilTrue(t, ctx, "one row replayed, two to replay", `document.querySelectorAll("#dead-letters tr.replayed").length === 1 &&
			document.querySelectorAll("#dead-letters button.replay").length === 2`)
		screenshot(t, ctx, "06b-dead-letter-replayed")
		click(t, ctx, "#replay-all")
		waitText(t, ctx, "#toast", "Replayed 2, already replayed 1, failed 0")
		waitText(t, ctx, "#dl-all-replayed", "Every dead letter listed is replayed")
		untilTrue(t, ctx, "every row replayed", `document.querySelectorAll("#dead-letters tr.replayed").length === 3 &&
			!document.querySelector("#dead-letters button.replay") && !document.querySelector("#replay-all")`)
		screenshot(t, ctx, "06c-dead-letters-all-replayed")
		fill(t, ctx, "#dl-replayed", "false")
		waitText(t, ctx, "#dl-empty", "No dead letters left to replay")
	}

	// A dead job offers no control: the API would refuse each (409).
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/broken"))
	waitText(t, ctx, "#job-fields", "dead")
	waitText(t, ctx, "#job-ended", "This job is dead")
	require.Zero(t, count(t, ctx, "#job-actions button"), "no run now, pause, resume or cancel on a dead job")
	screenshot(t, ctx, "07-job-dead")

	// A scheduled job: run now, pause, cancel; paused: resume, not pause.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/later"))
	waitText(t, ctx, "#job-fields", "scheduled")
	waitText(t, ctx, "#job-actions", "Pause")
	require.Equal(t, "Run now Pause Cancel", eval[string](t, ctx, `[...document.querySelectorAll("#job-actions button")].map((b) => b.textContent).join(" ")`))
	click(t, ctx, `#job-actions button[data-act="pause"]`)
	waitText(t, ctx, "#job-actions", "Resume")
	waitText(t, ctx, "#job-fields", "paused")
	require.Equal(t, "Run now Resume Cancel", eval[string](t, ctx, `[...document.querySelectorAll("#job-actions button")].map((b) => b.textContent).join(" ")`))
	screenshot(t, ctx, "08-job-paused")
	click(t, ctx, `#job-actions button[data-act="resume"]`)
	waitText(t, ctx, "#job-actions", "Pause")
	waitText(t, ctx, "#job-fields", "scheduled")

	// Run now.
	click(t, ctx, `#job-actions button[data-act="trigger"]`)
	waitText(t, ctx, "#toast", "Fired now")
	waitText(t, ctx, "#job-fields", "Fires\n1 (skipped 0)")
	if analytics {
		waitText(t, ctx, "#attempts", "success")
	}
	require.Contains(t, text(t, ctx, "#job-fields"), "scheduled", "run now leaves the schedule")
	screenshot(t, ctx, "09-job")

	// The every-second job: its JSON body shown as JSON; its attempts 20
	// a page, newest first, older pages a click away; the callbacks the
	// breaker held back listed apart.
	do(t, ctx, chromedp.Navigate(dev.base+"/ui/#/ns/shop/job/tick"))
	waitText(t, ctx, "#job-fields", `"hello": "<chime>"`)
	if analytics {
		// One condition for both: the page of another job, or a render
		// in between, must not be counted.
		untilTrue(t, ctx, "a full page of attempts with a second page", `(() => { const b = document.querySelector("#attempts-older");
			return !!b && !b.disabled && document.querySelectorAll("#attempts-table tbody tr").length === 20; })()`)
		require.NotContains(t, text(t, ctx, "#attempts-table"), "deferred", "deferrals are not attempts")
		waitText(t, ctx, "#deferrals-table", "breaker")
		require.Contains(t, text(t, ctx, "#deferrals-table"), "namespace shop: breaker")
		fires := func() []int {
			var out []int
			for _, f := range eval[[]string](t, ctx, `[...document.querySelectorAll("#attempts-table tbody tr td:first-child")].map((e) => e.textContent)`) {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				require.NoError(t, err)
				out = append(out, n)
			}
			return out
		}
		page1 := fires()
		require.IsNonIncreasing(t, page1, "newest first")
		screenshot(t, ctx, "10-job-attempts")
		click(t, ctx, "#attempts-older")
		waitText(t, ctx, "#attempts-page", "page 2")
		oldest1 := page1[len(page1)-1]
		untilTrue(t, ctx, "page 2's rows", `(() => { const td = document.querySelector("#attempts-table tbody tr td"); return !!td && +td.textContent < `+strconv.Itoa(oldest1)+`; })()`)
		page2 := fires()
		require.LessOrEqual(t, len(page2), 20)
		require.Less(t, page2[0], oldest1, "page 2 goes on where page 1 ended")
		require.IsNonIncreasing(t, page2)
		screenshot(t, ctx, "11-job-attempts-page-2")
		click(t, ctx, "#attempts-newer")
		waitText(t, ctx, "#attempts-page", "newest 20")
	}

	// Times in UTC at the flip of the header's switch, remembered across a
	// reload in localStorage, where the token never goes.
	require.Regexp(t, berlinTime, text(t, ctx, "#job-fields"))
	click(t, ctx, "#utc")
	waitText(t, ctx, "#job-fields", " UTC")
	do(t, ctx, chromedp.Reload())
	waitText(t, ctx, "#job-fields", " UTC")
	require.Regexp(t, `Created\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`, text(t, ctx, "#job-fields"))
	require.True(t, eval[bool](t, ctx, `document.getElementById("utc").checked`))
	require.Equal(t, "1", eval[string](t, ctx, `localStorage.getItem("chime.utc")`))
	require.NotContains(t, eval[string](t, ctx, `JSON.stringify(localStorage)`), admin)
	require.Equal(t, admin, eval[string](t, ctx, `sessionStorage.getItem("chime.token")`))
	screenshot(t, ctx, "12-job-utc")

	// A namespace key sees its namespace only, without the controls.
	click(t, ctx, "#signout")
	fill(t, ctx, "#token", nsKey)
	click(t, ctx, `#signin button[type="submit"]`)
	waitText(t, ctx, "#who", "namespace shop")
	waitText(t, ctx, "#breaker-controls", "Only the admin token")
	screenshot(t, ctx, "13-namespace-key")

	// The console's files come with a policy that keeps it to its own.
	var res *http.Response
	res, err = http.Get(dev.base + "/ui/app.js")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	t.Logf("screenshots in %s", artifactsDir(t))
}
