package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/clickhouse"
)

// checkMetrics holds docs/operations.md's table of metrics to what `chime
// dev`, every role in one process, serves on --metrics-addr: every chime_*
// family served is listed with its labels, and every family listed is
// served (a breaker transition is forced so that the breaker's series
// exist; the sink's exist only when the local ClickHouse is installed).
// The API's /metrics leaves the per-namespace series out without the admin
// token.
func checkMetrics(t *testing.T, dev *devAPI, admin string) {
	t.Helper()
	tools, err := clickhouse.FindTools(".")
	analytics := err == nil && clickhouse.Installed(tools)
	var addr string
	select {
	case addr = <-dev.metrics:
	case <-time.After(10 * time.Second):
		t.Fatal("no `metrics listening` line")
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	documented := documentedMetrics(t, string(doc))
	for _, name := range []string{"chime_scheduler_fires_total", "chime_dispatcher_dues_in_flight", "chime_breaker_state",
		"chime_namespaces_commands_total", "chime_sink_rows_total", "chime_api_ready", "chime_broker_trimmed_records_total"} {
		require.Contains(t, documented, name, "a family of each part is in the table")
	}

	st, out := dev.call(t, "PUT", "/v1/namespaces/other/breaker", admin, `{"mode": "force_open", "note": "metrics test"}`)
	require.Contains(t, []int{200, 202}, st, "%v", out)

	var served map[string][]string
	waitFor(t, 30*time.Second, "every documented family on --metrics-addr", func() bool {
		served = servedMetrics(t, scrape(t, "http://"+addr+"/metrics", ""))
		for name := range served {
			require.Contains(t, documented, name, "%s is served but not in docs/operations.md's table", name)
		}
		for name := range documented {
			if _, ok := served[name]; !ok && (analytics || !strings.HasPrefix(name, "chime_sink_")) {
				return false
			}
		}
		return true
	})
	for name, labels := range documented {
		if _, ok := served[name]; ok {
			require.ElementsMatch(t, labels, served[name], "labels of %s in docs/operations.md", name)
		}
	}

	// (Contains on a whole scrape would print it all on failure.)
	public := scrape(t, dev.base+"/metrics", "")
	require.True(t, strings.Contains(public, "chime_api_ready"), "the API's /metrics serves the other series")
	require.False(t, strings.Contains(public, "chime_breaker_state"), "per-namespace series need the admin token")
	require.False(t, strings.Contains(public, `namespace="other"`), "no namespace names without the admin token")
	require.True(t, strings.Contains(scrape(t, dev.base+"/metrics", admin), `chime_breaker_state{namespace="other",state="forced_open"} 1`),
		"the admin token gets the per-namespace series")
}

var metricsRow = regexp.MustCompile("^\\| `(chime_[a-z_]+)(?:\\{([a-z_,]*)\\})?` \\|")

// documentedMetrics reads the table of docs/operations.md: family name to
// label names.
func documentedMetrics(t *testing.T, doc string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		if m := metricsRow.FindStringSubmatch(line); m != nil {
			require.NotContains(t, out, m[1], "%s is listed twice", m[1])
			out[m[1]] = nil
			if m[2] != "" {
				out[m[1]] = strings.Split(m[2], ",")
			}
		}
	}
	require.NotEmpty(t, out, "no metrics table in docs/operations.md")
	return out
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE (\S+) (\S+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// servedMetrics reads a text exposition: each chime_* family to the label
// names of its samples (a histogram's le aside).
func servedMetrics(t *testing.T, body string) map[string][]string {
	out := map[string][]string{}
	kind := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil && strings.HasPrefix(m[1], "chime_") {
			out[m[1]], kind[m[1]] = nil, m[2]
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || !strings.HasPrefix(m[1], "chime_") {
			continue
		}
		family := m[1]
		if _, ok := kind[family]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if f, cut := strings.CutSuffix(family, suffix); cut && kind[f] == "histogram" {
					family = f
				}
			}
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" && !slices.Contains(out[family], l[1]) {
				out[family] = append(out[family], l[1])
			}
		}
	}
	return out
}

func scrape(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", url, body)
	return string(body)
}
