package dispatcher

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// closingEndpoint is an HTTP server on 127.0.0.1 that can close every
// connection it holds at once, as an endpoint closing idle keep-alive
// connections or restarting does, and can hang up on a request without
// answering.
type closingEndpoint struct {
	*httptest.Server
	open     atomic.Int64 // connections the server holds
	received atomic.Int64 // requests that reached the handler
	answer   atomic.Int64 // status to answer; 0: close the connection without answering
	inside   atomic.Int64 // requests held by hold
	mu       sync.Mutex
	hold     chan struct{} // while not nil, requests wait for it to close
	conns    map[net.Conn]bool
}

func newClosingEndpoint(t *testing.T) *closingEndpoint {
	e := &closingEndpoint{conns: map[net.Conn]bool{}}
	e.answer.Store(http.StatusNoContent)
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.received.Add(1)
		e.mu.Lock()
		hold := e.hold
		e.mu.Unlock()
		if hold != nil {
			e.inside.Add(1)
			<-hold
		}
		status := int(e.answer.Load())
		if status == 0 {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = c.Close()
			}
			return
		}
		w.WriteHeader(status)
	}))
	e.Config.ConnState = func(c net.Conn, s http.ConnState) {
		e.mu.Lock()
		defer e.mu.Unlock()
		switch s {
		case http.StateNew:
			e.open.Add(1)
			e.conns[c] = true
		case http.StateClosed, http.StateHijacked:
			e.open.Add(-1)
			delete(e.conns, c)
		}
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

// pool makes n calls at once, held until all n are in, so the client
// ends up with n pooled connections to the endpoint.
func (e *closingEndpoint) pool(t *testing.T, d *Dispatcher, n int) {
	t.Helper()
	hold := make(chan struct{})
	e.mu.Lock()
	e.hold = hold
	e.mu.Unlock()
	var wg sync.WaitGroup
	results := make([]callResult, n)
	for i := range n {
		wg.Go(func() { results[i] = callOf(d, newDue("ns", "fill", e.URL)) })
	}
	waitFor(t, 10*time.Second, "every call on its own connection", func() bool { return e.inside.Load() == int64(n) })
	e.mu.Lock()
	e.hold = nil
	e.mu.Unlock()
	close(hold)
	wg.Wait()
	for _, r := range results {
		require.Equal(t, http.StatusNoContent, r.status, r.err)
	}
	require.EqualValues(t, n, e.open.Load())
}

// closeAll closes every connection on the endpoint's side and waits until
// they are gone: the client's pooled connections are now stale.
func (e *closingEndpoint) closeAll(t *testing.T) {
	t.Helper()
	e.CloseClientConnections()
	waitFor(t, 10*time.Second, "the endpoint's connections closed", func() bool { return e.open.Load() == 0 })
}

// resetAll resets every connection (RST, as load balancers often drop
// idle ones) and waits until they are gone.
func (e *closingEndpoint) resetAll(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	for c := range e.conns {
		require.NoError(t, c.(*net.TCPConn).SetLinger(0))
		_ = c.Close()
	}
	e.mu.Unlock()
	waitFor(t, 10*time.Second, "the endpoint's connections reset", func() bool { return e.open.Load() == 0 })
}

// callTestDispatcher is a dispatcher that is only used to make calls.
func callTestDispatcher(t testing.TB, mutate ...func(*Config)) *Dispatcher {
	t.Helper()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Guard: Guard{AllowLoopback: true}}
	for _, m := range mutate {
		m(&cfg)
	}
	require.NoError(t, cfg.validate())
	return &Dispatcher{cfg: cfg, client: newCallClient(&cfg.Guard, cfg.IdleConnTimeout), urls: newCallURLs()}
}

// TestCallResendsOnConnectionClosedBeforeAnswer: a call whose connection
// the endpoint had closed is sent again on a new connection, however many
// closed ones the pool holds, and the outcome is what the endpoint
// answered on that one; a call the endpoint itself hangs up on is sent
// freshSends more times and then reported as the failure it is.
func TestCallResendsOnConnectionClosedBeforeAnswer(t *testing.T) {
	t.Parallel()
	const (
		success   = chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		retryable = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE
	)
	for _, tc := range []struct {
		name   string
		pooled int  // connections in the pool before the call
		closed bool // the endpoint closes them before the call
		reset  bool // the endpoint resets them before the call
		answer int  // 0: the endpoint hangs up on the call
		body   int  // bytes of body, when not the default due's
		// want
		status   int
		class    chimev1.OutcomeClass
		kind     string
		resent   int64
		received int64 // requests that reached the endpoint's handler
	}{
		{name: "live pool", pooled: 8, answer: 204, status: 204, class: success, received: 1},
		{name: "one closed pooled connection", pooled: 1, closed: true, answer: 204, status: 204, class: success, resent: 1, received: 1},
		{name: "eight closed pooled connections", pooled: 8, closed: true, answer: 204, status: 204, class: success, resent: 1, received: 1},
		{name: "eight reset pooled connections", pooled: 8, reset: true, answer: 204, status: 204, class: success, resent: 1, received: 1},
		// Written in several writes: the endpoint's reset of the first
		// one fails the next.
		{name: "eight closed pooled connections, 256 KiB body", pooled: 8, closed: true, answer: 204, body: 256 << 10, status: 204, class: success, resent: 1, received: 1},
		{name: "closed pool then 503", pooled: 8, closed: true, answer: 503, status: 503, class: retryable, resent: 1, received: 1},
		{name: "closed pool then hang-up", pooled: 8, closed: true, answer: 0, class: retryable, kind: kindConnection, resent: 1, received: freshSends},
		{name: "endpoint hangs up on every call", pooled: 0, answer: 0, class: retryable, kind: kindConnection, resent: 1, received: 1 + freshSends},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newClosingEndpoint(t)
			d := callTestDispatcher(t)
			e.pool(t, d, tc.pooled)
			if tc.closed {
				e.closeAll(t)
			}
			if tc.reset {
				e.resetAll(t)
			}
			e.answer.Store(int64(tc.answer))
			before := e.received.Load()

			due := newDue("ns", "job", e.URL)
			if tc.body > 0 {
				due.Callback.Body = make([]byte, tc.body)
			}
			r := callOf(d, due)
			require.Equal(t, tc.status, r.status, r.err)
			require.Equal(t, tc.class, r.class, r.err)
			require.Equal(t, tc.kind, r.errKind, r.err)
			if tc.kind == kindConnection {
				require.Contains(t, r.err, fasthttp.ErrConnectionClosed.Error())
			}
			require.Equal(t, tc.resent, d.stats.resent.Load(), "calls sent again")
			require.Equal(t, tc.received, e.received.Load()-before, "requests that reached the endpoint")
		})
	}
}

// TestIdleConnectionsAreClosed: a connection idle for IdleConnTimeout is
// closed by the dispatcher, not left in the pool for the endpoint to close.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	e := newClosingEndpoint(t)
	d := callTestDispatcher(t, func(c *Config) { c.IdleConnTimeout = 50 * time.Millisecond })
	e.pool(t, d, 2)
	waitFor(t, 10*time.Second, "the idle connections closed by the dispatcher", func() bool { return e.open.Load() == 0 })
	r := callOf(d, newDue("ns", "job", e.URL))
	require.Equal(t, http.StatusNoContent, r.status, r.err)
	require.Zero(t, d.stats.resent.Load(), "no stale connection was taken")
}

// TestCutCallIsNotResent: a call cut short at shutdown (its connection
// closed by the dispatcher) ends at once; it is not sent again on a new
// connection, which would hold the shutdown for the call's timeout.
func TestCutCallIsNotResent(t *testing.T) {
	t.Parallel()
	e := newClosingEndpoint(t)
	d := callTestDispatcher(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	e.mu.Lock()
	e.hold = hold
	e.mu.Unlock()
	done := make(chan callResult, 1)
	go func() { done <- callOf(d, newDue("ns", "job", e.URL)) }()
	waitFor(t, 10*time.Second, "the call at the endpoint", func() bool { return e.inside.Load() == 1 })

	d.client.cutAll()
	var r callResult
	waitFor(t, 5*time.Second, "the cut call to return", func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	require.Equal(t, kindConnection, r.errKind, r.err)
	require.Zero(t, d.stats.resent.Load(), "calls sent again")
	require.EqualValues(t, 1, e.received.Load(), "requests that reached the endpoint")
}

// A job's timeout is its own up to schema.MaxHTTPTimeout, the limit the
// validation holds every job to: the dispatcher cuts none short.
func TestCallTimeoutIsTheJobs(t *testing.T) {
	t.Parallel()
	d := callTestDispatcher(t)
	for _, tc := range []struct{ job, want time.Duration }{
		{0, DefaultCallTimeout},
		{time.Second, time.Second},
		{schema.MaxHTTPTimeout, schema.MaxHTTPTimeout},
		{2 * schema.MaxHTTPTimeout, schema.MaxHTTPTimeout}, // a row from when the limit was higher
	} {
		cb := &chimev1.HttpCallback{}
		if tc.job > 0 {
			cb.Timeout = durationpb.New(tc.job)
		}
		require.Equal(t, tc.want, d.timeoutOf(cb), "job timeout %s", tc.job)
	}
}

// callOf makes due's call as process does, with no namespace config.
func callOf(d *Dispatcher, due *chimev1.Due) callResult {
	return d.call(due, nil, d.urls.parse(due.GetCallback().GetUrl()), time.Now())
}

// TestOwnHeaderKeysAreCanonical: call sets chime's headers with
// SetCanonical, which trusts the key to be in fasthttp's canonical form;
// a name that is not would be sent as given and missed by a lookup of
// its canonical form. A value with a line break goes through Set, which
// replaces the break.
func TestOwnHeaderKeysAreCanonical(t *testing.T) {
	t.Parallel()
	for _, key := range [][]byte{keyIdempotencyKey, keyJobID, keyNamespace, keyAttempt, keyScheduledAt, keyDeadline} {
		var h fasthttp.RequestHeader
		h.Set(string(key), "v")
		var got []string
		h.VisitAll(func(k, _ []byte) { got = append(got, string(k)) })
		require.Equal(t, []string{string(key)}, got, "fasthttp's canonical form of %q", key)
	}
	var h fasthttp.RequestHeader
	setOwn(&h, keyJobID, "a\r\nX-Injected: 1")
	require.Empty(t, h.Peek("X-Injected"))
	require.NotContains(t, string(h.Peek(HeaderJobID)), "\n")
	setOwn(&h, keyJobID, "job-1")
	require.Equal(t, "job-1", string(h.Peek(HeaderJobID)))
}

// BenchmarkCall is the CPU of one callback made as process makes it, the
// endpoint (fasthttp on 127.0.0.1, answering 204) included, with a JSON
// body and the header a job usually sets: the dispatcher's share of a
// fired job beside what the HTTP exchange itself costs.
func BenchmarkCall(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNoContent) }}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	d := callTestDispatcher(b)
	due := newDue("bench", "job-1", "http://"+ln.Addr().String()+"/hook")
	due.Callback.Headers = map[string]string{"Content-Type": "application/json"}
	u := d.urls.parse(due.GetCallback().GetUrl())
	b.ReportAllocs()
	for b.Loop() {
		if r := d.call(due, nil, u, time.Now()); r.status != fasthttp.StatusNoContent {
			b.Fatalf("status %d (%s)", r.status, r.err)
		}
	}
}
