package dispatcher

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Headers chime sets on every callback; a job's own headers cannot
// override them.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderJobID          = "X-Chime-Job-Id"
	HeaderNamespace      = "X-Chime-Namespace"
	HeaderAttempt        = "X-Chime-Attempt"
	HeaderScheduledAt    = "X-Chime-Scheduled-At"
	HeaderDeadline       = "X-Chime-Deadline"
)

// chime's header names as fasthttp keeps them (its canonical form, which
// TestOwnHeaderKeysAreCanonical holds them to), for SetCanonical: Set
// copies and normalises the key and copies the value before it sets
// them, 3 % of the fire phase's CPU for the three string headers (make
// bench's burst profile, 1 December).
var (
	keyIdempotencyKey = []byte(HeaderIdempotencyKey)
	keyJobID          = []byte(HeaderJobID)
	keyNamespace      = []byte(HeaderNamespace)
	keyAttempt        = []byte(HeaderAttempt)
	keyScheduledAt    = []byte(HeaderScheduledAt)
	keyDeadline       = []byte(HeaderDeadline)
)

// setOwn sets one of chime's headers to v, an id or name the scheduler
// validated, which has no line break. One that had would go through Set,
// which replaces line breaks, so no value can split the request's header.
// SetCanonical copies v, so v's bytes are only read.
func setOwn(h *fasthttp.RequestHeader, key []byte, v string) {
	if strings.ContainsAny(v, "\r\n") {
		h.Set(string(key), v)
		return
	}
	h.SetCanonical(key, unsafe.Slice(unsafe.StringData(v), len(v)))
}

// drainLimit is how much of a response body is read so the connection can
// be reused; a bigger body closes the connection.
const drainLimit = 64 << 10

// callResult is what one HTTP call produced.
type callResult struct {
	class      chimev1.OutcomeClass
	status     int
	errKind    string
	err        string
	body       []byte
	retryAfter string
	started    time.Time // on the injected clock
	latency    time.Duration
	url        string
	method     string
}

// callClient makes the callbacks: fasthttp's client, which costs about
// half the CPU of net/http's per call (pooled requests and responses, no
// goroutines per connection), with keep-alive connections capped per host,
// a dialer guarded against SSRF, no proxy (a proxy would be the dialled
// address and bypass the guard) and no redirects (a redirect is the
// endpoint's answer; it is reported, not followed).
//
// A pooled connection may have been closed by the endpoint while it sat
// idle (its keep-alive timeout, a restart); the call sent on it then ends
// before any byte of an answer, and the endpoint never saw it or never
// answered it. Such a call is sent again through fresh, whose
// connections are dialled for one call and closed after it, so the
// next send cannot land on another stale pooled connection. fasthttp's
// own resend (io.EOF only, MaxIdemponentCallAttempts times) takes the next
// pooled connection, which after a restart is just as stale; it is off.
type callClient struct {
	pooled *fasthttp.Client
	fresh  *fasthttp.Client
	conns  *connSet
	// cut is set when shutdown closes the connections to end the calls:
	// those calls also end before an answer, and are not sent again.
	cut atomic.Bool
}

// maxConnsPerHost bounds the connections to one host: calls beyond it wait
// for one (within their timeout). A namespace's max_concurrency still
// bounds its calls in flight; this bounds what one busy host costs both
// ends (every connection has its own buffers and wakeups).
const maxConnsPerHost = 256

func newCallClient(g *Guard, idleConnTimeout time.Duration) *callClient {
	conns := &connSet{m: map[*trackedConn]struct{}{}}
	dialer := g.dialer()
	client := func() *fasthttp.Client {
		return &fasthttp.Client{
			Name: "chime-dispatcher",
			Dial: func(addr string) (net.Conn, error) {
				c, err := dialer.Dial("tcp", addr)
				if err != nil {
					return nil, err
				}
				return conns.add(c), nil
			},
			MaxConnsPerHost:     maxConnsPerHost,
			MaxConnWaitTimeout:  schema.MaxHTTPTimeout,
			MaxIdleConnDuration: idleConnTimeout,
			// One send per Do: what follows a failed call is callClient's
			// (a closed connection) or chime's (everything else) decision.
			MaxIdemponentCallAttempts: 1,
			RetryIf:                   func(*fasthttp.Request) bool { return false },
			// Bodies beyond the snippet are read up to drainLimit so the
			// connection can be reused; a bigger one ends the call's read with
			// ErrBodyTooLarge (status and headers are kept) and closes it.
			MaxResponseBodySize:    drainLimit,
			DisablePathNormalizing: true,
		}
	}
	return &callClient{pooled: client(), fresh: client(), conns: conns}
}

// freshSends bounds the sends on new connections after a call's
// connection ended before any byte of an answer. One is not enough: a
// server in graceful shutdown (Go's net/http, for one) closes without an
// answer a connection it accepted just before, once it reads the request
// on it, so during an endpoint's rolling restart the first new connection
// can meet the old process too; by the second, that process has stopped
// accepting.
const freshSends = 2

// do sends req by deadline. A call whose connection ended before any byte
// of an answer is sent again on a new connection (resent), up to
// freshSends times; what the last send gets is the result: a failure that
// is not a connection closed unanswered is the endpoint's own.
func (c *callClient) do(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) (resent bool, err error) {
	err = c.pooled.DoDeadline(req, resp, deadline)
	// Connection: close keeps fresh's pool empty: every send through it
	// dials.
	for range freshSends {
		if err == nil || !unanswered(err) || c.cut.Load() {
			return resent, err
		}
		req.SetConnectionClose()
		resp.Reset()
		resent = true
		err = c.fresh.DoDeadline(req, resp, deadline)
	}
	return resent, err
}

// unanswered reports whether a call failed before any byte of an answer
// came back: the connection was found closed on reading the first byte
// (fasthttp reports every error there as ErrConnectionClosed), or writing
// the request failed.
func unanswered(err error) bool {
	var op *net.OpError
	return errors.Is(err, fasthttp.ErrConnectionClosed) || errors.As(err, &op) && op.Op == "write"
}

// cutAll closes every connection, so calls in flight end at once
// (shutdown after RevokeWait).
func (c *callClient) cutAll() {
	c.cut.Store(true)
	c.conns.closeAll()
}

// connSet tracks the open connections.
type connSet struct {
	mu sync.Mutex
	m  map[*trackedConn]struct{}
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (s *connSet) add(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, set: s}
	s.mu.Lock()
	s.m[tc] = struct{}{}
	s.mu.Unlock()
	return tc
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.m, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	cs := make([]*trackedConn, 0, len(s.m))
	for c := range s.m {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// timeoutOf is the job's timeout, else the default. Jobs are validated
// against schema.MaxHTTPTimeout; the cap holds for a row written when the
// limit was higher.
func (d *Dispatcher) timeoutOf(cb *chimev1.HttpCallback) time.Duration {
	t := d.cfg.DefaultTimeout
	if v := cb.GetTimeout().AsDuration(); v > 0 {
		t = v
	}
	return min(t, schema.MaxHTTPTimeout)
}

// call makes the HTTP call of due, whose callback URL parses as u. It
// never retries: what happens next is decided from the result. (A call whose connection closed before any
// byte of an answer is sent again by callClient.do: both sends are one
// attempt, and the second one's result is the outcome.)
func (d *Dispatcher) call(due *chimev1.Due, ns *chimev1.NamespaceConfig, u callURL, consumed time.Time) callResult {
	cb := due.GetCallback()
	method := cb.GetMethod()
	if method == "" {
		method = http.MethodPost
	}
	r := callResult{url: cb.GetUrl(), method: method, started: d.cfg.Now()}
	refuse := func(kind, msg string) callResult {
		r.class, r.errKind, r.err = chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, kind, msg
		return r
	}
	switch {
	case cb == nil || cb.GetUrl() == "":
		return refuse(kindBadRequest, "due event has no callback URL")
	case u.err != nil:
		return refuse(kindBadRequest, "callback URL does not parse: "+u.err.Error())
	case u.scheme != "http" && u.scheme != "https":
		return refuse(kindBadRequest, "callback URL scheme "+strconv.Quote(u.scheme)+" is not http or https")
	case u.host == "":
		return refuse(kindBadRequest, "callback URL has no host")
	case !hostAllowed(ns.GetAllowedHosts(), u.host):
		return refuse(kindHostNotAllowed, "host "+strconv.Quote(u.host)+" is not in the namespace's allowed_hosts "+strings.Join(ns.GetAllowedHosts(), ", "))
	}
	sg, err := newSigner(schema.SigningSecretsAt(ns, d.cfg.Now()))
	if err != nil {
		return refuse(kindSigning, err.Error())
	}

	timeout := d.timeoutOf(cb)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(cb.GetUrl())
	req.Header.SetMethod(method)
	body := cb.GetBody()
	req.SetBodyRaw(body)
	h := &req.Header
	ownType := false
	for k, v := range cb.GetHeaders() {
		if strings.EqualFold(k, "Host") {
			req.UseHostHeader = true
			h.SetHost(v)
			continue
		}
		ownType = ownType || strings.EqualFold(k, "Content-Type")
		h.Set(k, v)
	}
	if cb.GetJsonBody() && !ownType {
		h.SetContentType("application/json")
	}
	// After the job's own: chime's headers win.
	setOwn(h, keyIdempotencyKey, due.GetIdempotencyKey())
	setOwn(h, keyJobID, due.GetJobId())
	setOwn(h, keyNamespace, due.GetNamespace())
	// Formatted into one buffer, which SetCanonical copies: one allocation
	// per call (the buffer escapes) instead of a string per timestamp.
	var buf [2 * len(time.RFC3339Nano)]byte
	h.SetCanonical(keyAttempt, strconv.AppendUint(buf[:0], uint64(max(due.GetAttempt(), 1)), 10))
	h.SetCanonical(keyScheduledAt, due.GetScheduledAt().AsTime().UTC().AppendFormat(buf[:0], time.RFC3339Nano))
	h.SetCanonical(keyDeadline, r.started.Add(timeout).UTC().AppendFormat(buf[:0], time.RFC3339Nano))
	if sg != nil {
		for k, v := range sg.headers(due.GetIdempotencyKey(), r.started, body) {
			h.Set(k, v)
		}
	}

	sent := time.Now()
	if d.cfg.OnDispatch != nil {
		d.cfg.OnDispatch(consumed, sent)
	}
	resent, err := d.client.do(req, resp, sent.Add(timeout))
	r.latency = time.Since(sent)
	if resent {
		d.stats.resent.Add(1)
	}
	if err != nil && !(errors.Is(err, fasthttp.ErrBodyTooLarge) && resp.StatusCode() > 0) {
		if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
			r.class, r.errKind = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, kindTimeout
		} else {
			r.class, r.errKind = classifyError(err)
		}
		r.err = err.Error()
		return r
	}
	// A body over drainLimit was not read; the answer counts all the same.
	if b := resp.Body(); len(b) > 0 {
		r.body = bytes.Clone(b[:min(len(b), d.cfg.BodySnippet)])
	}
	r.status = resp.StatusCode()
	r.retryAfter = string(resp.Header.Peek("Retry-After"))
	r.class = classifyStatus(r.status)
	return r
}
