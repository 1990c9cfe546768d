package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/config"
)

func TestClientRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args               []string
		method, path, body string
		err                string
	}{
		{[]string{"ns-put", "acme"}, "PUT", "/v1/namespaces/acme", "{}", ""},
		{[]string{"ns-put", "acme", `{"spread":2}`}, "PUT", "/v1/namespaces/acme", `{"spread":2}`, ""},
		{[]string{"schedule", "acme", `{"x":1}`}, "POST", "/v1/namespaces/acme/jobs", `{"x":1}`, ""},
		{[]string{"pause", "acme", "j1"}, "POST", "/v1/namespaces/acme/jobs/j1/pause", "", ""},
		{[]string{"trigger", "acme", "j1"}, "POST", "/v1/namespaces/acme/jobs/j1/trigger", "", ""},
		{[]string{"preview", `{"every":"1h","jitter":"1m"}`, "--ns", "acme", "--id", "j1", "--count", "3"}, "POST", "/v1/schedules:preview", `{"count":3,"id":"j1","namespace":"acme","schedule":{"every":"1h","jitter":"1m"}}`, ""},
		{[]string{"backfill", "acme", "j1", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z"}, "POST", "/v1/namespaces/acme/jobs/j1/backfill", `{"from":"2026-11-01T00:00:00Z","to":"2026-11-02T00:00:00Z"}`, ""},
		{[]string{"backfill", "acme", "j1"}, "", "", "", "backfill: give --from and --to"},
		{[]string{"preview", "every hour"}, "", "", "", `preview: "every hour" is not a JSON schedule`},
		{[]string{"cancel", "acme", "j1"}, "DELETE", "/v1/namespaces/acme/jobs/j1", "", ""},
		{[]string{"jobs", "acme", "--state", "paused", "--limit=5"}, "GET", "/v1/namespaces/acme/jobs?limit=5&state=paused", "", ""},
		{[]string{"jobs", "--state", "dead", "acme"}, "GET", "/v1/namespaces/acme/jobs?state=dead", "", ""},
		{[]string{"jobs", "acme", "--label", "team:billing", "--label=tier:a b&c"}, "GET", "/v1/namespaces/acme/jobs?label=team%3Abilling&label=tier%3Aa+b%26c", "", ""},
		{[]string{"dead-letters", "acme", "--job-prefix", "order-"}, "GET", "/v1/namespaces/acme/dead-letters?job_id_prefix=order-", "", ""},
		{[]string{"dead-letters", "acme", "--replayed", "false"}, "GET", "/v1/namespaces/acme/dead-letters?replayed=false", "", ""},
		{[]string{"replay", "acme", "dl-acme/j/1#2"}, "POST", "/v1/namespaces/acme/dead-letters/dl-acme%2Fj%2F1%232/replay", "", ""},
		{[]string{"replay-all", "acme", "--limit", "10"}, "POST", "/v1/namespaces/acme/dead-letters:replay", `{"limit":10}`, ""},
		{[]string{"force", "acme", "open"}, "PUT", "/v1/namespaces/acme/breaker", `{"mode":"force_open"}`, ""},
		{[]string{"rotate-secret", "acme", "--overlap", "1h"}, "POST", "/v1/namespaces/acme/signing-secret:rotate", `{"overlap":"1h"}`, ""},
		{[]string{"revoke-key", "acme", "key_0011"}, "DELETE", "/v1/namespaces/acme/keys/key_0011", "", ""},
		{[]string{"get", "/healthz"}, "GET", "/healthz", "", ""},
		{[]string{"schedule", "acme"}, "", "", "", "schedule: missing JSON|-"},
		{[]string{"schedule", "acme", "{}", "extra"}, "", "", "", `schedule: unexpected argument "extra"`},
		{[]string{"jobs", "acme", "--colour", "red"}, "", "", "", "unknown flag --colour"},
		{[]string{"force", "acme", "sideways"}, "", "", "", "open, closed or auto"},
		{[]string{"fetch", "/x"}, "", "", "", "unknown command"},
		{[]string{"get", "healthz"}, "", "", "", "starting with /"},
	}
	for _, tt := range tests {
		c, err := clientRequest(tt.args)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%q", tt.args)
			continue
		}
		require.NoError(t, err, "%q", tt.args)
		require.Equal(t, []string{tt.method, tt.path, tt.body}, []string{c.method, c.path, c.body}, "%q", tt.args)
	}
}

// TestClientUsageMatchesCommands holds the help text, which usage errors
// quote, to the commands: each has one usage line naming as many
// arguments as it takes.
func TestClientUsageMatchesCommands(t *testing.T) {
	t.Parallel()
	for name, c := range clientCommands {
		u := commandUsage(name)
		require.NotEmpty(t, u, "%s has no line in clientUsage", name)
		require.Len(t, requiredArgs(u), c.args, "%s: usage %q", name, u)
		for _, f := range c.flags {
			if name == "dead-letters" && f == "before" {
				continue // the cursor, offered by "more: add --before ..."
			}
			require.Contains(t, u, "--"+f, "%s: usage %q", name, u)
		}
	}
	require.Contains(t, clientUsage, "$CHIME_API_URL, else http://"+config.Default().APIAddr+";", "the default --url")
}

// clientBundle is a fake chime API on 127.0.0.1 and the client run
// against it.
type clientBundle struct {
	srv *httptest.Server
	// run runs chime client with env as its whole environment, plus
	// CHIME_API_URL (the fake) unless env sets it.
	run func(env map[string]string, args ...string) (code int, stdout, stderr string)
	// tokens are the Authorization headers the fake received.
	tokens func() []string
}

func setupClient(t *testing.T, h http.HandlerFunc) *clientBundle {
	t.Helper()
	var mu sync.Mutex
	var tokens []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return &clientBundle{
		srv: srv,
		run: func(env map[string]string, args ...string) (int, string, string) {
			lookup := func(k string) (string, bool) {
				if v, ok := env[k]; ok {
					return v, true
				}
				if k == "CHIME_API_URL" {
					return srv.URL, true
				}
				return "", false
			}
			var out, errOut strings.Builder
			code := runClient(context.Background(), proc{args: args, lookupEnv: lookup, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut})
			return code, out.String(), errOut.String()
		},
		tokens: func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), tokens...)
		},
	}
}

// fakeAPI answers like chime's API for the namespace acme, token "tok".
func fakeAPI(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Authorization") != "Bearer tok" {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(401)
		_, _ = w.Write([]byte(`{"title":"Unauthorized","status":401}`))
		return
	}
	answers := map[string]string{
		"GET /v1/namespaces/acme/jobs":                   `{"jobs":[{"id":"tick","state":"scheduled","fires":3,"next_fire_at":null,"last_outcome":{"result":"succeeded"},"labels":{"tier":"gold","team":"billing"},"created_at":"2026-11-27T14:03:00Z"}],"next_cursor":"abc"}`,
		"GET /v1/namespaces/acme/jobs/tick":              `{"id":"tick","state":"scheduled","next_fire_at":"2026-11-27T14:03:00.5Z","callback":{"url":"http://127.0.0.1:9999/hook","body":{"at":"2026-01-01T00:00:00Z"}},"next_fires":[{"fire_seq":4,"scheduled_at":"2026-11-27T14:03:00Z","fire_at":"2026-11-27T14:03:00.5Z"},{"fire_seq":5,"scheduled_at":"2026-11-27T15:03:00Z","fire_at":"2026-11-27T15:03:20Z"}]}`,
		"POST /v1/namespaces/acme/keys":                  `{"id":"key_0011","key":"chk_acme_s3cret","namespace":"acme"}`,
		"PUT /v1/namespaces/acme":                        `{"namespace":"acme","keys":1,"version":3,"updated_at":"2026-11-27T14:03:00Z","defaulted":["spread"]}`,
		"POST /v1/namespaces/acme/signing-secret:rotate": `{"namespace":"acme","signing_secret":"whsec_x","previous_valid_until":"2026-11-28T14:03:00Z"}`,
		"GET /v1/namespaces/acme/stats": `{"namespace":"acme","from":"2026-11-27T14:00:00Z","to":"2026-11-27T14:03:00Z","step":"1m0s","points":[` +
			`{"t":"2026-11-27T14:00:00Z","requests":0,"successes":0,"failures":0,"retryable":0,"permanent":0,"deferred":0,"expired":0,"refused":0,"p50_ms":0,"p99_ms":0},` +
			`{"t":"2026-11-27T14:01:00Z","requests":3,"successes":2,"failures":1,"retryable":1,"permanent":0,"deferred":0,"expired":0,"refused":0,"p50_ms":12.5,"p99_ms":40},` +
			`{"t":"2026-11-27T14:02:00Z","requests":0,"successes":0,"failures":0,"retryable":0,"permanent":0,"deferred":0,"expired":0,"refused":0,"p50_ms":0,"p99_ms":0}]}`,
		"GET /v1/namespaces/quiet/stats": `{"namespace":"quiet","from":"2026-11-27T14:00:00Z","to":"2026-11-27T14:02:00Z","step":"1m0s","points":[` +
			`{"t":"2026-11-27T14:00:00Z","requests":0,"successes":0,"failures":0,"retryable":0,"permanent":0,"deferred":0,"expired":0,"refused":0,"p50_ms":0,"p99_ms":0},` +
			`{"t":"2026-11-27T14:01:00Z","requests":0,"successes":0,"failures":0,"retryable":0,"permanent":0,"deferred":0,"expired":0,"refused":0,"p50_ms":0,"p99_ms":0}]}`,
	}
	switch key := r.Method + " " + r.URL.Path; {
	case key == "DELETE /v1/namespaces/acme/keys/key_0011":
		w.WriteHeader(http.StatusNoContent)
	case answers[key] != "":
		_, _ = w.Write([]byte(answers[key]))
	case strings.HasPrefix(r.URL.Path, "/v1/namespaces/acme"):
		_, _ = w.Write([]byte(`{"method":"` + r.Method + `","path":"` + r.URL.Path + `","body":` + string(body) + `}`))
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Not Found","status":404,"detail":"no namespace nope"}`))
	}
}

var tokEnv = map[string]string{"CHIME_TOKEN": "tok"}

func TestClientCallsTheAPI(t *testing.T) {
	t.Parallel()
	b := setupClient(t, fakeAPI)
	code, out, errOut := b.run(tokEnv, "-o", "json", "schedule", "acme", `{"a":1}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"path": "/v1/namespaces/acme/jobs"`)

	code, out, errOut = b.run(tokEnv, "--utc", "jobs", "acme")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+STATE\s+NEXT FIRE\s+FIRES\s+LAST OUTCOME\s+LABELS\s+CREATED$`, lines[0])
	require.Regexp(t, `^tick\s+scheduled\s+-\s+3\s+succeeded\s+team:billing tier:gold\s+2026-11-27 14:03:00 UTC$`, lines[1])
	require.Equal(t, "more: add --cursor abc", lines[2])

	// The token from the state dir; a refused one says where it came from.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "admin-token"), []byte("bad\n"), 0o600))
	code, _, errOut = b.run(nil, "--state-dir", dir, "ns", "acme")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "401")
	require.Contains(t, errOut, "the token came from "+filepath.Join(dir, "admin-token"))

	// No token anywhere: the error says where it looked.
	code, _, errOut = b.run(nil, "--state-dir", filepath.Join(dir, "missing"), "ns", "acme")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "looked at --token, $CHIME_TOKEN, $CHIME_ADMIN_TOKEN and "+filepath.Join(dir, "missing", "admin-token"))
}

// TestClientOutput: every command prints fields or a table, with times in
// their zone (local, or UTC with --utc), and JSON with -o json.
func TestClientOutput(t *testing.T) {
	t.Parallel()
	b := setupClient(t, fakeAPI)
	// The zone is the machine's: the expected local time is computed the
	// way a reader's clock shows it.
	local := time.Date(2026, 11, 27, 14, 3, 0, 0, time.UTC).Local().Format("2006-01-02 15:04:05 MST")
	tests := []struct {
		name    string
		args    []string
		code    int
		stream  string // "out" or "err"
		lines   []string
		notWant []string
	}{
		{"key prints fields", []string{"--utc", "key", "acme"}, 0, "out",
			[]string{`^id\s+key_0011$`, `^key\s+chk_acme_s3cret$`, `^namespace\s+acme$`}, []string{"{"}},
		{"ns-put prints fields", []string{"--utc", "ns-put", "acme"}, 0, "out",
			[]string{`^updated_at\s+2026-11-27 14:03:00 UTC$`, `^version\s+3$`, `^defaulted\s+\["spread"\]$`}, nil},
		{"rotate-secret prints fields", []string{"--utc", "rotate-secret", "acme"}, 0, "out",
			[]string{`^previous_valid_until\s+2026-11-28 14:03:00 UTC$`, `^signing_secret\s+whsec_x$`}, []string{"{\n"}},
		{"job: times shown, a callback body as sent", []string{"--utc", "job", "acme", "tick"}, 0, "out",
			[]string{`^next_fire_at\s+2026-11-27 14:03:00 UTC$`, `^callback\s+\{"body":\{"at":"2026-01-01T00:00:00Z"\},"url":"http://127.0.0.1:9999/hook"\}$`}, nil},
		{"job: the next fires as a table, not a JSON cell", []string{"--utc", "job", "acme", "tick"}, 0, "out",
			[]string{`^next fires:$`, `^FIRE\s+SCHEDULED\s+FIRES AT$`, `^4\s+2026-11-27 14:03:00 UTC\s+2026-11-27 14:03:00 UTC$`, `^5\s+2026-11-27 15:03:00 UTC\s+2026-11-27 15:03:20 UTC$`},
			[]string{"next_fires", `"fire_seq"`}},
		{"local time by default, with its zone", []string{"jobs", "acme"}, 0, "out",
			[]string{`^tick\s+scheduled\s+-\s+3\s+succeeded\s+team:billing tier:gold\s+` + regexp.QuoteMeta(local) + `$`}, nil},
		{"an answer without a body", []string{"revoke-key", "acme", "key_0011"}, 0, "out",
			[]string{`^204 No Content$`}, nil},
		{"-o json: the API's JSON", []string{"-o", "json", "key", "acme"}, 0, "out",
			[]string{`^\{$`, `^  "key": "chk_acme_s3cret",$`}, nil},
		{"-o json keeps RFC 3339", []string{"-o", "json", "job", "acme", "tick"}, 0, "out",
			[]string{`^  "next_fire_at": "2026-11-27T14:03:00.5Z"`}, nil},
		{"a problem as fields", []string{"ns", "nope"}, 1, "err",
			[]string{`^GET /v1/namespaces/nope: 404 Not Found$`, `^title\s+Not Found$`, `^detail\s+no namespace nope$`}, []string{"{"}},
		{"a problem as JSON", []string{"-o", "json", "ns", "nope"}, 1, "err",
			[]string{`^  "title": "Not Found",$`}, nil},
		{"flags after the arguments", []string{"jobs", "acme", "-o", "json"}, 0, "out",
			[]string{`^\{$`, `^  "jobs": \[$`}, nil},
		{"--utc and -o=json after the arguments", []string{"job", "acme", "tick", "--utc", "-o=json"}, 0, "out",
			[]string{`^  "next_fire_at": "2026-11-27T14:03:00.5Z"`}, nil},
		{"a command flag's value is its own", []string{"-o", "json", "force", "acme", "open", "--note", "-o"}, 0, "out",
			[]string{`"note": "-o"`}, nil},
		{"METHOD PATH BODY, then flags: the body is the body", []string{"put", "/v1/namespaces/acme/x", `{"a":1}`, "-o", "json"}, 0, "out",
			[]string{`^  "body": \{$`, `^    "a": 1$`}, []string{"json\""}},
		{"stats: only the steps that saw calls", []string{"--utc", "stats", "acme"}, 0, "out",
			[]string{`^TIME\s+REQUESTS\s+OK\s+FAILED\s+DEFERRED\s+EXPIRED\s+REFUSED\s+P50 MS\s+P99 MS$`,
				`^2026-11-27 14:01:00 UTC\s+3\s+2\s+1\s+0\s+0\s+0\s+12.5\s+40$`,
				`^\(2 of 3 steps of 1m0s had no calls and are not shown; -o json shows them\)$`}, []string{"14:00:00 UTC  ", "14:02:00 UTC  "}},
		{"stats: a quiet range is one line", []string{"--utc", "stats", "quiet"}, 0, "out",
			[]string{`^no calls from 2026-11-27 14:00:00 UTC to 2026-11-27 14:02:00 UTC \(2 steps of 1m0s\)$`}, []string{"TIME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := b.run(tokEnv, tt.args...)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			got := map[string]string{"out": out, "err": errOut}[tt.stream]
			for _, re := range tt.lines {
				require.Regexp(t, "(?m)"+re, got)
			}
			for _, s := range tt.notWant {
				require.NotContains(t, got, s)
			}
		})
	}
}

// TestClientUsageErrors: a wrong command line prints what is wrong and the
// command's own usage line, not the whole help, and exits 2.
func TestClientUsageErrors(t *testing.T) {
	t.Parallel()
	b := setupClient(t, fakeAPI)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"jobs"}, "chime client: jobs: missing NS\nusage: chime client jobs NS [--state S] [--label K:V]... [--limit N] [--cursor C]\n"},
		{[]string{"schedule", "acme"}, "chime client: schedule: missing JSON|-\nusage: chime client schedule NS JSON|-\n"},
		{[]string{"pause", "acme"}, "chime client: pause: missing ID\nusage: chime client pause NS ID\n"},
		{[]string{"force", "acme"}, "chime client: force: missing open|closed|auto\nusage: chime client force NS open|closed|auto [--note N]\n"},
		{[]string{"ns-put"}, "chime client: ns-put: missing NS\nusage: chime client ns-put NS [JSON]\n"},
		{[]string{"job", "acme", "tick", "extra"}, "chime client: job: unexpected argument \"extra\"\nusage: chime client job NS ID\n"},
		{[]string{"jobs", "acme", "--colour", "red"}, "chime client: jobs: unknown flag --colour (it takes --state, --label, --limit, --cursor)\nusage: chime client jobs NS [--state S] [--label K:V]... [--limit N] [--cursor C]\n"},
		{[]string{"get", "healthz"}, "chime client: GET needs a PATH starting with /\nusage: chime client METHOD PATH [BODY|-]\n"},
		{[]string{"fetch"}, "chime client: unknown command or method \"fetch\"\nusage: " + clientSynopsis + " (\"chime client\" alone lists the commands)\n"},
		{[]string{"-o", "yaml", "jobs", "acme"}, "chime client: -o \"yaml\": use table or json\nusage: " + clientSynopsis + "\n"},
		{[]string{"jobs", "acme", "-o", "yaml"}, "chime client: -o \"yaml\": use table or json\nusage: " + clientSynopsis + "\n"},
		{[]string{"jobs", "acme", "-o"}, "chime client: flag -o needs a value\nusage: " + clientSynopsis + "\n"},
		{[]string{"get", "/healthz", "{}", "extra"}, "chime client: GET: unexpected argument \"extra\" (it takes PATH and at most one BODY; quote a BODY with spaces)\nusage: chime client METHOD PATH [BODY|-]\n"},
		{[]string{"get", "/healthz", "--limit", "5"}, "chime client: GET: unknown flag --limit (put query parameters in PATH)\nusage: chime client METHOD PATH [BODY|-]\n"},
	}
	for _, tt := range tests {
		code, out, errOut := b.run(tokEnv, tt.args...)
		require.Equal(t, 2, code, "%q", tt.args)
		require.Empty(t, out, "%q", tt.args)
		require.Equal(t, tt.want, errOut, "%q", tt.args)
	}
	require.Empty(t, b.tokens(), "a usage error calls nothing")

	// Alone, the client lists its commands; -h too, as an answer.
	code, _, errOut := b.run(tokEnv)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "Namespaces (admin token):")
	code, out, _ := b.run(tokEnv, "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Namespaces (admin token):")
}

// TestClientToken: a token given empty is an error, not a fall back to the
// next source (the admin token, where a namespace key was meant).
func TestClientToken(t *testing.T) {
	t.Parallel()
	b := setupClient(t, fakeAPI)
	admin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(admin, "admin-token"), []byte("tok\n"), 0o600))
	empty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(empty, "admin-token"), []byte("\n"), 0o600))
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		err  string
	}{
		{"CHIME_TOKEN set", map[string]string{"CHIME_TOKEN": "tok"}, nil, 0, ""},
		{"admin-token file", map[string]string{"CHIME_STATE_DIR": admin}, nil, 0, ""},
		{"CHIME_TOKEN before CHIME_ADMIN_TOKEN", map[string]string{"CHIME_TOKEN": "tok", "CHIME_ADMIN_TOKEN": "bad"}, nil, 0, ""},
		{"CHIME_TOKEN set empty", map[string]string{"CHIME_TOKEN": "", "CHIME_STATE_DIR": admin}, nil, 1,
			"$CHIME_TOKEN is set but empty: set it to a token, or unset it to use $CHIME_ADMIN_TOKEN or the admin-token file"},
		{"CHIME_TOKEN blank", map[string]string{"CHIME_TOKEN": " ", "CHIME_STATE_DIR": admin}, nil, 1, "$CHIME_TOKEN is set but empty"},
		{"CHIME_ADMIN_TOKEN set empty", map[string]string{"CHIME_ADMIN_TOKEN": "", "CHIME_STATE_DIR": admin}, nil, 1, "$CHIME_ADMIN_TOKEN is set but empty"},
		{"--token empty", map[string]string{"CHIME_STATE_DIR": admin}, []string{"--token", ""}, 1, "--token is empty"},
		{"empty admin-token file", map[string]string{"CHIME_STATE_DIR": empty}, nil, 1, filepath.Join(empty, "admin-token") + " is empty"},
	}
	// A group waits for its parallel cases before the count below.
	t.Run("cases", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				code, _, errOut := b.run(tt.env, append(tt.args, "ns-put", "acme")...)
				require.Equal(t, tt.code, code, errOut)
				if tt.err != "" {
					require.Contains(t, errOut, tt.err)
				}
			})
		}
	})
	// Only the good ones called the API, each with the token.
	require.Equal(t, []string{"Bearer tok", "Bearer tok", "Bearer tok"}, b.tokens())
}

// TestClientRedirects: a redirect within the API's origin is followed; one
// to another port of the same host is not, so the token stays with the
// API.
func TestClientRedirects(t *testing.T) {
	t.Parallel()
	other := setupClient(t, fakeAPI)
	api := setupClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/namespaces/moved":
			http.Redirect(w, r, "/v1/namespaces/acme", http.StatusTemporaryRedirect)
		case "/v1/namespaces/elsewhere":
			http.Redirect(w, r, other.srv.URL+"/v1/namespaces/acme", http.StatusTemporaryRedirect)
		default:
			fakeAPI(w, r)
		}
	})
	code, out, errOut := api.run(tokEnv, "ns-put", "moved")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "version")
	require.Equal(t, []string{"Bearer tok", "Bearer tok"}, api.tokens(), "followed with the token")

	code, _, errOut = api.run(tokEnv, "ns-put", "elsewhere")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "redirected to http://"+other.srv.Listener.Addr().String()+", outside "+api.srv.URL+": not following a redirect to another origin with the token")
	require.Empty(t, other.tokens(), "the other port got nothing")
}

// TestClientPlainHTTP: the token goes over plain http only to a loopback
// address, unless --insecure-http.
func TestClientPlainHTTP(t *testing.T) {
	t.Parallel()
	b := setupClient(t, fakeAPI)
	// 0.0.0.0 is not a loopback address, yet Linux connects it to this
	// machine: the refusal is tested without traffic leaving it.
	anyAddr := strings.Replace(b.srv.URL, "127.0.0.1", "0.0.0.0", 1)
	tests := []struct {
		name string
		url  string
		args []string
		code int
		err  string
	}{
		{"loopback", b.srv.URL, nil, 0, ""},
		{"not loopback", anyAddr, nil, 2, "refusing to send the token over plain http to " + strings.TrimPrefix(anyAddr, "http://") + ", which is not a loopback address; use https, or pass --insecure-http"},
		{"not loopback, --insecure-http", anyAddr, []string{"--insecure-http"}, 0, ""},
		{"not http", "ftp://127.0.0.1/", nil, 2, `--url "ftp://127.0.0.1/": want http(s)://host[:port]`},
		{"no scheme", "127.0.0.1:8080", nil, 2, "want http(s)://host[:port]"},
	}
	t.Run("cases", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				code, _, errOut := b.run(map[string]string{"CHIME_TOKEN": "tok", "CHIME_API_URL": tt.url}, append(tt.args, "ns-put", "acme")...)
				require.Equal(t, tt.code, code, errOut)
				require.Contains(t, errOut, tt.err)
			})
		}
	})
	require.Len(t, b.tokens(), 2, "only the loopback and --insecure-http calls were made")

	// The rule without a network: what counts as loopback.
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8080":     true,
		"http://127.8.9.10":         true,
		"http://[::1]:8080":         true,
		"http://LocalHost:8080":     true,
		"https://chime.example.com": true,
		"http://chime.example.com":  false,
		"http://10.0.0.5:8080":      false,
		"http://[::]:8080":          false,
		"http://localhost.evil.com": false,
	} {
		_, err := apiURL(raw, false)
		require.Equal(t, ok, err == nil, "%s: %v", raw, err)
	}
}

func TestClientOrigin(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080/y?z", true},
		{"http://Host/x", "http://host:80/y", true},
		{"https://host/x", "https://host:443/", true},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8081/", false},
		{"https://host/", "http://host:443/", false},
		{"https://host/", "https://other/", false},
	} {
		a, err := url.Parse(tt.a)
		require.NoError(t, err)
		b, err := url.Parse(tt.b)
		require.NoError(t, err)
		require.Equal(t, tt.same, origin(a) == origin(b), "%s vs %s", tt.a, tt.b)
	}
}
