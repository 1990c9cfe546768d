package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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

// drainLimit is how much of a response body beyond the snippet is read so
// the connection can be reused; a bigger body closes the connection.
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

// newHTTPClient is the default client: keep-alive connections, a dialer
// guarded against SSRF, no proxy (a proxy would be the dialled address and
// bypass the guard), no redirects (a redirect is the endpoint's answer; it
// is reported, not followed).
func newHTTPClient(g *Guard, maxInFlight int) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxInFlight,
		MaxIdleConnsPerHost:   maxInFlight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, tr
}

// roundTrip sends req. The default client never follows redirects, so
// its transport is called directly: http.Client.Do would copy the headers
// of every request for redirect handling.
func (d *Dispatcher) roundTrip(req *http.Request) (*http.Response, error) {
	if d.transport != nil {
		return d.transport.RoundTrip(req)
	}
	return d.client.Do(req)
}

// timeoutOf is the job's timeout, else the default, capped by the maximum.
func (d *Dispatcher) timeoutOf(cb *chimev1.HttpCallback) time.Duration {
	t := d.cfg.DefaultTimeout
	if v := cb.GetTimeout().AsDuration(); v > 0 {
		t = v
	}
	return min(t, d.cfg.MaxTimeout)
}

// call makes the HTTP call of due. It never retries: what happens next is
// decided from the result.
func (d *Dispatcher) call(ctx context.Context, due *chimev1.Due, ns *chimev1.NamespaceConfig, consumed time.Time) callResult {
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
	u, err := url.Parse(cb.GetUrl())
	switch {
	case cb == nil || cb.GetUrl() == "":
		return refuse(kindBadRequest, "due event has no callback URL")
	case err != nil:
		return refuse(kindBadRequest, "callback URL does not parse: "+err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return refuse(kindBadRequest, "callback URL scheme "+strconv.Quote(u.Scheme)+" is not http or https")
	case u.Hostname() == "":
		return refuse(kindBadRequest, "callback URL has no host")
	case !hostAllowed(ns.GetAllowedHosts(), u.Hostname()):
		return refuse(kindHostNotAllowed, "host "+strconv.Quote(u.Hostname())+" is not in the namespace's allowed_hosts "+strings.Join(ns.GetAllowedHosts(), ", "))
	}
	var sg *signer
	if secret := ns.GetSigningSecret(); secret != "" {
		if sg, err = newSigner(secret); err != nil {
			return refuse(kindSigning, err.Error())
		}
	}

	timeout := d.timeoutOf(cb)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := cb.GetBody()
	req, err := http.NewRequestWithContext(cctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return refuse(kindBadRequest, "cannot build request: "+err.Error())
	}
	for k, v := range cb.GetHeaders() {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// The names are canonical already: assign, skip canonicalising.
	h := req.Header
	h[HeaderIdempotencyKey] = []string{due.GetIdempotencyKey()}
	h[HeaderJobID] = []string{due.GetJobId()}
	h[HeaderNamespace] = []string{due.GetNamespace()}
	h[HeaderAttempt] = []string{strconv.FormatUint(uint64(max(due.GetAttempt(), 1)), 10)}
	h[HeaderScheduledAt] = []string{due.GetScheduledAt().AsTime().UTC().Format(time.RFC3339Nano)}
	h[HeaderDeadline] = []string{r.started.Add(timeout).UTC().Format(time.RFC3339Nano)}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{"chime-dispatcher"}
	}
	if sg != nil {
		for k, v := range sg.headers(due.GetIdempotencyKey(), r.started, body) {
			h.Set(k, v)
		}
	}

	sent := time.Now()
	if d.cfg.OnDispatch != nil {
		d.cfg.OnDispatch(consumed, sent)
	}
	resp, err := d.roundTrip(req)
	if err != nil {
		r.latency = time.Since(sent)
		if errors.Is(err, context.DeadlineExceeded) || cctx.Err() == context.DeadlineExceeded {
			r.class, r.errKind = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, kindTimeout
		} else {
			r.class, r.errKind = classifyError(err)
		}
		r.err = err.Error()
		return r
	}
	snippet := make([]byte, d.cfg.BodySnippet)
	n, _ := io.ReadFull(resp.Body, snippet)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()
	r.latency = time.Since(sent)
	r.status = resp.StatusCode
	r.body = snippet[:n]
	r.retryAfter = resp.Header.Get("Retry-After")
	r.class = classifyStatus(resp.StatusCode)
	return r
}
