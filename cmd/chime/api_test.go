package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/credential"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/internal/kafkatest"
)

// devAPI is a `chime dev` child process with its API address.
type devAPI struct {
	*devProc
	base   string
	stdout *syncBuffer
	// clickhouse is the hint of the log line `local ClickHouse started`:
	// the DSN to share the local server by, without its password.
	clickhouse chan string
	// metrics is the address of --metrics-addr, from `metrics listening`.
	metrics chan string
}

// syncBuffer is stdout, written by exec's copier while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var (
	apiReadyLine        = regexp.MustCompile(`msg="api ready".* addr=(\S+)`)
	clickhouseStartLine = regexp.MustCompile(`msg="local ClickHouse started".* CHIME_CLICKHOUSE_DSN=(\S+) and CHIME_CLICKHOUSE_PASSWORD from (\S+?)"?$`)
	metricsLine         = regexp.MustCompile(`msg="metrics listening".* addr=(\S+)`)
)

// startDevAPI starts `chime dev` with the API on a free port and waits until
// the API is ready.
func startDevAPI(t *testing.T, stateDir string, port int) *devAPI {
	t.Helper()
	return startDevAPIWatching(t, stateDir, port, nil)
}

// startDevAPIWatching is startDevAPI with every log line handed to onLine
// (if not nil).
func startDevAPIWatching(t *testing.T, stateDir string, port int, onLine func(string)) *devAPI {
	t.Helper()
	return startDevAPIOf(t, "", stateDir, port, onLine)
}

// startDevAPIOf is startDevAPIWatching running program (startChildOf).
func startDevAPIOf(t *testing.T, program, stateDir string, port int, onLine func(string)) *devAPI {
	t.Helper()
	stdout := new(syncBuffer)
	addr, ch, metrics := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	p := startChildOf(t, program, nil, stdout, func(line string) {
		if m := apiReadyLine.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
		if m := clickhouseStartLine.FindStringSubmatch(line); m != nil {
			select {
			case ch <- m[1]:
			default:
			}
		}
		if m := metricsLine.FindStringSubmatch(line); m != nil {
			select {
			case metrics <- m[1]:
			default:
			}
		}
		if onLine != nil {
			onLine(line)
		}
	}, "dev", "--state-dir", stateDir, "--embedded-broker-port", fmt.Sprint(port), "--partitions", "4", "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0")
	select {
	case a := <-addr:
		return &devAPI{devProc: p, base: "http://" + a, stdout: stdout, clickhouse: ch, metrics: metrics}
	case err := <-p.exited:
		t.Fatalf("chime dev exited before its API was ready: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("chime dev's API not ready within 90s")
	}
	return nil
}

// readAdminToken reads the admin token chime dev wrote in its state dir.
func readAdminToken(t *testing.T, stateDir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(stateDir, "admin-token"))
	require.NoError(t, err)
	return strings.TrimSpace(string(raw))
}

func (d *devAPI) call(t *testing.T, method, path, token, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

type arrival struct {
	path   string
	header http.Header
	body   []byte
	at     time.Time
}

// receiver records the callbacks chime makes.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	seen []arrival
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, arrival{path: req.URL.Path, header: req.Header.Clone(), body: body, at: time.Now()})
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) at(path string) []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []arrival
	for _, a := range r.seen {
		if a.path == path {
			out = append(out, a)
		}
	}
	return out
}

var waitFor = kafkatest.WaitFor

// TestDevAPIEndToEnd runs the built `chime dev`, creates a namespace and a
// key over the API, schedules one-shot, interval and cron jobs at a local
// receiver and sees them arrive on time, signed; then a job acknowledged
// with 201 right before kill -9 still fires after the restart.
func TestDevAPIEndToEnd(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	port := freeport.For(t)
	dev := startDevAPI(t, stateDir, port)
	admin := readAdminToken(t, stateDir)
	require.Contains(t, dev.stdout.String(), admin, "the generated token is printed")

	rcv := newReceiver(t)
	var keyBytes [32]byte
	_, _ = rand.Read(keyBytes[:])
	secret := "whsec_" + base64.StdEncoding.EncodeToString(keyBytes[:])
	st, out := dev.call(t, "PUT", "/v1/namespaces/e2e", admin, `{"signing_secret": "`+secret+`", "allowed_hosts": ["127.0.0.1"]}`)
	require.Equal(t, 201, st, "%v", out)
	st, out = dev.call(t, "POST", "/v1/namespaces/e2e/keys", admin, "")
	require.Equal(t, 201, st, "%v", out)
	key := out["key"].(string)
	checkQuickStart(t, dev, admin)

	job := func(path, schedule, extra string) string {
		st, out := dev.call(t, "POST", "/v1/namespaces/e2e/jobs", key,
			`{"schedule": `+schedule+`, "callback": {"url": "`+rcv.URL+path+`"`+extra+`}}`)
		require.Equal(t, 201, st, "%v", out)
		return out["id"].(string)
	}
	// Idempotent create, auth, and precise validation problems, all against
	// the real process.
	idem := `{"schedule": {"in": "1h"}, "callback": {"url": "` + rcv.URL + `/idem"}}`
	st, first := dev.call(t, "POST", "/v1/namespaces/e2e/jobs", key, idem, "Idempotency-Key", "order-1")
	require.Equal(t, 201, st, "%v", first)
	st, again := dev.call(t, "POST", "/v1/namespaces/e2e/jobs", key, idem, "Idempotency-Key", "order-1")
	require.Equal(t, 201, st, "%v", again)
	require.Equal(t, first["id"], again["id"], "the same Idempotency-Key gives the same job")
	st, _ = dev.call(t, "GET", "/v1/namespaces/e2e/jobs/"+first["id"].(string), "", "")
	require.Equal(t, 401, st, "no token")
	st, out = dev.call(t, "PUT", "/v1/namespaces/other", admin, `{}`)
	require.Equal(t, 201, st, "%v", out)
	st, out = dev.call(t, "POST", "/v1/namespaces/other/keys", admin, "")
	require.Equal(t, 201, st, "%v", out)
	st, _ = dev.call(t, "GET", "/v1/namespaces/e2e/jobs/"+first["id"].(string), out["key"].(string), "")
	require.Equal(t, 403, st, "another namespace's key")
	for _, bad := range []struct {
		name, body string
		status     int
		detail     string
	}{
		{"bad cron", `{"schedule": {"cron": "*/0 * * * *"}, "callback": {"url": "` + rcv.URL + `"}}`, 422, "cron"},
		{"at past its window", `{"schedule": {"at": "2020-01-01T00:00:00Z"}, "relevancy_window": "1m", "callback": {"url": "` + rcv.URL + `"}}`, 422, "relevancy window"},
		{"unknown field", `{"schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `"}, "colour": "red"}`, 400, "colour"},
		{"oversized body", `{"schedule": {"in": "1s"}, "callback": {"url": "` + rcv.URL + `", "body": "` + strings.Repeat("x", 2<<20) + `"}}`, 413, ""},
		{"host not allowed", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/hook"}}`, 422, "example.com"},
	} {
		st, out := dev.call(t, "POST", "/v1/namespaces/e2e/jobs", key, bad.body)
		require.Equal(t, bad.status, st, "%s: %v", bad.name, out)
		require.Contains(t, fmt.Sprint(out), bad.detail, bad.name)
	}

	onceID := job("/once", `{"in": "2s"}`, `, "body": "hello", "headers": {"X-Test": "yes"}`)
	every := job("/every", `{"every": "1s"}`, "")
	cron := job("/cron", `{"cron": "*/2 * * * * *"}`, "")

	waitFor(t, 60*time.Second, "one-shot, interval and cron callbacks", func() bool {
		return len(rcv.at("/once")) == 1 && len(rcv.at("/every")) >= 3 && len(rcv.at("/cron")) >= 2
	})
	for _, a := range append(append(rcv.at("/once"), rcv.at("/every")...), rcv.at("/cron")...) {
		scheduled, err := time.Parse(time.RFC3339Nano, a.header.Get("X-Chime-Scheduled-At"))
		require.NoError(t, err, "X-Chime-Scheduled-At on %s", a.path)
		require.False(t, a.at.Before(scheduled), "%s arrived before its time", a.path)
		require.Less(t, a.at.Sub(scheduled), 5*time.Second, "%s late", a.path)
		id, ts := a.header.Get("webhook-id"), a.header.Get("webhook-timestamp")
		require.NotEmpty(t, id)
		m := hmac.New(sha256.New, keyBytes[:])
		m.Write([]byte(id + "." + ts + "."))
		m.Write(a.body)
		require.Equal(t, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)), a.header.Get("webhook-signature"), "signature on %s", a.path)
	}
	once := rcv.at("/once")[0]
	require.Equal(t, "hello", string(once.body))
	require.Equal(t, "yes", once.header.Get("X-Test"))
	require.Equal(t, "e2e", once.header.Get("X-Chime-Namespace"))

	// The API reads analytics from the ClickHouse dev's sink started: the
	// one-shot's attempt arrives there.
	if tools, err := clickhouse.FindTools("."); err == nil && clickhouse.Installed(tools) {
		var out map[string]any
		waitFor(t, 90*time.Second, "the one-shot's attempt in GET .../attempts", func() bool {
			var st int
			st, out = dev.call(t, "GET", "/v1/namespaces/e2e/jobs/"+onceID+"/attempts", key, "")
			atts, _ := out["attempts"].([]any)
			return st == 200 && len(atts) == 1
		})
		require.Equal(t, "success", out["attempts"].([]any)[0].(map[string]any)["class"])
		st, out := dev.call(t, "GET", "/v1/namespaces/e2e/stats", key, "")
		require.Equal(t, 200, st, "%v", out)
		checkSharedClickHouse(t, dev, stateDir, port, admin, key, onceID)
	} else {
		t.Log("no local ClickHouse (make clickhouse): the analytics routes are not checked")
	}

	checkMetrics(t, dev, admin)
	checkStandaloneAPI(t, dev, stateDir, port, admin, key, onceID)

	// Signing-secret rotation: during the overlap every callback carries a
	// signature by the new secret and one by the old, space-separated.
	st, out = dev.call(t, "POST", "/v1/namespaces/e2e/signing-secret:rotate", admin, `{"overlap": "1h"}`)
	require.Equal(t, 200, st, "%v", out)
	fresh := out["signing_secret"].(string)
	require.NotNil(t, out["previous_valid_until"])
	rotatedAt := time.Now()
	waitFor(t, 30*time.Second, "a callback signed by both secrets", func() bool {
		for _, a := range rcv.at("/every") {
			if a.at.After(rotatedAt) && len(strings.Fields(a.header.Get("webhook-signature"))) == 2 {
				return true
			}
		}
		return false
	})
	for _, a := range rcv.at("/every") {
		if sigs := a.header.Get("webhook-signature"); a.at.After(rotatedAt) && len(strings.Fields(sigs)) == 2 {
			id, ts := a.header.Get("webhook-id"), a.header.Get("webhook-timestamp")
			require.True(t, dispatcher.VerifySignature(fresh, id, ts, sigs, a.body), "the new secret's signature")
			require.True(t, dispatcher.VerifySignature(secret, id, ts, sigs, a.body), "the old secret's signature")
			require.True(t, dispatcher.VerifySignature(fresh, id, ts, strings.Fields(sigs)[0], a.body), "the new one first")
			break
		}
	}

	for _, id := range []string{every, cron} {
		st, out := dev.call(t, "DELETE", "/v1/namespaces/e2e/jobs/"+id, key, "")
		require.Equal(t, 200, st, "%v", out)
		require.Equal(t, "cancelled", out["state"])
	}

	// kill -9 right after the 201, before the job is due.
	st, out = dev.call(t, "POST", "/v1/namespaces/e2e/jobs", key,
		`{"schedule": {"in": "4s"}, "callback": {"url": "`+rcv.URL+`/after-kill"}}`, "Idempotency-Key", "survivor")
	require.Equal(t, 201, st, "%v", out)
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGKILL))
	<-dev.exited

	dev = startDevAPI(t, stateDir, port)
	require.NotContains(t, dev.stdout.String(), admin, "the token is printed only when created")
	waitFor(t, 90*time.Second, "the job acknowledged before kill -9", func() bool { return len(rcv.at("/after-kill")) == 1 })

	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-dev.exited:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("chime dev did not stop within 60s of SIGTERM")
	}
}

// startStandaloneAPI starts a `chime api` of its own (own state dir) on
// the embedded broker of the `chime dev` in stateDir, given that one's
// Kafka credential and query secret, as docs/operations.md says to, and
// waits until it is ready.
func startStandaloneAPI(t *testing.T, stateDir string, port int, admin string, env ...string) *devAPI {
	t.Helper()
	env = append(standaloneAPIEnv(t, stateDir, port, admin), env...)
	addr := make(chan string, 1)
	p := startChildEnv(t, env, nil, func(line string) {
		if m := apiReadyLine.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
	}, "api")
	select {
	case a := <-addr:
		return &devAPI{devProc: p, base: "http://" + a}
	case err := <-p.exited:
		t.Fatalf("chime api exited before it was ready: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("chime api not ready within 90s")
	}
	return nil
}

// standaloneAPIEnv is the environment of a `chime api` of its own (own
// state dir) on the embedded broker of the `chime dev` in stateDir, with
// that one's Kafka credential and query secret (a later entry overrides
// one of them).
func standaloneAPIEnv(t *testing.T, stateDir string, port int, admin string) []string {
	t.Helper()
	kafka, err := kafkaauth.Load(filepath.Join(stateDir, config.KafkaCredentialFile))
	require.NoError(t, err)
	query, err := credential.Load(filepath.Join(stateDir, config.QueryCredentialFile))
	require.NoError(t, err)
	return []string{
		"CHIME_BROKERS=127.0.0.1:" + fmt.Sprint(port),
		"CHIME_KAFKA_SASL_USER=" + kafka.User, "CHIME_KAFKA_SASL_PASSWORD=" + kafka.Password,
		"CHIME_QUERY_SECRET=" + query.Password,
		"CHIME_ADMIN_TOKEN=" + admin,
		"CHIME_CLICKHOUSE_DSN=",
		"CHIME_STATE_DIR=" + filepath.Join(t.TempDir(), "api"),
		"CHIME_PARTITIONS=4", "CHIME_METRICS_ADDR=", "CHIME_API_ADDR=127.0.0.1:0",
	}
}

// checkStandaloneAPI: a `chime api` of its own beside `chime dev` holds no
// job rows; it reads them from dev's scheduler, found in the scheduler
// group's membership, and answers as dev's own API does, its own writes
// included.
func checkStandaloneAPI(t *testing.T, dev *devAPI, stateDir string, port int, admin, key, onceID string) {
	t.Helper()
	other := startStandaloneAPI(t, stateDir, port, admin, "CHIME_QUOTA_PENDING=20")
	for _, path := range []string{"/v1/namespaces/e2e/jobs/" + onceID, "/v1/namespaces/e2e/jobs?limit=2", "/v1/namespaces/e2e/jobs?state=completed"} {
		// The e2e namespace's cron job fires meanwhile: its row may change
		// between the two reads, so they are read again until they agree.
		var want, got map[string]any
		agree := func() bool {
			var st int
			st, want = dev.call(t, "GET", path, key, "")
			require.Equal(t, 200, st, "%s: %v", path, want)
			st, got = other.call(t, "GET", path, key, "")
			require.Equal(t, 200, st, "%s: %v", path, got)
			return reflect.DeepEqual(want, got)
		}
		for deadline := time.Now().Add(10 * time.Second); !agree() && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		require.Equal(t, want, got, "%s: the same answer from either API", path)
	}
	// A namespace key's create counts the namespace's live jobs (the
	// pending-jobs quota) across the schedulers.
	st, out := other.call(t, "POST", "/v1/namespaces/e2e/jobs", key, `{"id": "via-standalone", "schedule": {"in": "1h"}, "callback": {"url": "http://127.0.0.1:9/x"}}`)
	require.Equal(t, 201, st, "%v", out)
	waitFor(t, 30*time.Second, "dev's API to read the job the other created", func() bool {
		st, _ := dev.call(t, "GET", "/v1/namespaces/e2e/jobs/via-standalone", key, "")
		return st == 200
	})
	checkReadsItsWrites(t, other, admin)
	require.NoError(t, other.cmd.Process.Signal(syscall.SIGTERM))
	<-other.exited
}

// checkSharedClickHouse: the local ClickHouse of `chime dev` lets in only
// the credential kept in the state dir. The log line names the server
// without the password; another process given the DSN and the password by
// configuration (a `chime api` of its own) reads the same analytics.
func checkSharedClickHouse(t *testing.T, dev *devAPI, stateDir string, port int, admin, key, onceID string) {
	t.Helper()
	var dsn string
	select {
	case dsn = <-dev.clickhouse:
	default:
		t.Fatal("no `local ClickHouse started` line naming CHIME_CLICKHOUSE_DSN and CHIME_CLICKHOUSE_PASSWORD")
	}
	credPath := filepath.Join(stateDir, "clickhouse-credential")
	fi, err := os.Stat(credPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ch, err := credential.Load(credPath)
	require.NoError(t, err)
	require.NotContains(t, dsn, ch.Password, "the log line does not show the password")

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	res, err := http.Post("http://"+u.Host+"/", "text/plain", strings.NewReader("SELECT count() FROM chime.dead_letters"))
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "without the credential: %s", body)
	require.Contains(t, string(body), clickhouse.NoCredentialAnswer)

	other := startStandaloneAPI(t, stateDir, port, admin, "CHIME_CLICKHOUSE_DSN="+dsn, "CHIME_CLICKHOUSE_PASSWORD="+ch.Password)
	p := other.devProc
	var out map[string]any
	waitFor(t, 30*time.Second, "the other API's analytics", func() bool {
		var st int
		st, out = other.call(t, "GET", "/v1/namespaces/e2e/jobs/"+onceID+"/attempts", key, "")
		atts, _ := out["attempts"].([]any)
		return st == 200 && len(atts) == 1
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	<-p.exited
}
