package jobquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chime-sched/chime/internal/bodybudget"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

// The query server's routes. Every answer names the partitions it
// covered; every error is a problem (RFC 9457) of one of the problem*
// types.
const (
	pathRows = "/query/v1/rows" // POST {"keys": ["ns/id", ...]}
	pathJobs = "/query/v1/jobs" // GET ?ns=&limit=&cursor=&status=&internal=&after=
	pathLive = "/query/v1/live" // GET ?ns=&after=
	pathPing = "/query/v1/ping" // GET: 204, once the signature is checked (SecretProbe)
)

// Problem types of the query server.
const (
	problemBase         = "https://chime.dev/problems/query/"
	problemNotOwner     = problemBase + "not-owner"    // 421: a key's partition is not served here
	problemRecovering   = problemBase + "recovering"   // 503: the served partitions kept changing; Retry-After
	problemBehind       = problemBase + "behind"       // 503: after not reached within ReadWait; Retry-After
	problemUnauthorized = problemBase + "unauthorized" // 401: signature missing or wrong
	problemInvalid      = problemBase + "invalid"      // 400; 408, 413 for a body
	problemBusy         = problemBase + "busy"         // 503: over the body budget; Retry-After
)

// Limits of one query.
const (
	// MaxKeys is the most rows one request asks for (a jobs:batch's size).
	MaxKeys = 1000
	// MaxPage is the largest listing page.
	MaxPage = 1000
	// maxBody bounds a request body: MaxKeys of the longest keys.
	maxBody = 1 << 20
)

// retryAfter is what an instance that cannot answer now asks callers to
// wait.
const retryAfter = time.Second

// rowsRequest is the body of POST /query/v1/rows.
type rowsRequest struct {
	Keys []string `json:"keys"`
}

// rowsAnswer: Rows[i] is the protobuf JobState of Keys[i], null if none;
// Reached is how far each partition read had applied the job commands
// before the read (local.rows). An owner that does not send it (an older
// version) leaves read-your-writes to its TTL.
type rowsAnswer struct {
	Partitions []int32  `json:"partitions"`
	Rows       [][]byte `json:"rows"`
	Reached    Offsets  `json:"reached,omitempty"`
}

type jobsAnswer struct {
	Partitions []int32     `json:"partitions"`
	Jobs       []jobAnswer `json:"jobs"`
	More       bool        `json:"more"`
}

type jobAnswer struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Status  int32  `json:"status"`
	Row     []byte `json:"row"` // protobuf JobState; null if removed since listed
}

type liveAnswer struct {
	Partitions []int32 `json:"partitions"`
	Live       int64   `json:"live"`
}

// problemAnswer is an error; Partitions are the partitions the instance
// serves, on a not-owner answer.
type problemAnswer struct {
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Status     int     `json:"status"`
	Detail     string  `json:"detail"`
	Partitions []int32 `json:"partitions,omitempty"`
}

// ServerConfig is what NewServer needs.
type ServerConfig struct {
	// Source is the scheduler instance whose rows are served.
	Source Source
	// Partitions of the scheduler's topics (CHIME_PARTITIONS).
	Partitions int32
	// Secret signs the requests (at least signature.MinSecretLen characters).
	Secret string
	// Now is the clock requests' times are checked against; default
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger // default slog.Default()
	// Bodies is the process's budget of request body bytes held at once
	// (shared with the API in chime dev); nil: one of bodybudget.Default
	// bytes of the server's own.
	Bodies *bodybudget.Budget
}

// Server answers API processes' reads of the rows its scheduler instance
// serves. It is an http.Handler.
type Server struct {
	local  local
	secret []byte
	now    func() time.Time
	log    *slog.Logger
	mux    *http.ServeMux
	bodies *bodybudget.Budget
}

// NewServer builds the query server of one scheduler instance.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Source == nil || cfg.Partitions <= 0 {
		return nil, errors.New("jobquery: ServerConfig needs Source and Partitions")
	}
	if len(cfg.Secret) < signature.MinSecretLen {
		return nil, fmt.Errorf("jobquery: the query secret has %d characters; it needs at least %d", len(cfg.Secret), signature.MinSecretLen)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Bodies == nil {
		cfg.Bodies, _ = bodybudget.New(bodybudget.Default) // a positive constant
	}
	s := &Server{local: local{src: cfg.Source, partitions: cfg.Partitions}, secret: []byte(cfg.Secret), now: cfg.Now, log: cfg.Logger, mux: http.NewServeMux(), bodies: cfg.Bodies}
	s.mux.HandleFunc("POST "+pathRows, s.rows)
	s.mux.HandleFunc("GET "+pathJobs, s.jobs)
	s.mux.HandleFunc("GET "+pathLive, s.live)
	s.mux.HandleFunc("GET "+pathPing, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return s, nil
}

// ServeHTTP authenticates the request on its headers, then reads its body
// within the body budget and checks it against the signature, then
// answers it. A request refused before its body is read closes its
// connection after the answer: the client cannot go on sending it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	digest, err := signature.Check(s.secret, s.now(), r.Header.Get(signature.Header), r.Method, r.RequestURI)
	if err != nil {
		refuseUnread(w, r, http.StatusUnauthorized, problemUnauthorized, "%v", err)
		return
	}
	if r.ContentLength != 0 {
		held, ok := s.bodies.Reserve(r.ContentLength, maxBody)
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
			refuseUnread(w, r, http.StatusServiceUnavailable, problemBusy, "the scheduler holds as many request bodies as it may at once (%d bytes, CHIME_BODY_BUDGET); retry shortly", s.bodies.Size())
			return
		}
		defer held.Release()
	}
	body, err := bodybudget.Read(r.Body, r.ContentLength, maxBody)
	switch {
	case errors.Is(err, bodybudget.ErrTooLarge):
		refuseUnread(w, r, http.StatusRequestEntityTooLarge, problemInvalid, "the body is over %d bytes", maxBody)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		refuseUnread(w, r, http.StatusRequestTimeout, problemInvalid, "the body did not arrive in time: %v", err)
		return
	case err != nil:
		refuseUnread(w, r, http.StatusBadRequest, problemInvalid, "the body could not be read: %v", err)
		return
	}
	if err := digest.Verify(body); err != nil {
		writeProblem(w, http.StatusUnauthorized, problemUnauthorized, "%v", err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mux.ServeHTTP(w, r)
}

// refuseUnread answers a problem to a request whose body is not read,
// closing the connection after it if there is one: net/http would
// otherwise read up to 256 KiB of it to keep the connection.
func refuseUnread(w http.ResponseWriter, r *http.Request, status int, typ, format string, args ...any) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeProblem(w, status, typ, format, args...)
}

func (s *Server) rows(w http.ResponseWriter, r *http.Request) {
	var req rowsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "the body is not {\"keys\": [...]}: %v", err)
		return
	}
	if len(req.Keys) == 0 || len(req.Keys) > MaxKeys {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "keys has %d keys; ask for 1 to %d", len(req.Keys), MaxKeys)
		return
	}
	for _, k := range req.Keys {
		if _, _, ok := schema.SplitJobKey(k); !ok {
			writeProblem(w, http.StatusBadRequest, problemInvalid, "key %q is not namespace/job_id", k)
			return
		}
	}
	rows, reached, served, err := s.local.rows(req.Keys)
	if err != nil {
		s.failed(w, err)
		return
	}
	out := rowsAnswer{Partitions: served, Rows: make([][]byte, len(rows)), Reached: reached}
	for i, row := range rows {
		if out.Rows[i], err = encodeRow(row); err != nil {
			s.failed(w, err)
			return
		}
	}
	writeJSON(w, out)
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	ns, q, err := parseListing(r)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "%v", err)
		return
	}
	after, err := parseOffsets(r.URL.Query().Get("after"), s.local.partitions)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "after: %v", err)
		return
	}
	jobs, more, served, err := s.local.list(r.Context(), ns, q, after)
	if err != nil {
		s.failed(w, err)
		return
	}
	out := jobsAnswer{Partitions: served, Jobs: make([]jobAnswer, len(jobs)), More: more}
	for i, j := range jobs {
		out.Jobs[i] = jobAnswer{ID: j.ID, Created: j.Created, Status: int32(j.Status)}
		if out.Jobs[i].Row, err = encodeRow(j.Row); err != nil {
			s.failed(w, err)
			return
		}
	}
	writeJSON(w, out)
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	ns := r.URL.Query().Get("ns")
	if ns == "" {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "ns is missing")
		return
	}
	after, err := parseOffsets(r.URL.Query().Get("after"), s.local.partitions)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, problemInvalid, "after: %v", err)
		return
	}
	n, served, err := s.local.live(r.Context(), ns, after)
	if err != nil {
		s.failed(w, err)
		return
	}
	writeJSON(w, liveAnswer{Partitions: served, Live: n})
}

// failed answers a read that could not be made: not served here (421,
// the caller asks the owner), recovering or behind (503 with Retry-After).
func (s *Server) failed(w http.ResponseWriter, err error) {
	var no *notOwnerError
	var behind *behindError
	switch {
	case errors.As(err, &no):
		writeAnswer(w, problemAnswer{Type: problemNotOwner, Status: http.StatusMisdirectedRequest, Detail: err.Error(), Partitions: no.served})
	case errors.As(err, &behind), errors.Is(err, errRecovering):
		typ := problemRecovering
		if behind != nil {
			typ = problemBehind
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
		writeProblem(w, http.StatusServiceUnavailable, typ, "%v; retry shortly", err)
	default:
		s.log.Error("jobquery: read failed", "err", err)
		writeProblem(w, http.StatusInternalServerError, problemBase+"internal", "%v", err)
	}
}

// parseListing reads a listing's query parameters.
func parseListing(r *http.Request) (string, jobindex.Query, error) {
	v := r.URL.Query()
	ns := v.Get("ns")
	if ns == "" {
		return "", jobindex.Query{}, errors.New("ns is missing")
	}
	var q jobindex.Query
	var err error
	if q.Limit, err = strconv.Atoi(v.Get("limit")); err != nil || q.Limit < 1 || q.Limit > MaxPage {
		return "", q, fmt.Errorf("limit %q is not a number from 1 to %d", v.Get("limit"), MaxPage)
	}
	if q.After, err = jobindex.ParseCursor(v.Get("cursor")); err != nil {
		return "", q, fmt.Errorf("cursor %q: %v", v.Get("cursor"), err)
	}
	if st := v.Get("status"); st != "" {
		for _, f := range strings.Split(st, ",") {
			n, err := strconv.ParseInt(f, 10, 32)
			if _, known := chimev1.JobStatus_name[int32(n)]; err != nil || !known {
				return "", q, fmt.Errorf("status %q is not a JobStatus number", f)
			}
			q.Statuses = append(q.Statuses, chimev1.JobStatus(n))
		}
	}
	for _, l := range v["label"] {
		label, err := schema.ParseLabel(l)
		if err != nil {
			return "", q, fmt.Errorf("label: %v", err)
		}
		q.Labels = append(q.Labels, label)
	}
	q.Internal = v.Get("internal") == "true"
	return ns, q, nil
}

// listingQuery is parseListing's inverse, for the router.
func listingQuery(ns string, q jobindex.Query) string {
	var b strings.Builder
	b.WriteString("ns=" + url.QueryEscape(ns) + "&limit=" + strconv.Itoa(q.Limit))
	if !q.After.IsZero() {
		b.WriteString("&cursor=" + url.QueryEscape(q.After.String()))
	}
	if len(q.Statuses) > 0 {
		s := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			s[i] = strconv.Itoa(int(st))
		}
		b.WriteString("&status=" + strings.Join(s, ","))
	}
	for _, l := range q.Labels {
		b.WriteString("&label=" + url.QueryEscape(l.String()))
	}
	if q.Internal {
		b.WriteString("&internal=true")
	}
	return b.String()
}

func encodeRow(row *chimev1.JobState) ([]byte, error) {
	if row == nil {
		return nil, nil
	}
	return schema.Marshal(row)
}

func decodeRow(raw []byte) (*chimev1.JobState, error) {
	if raw == nil {
		return nil, nil
	}
	row := new(chimev1.JobState)
	if err := schema.UnmarshalInternal(raw, row); err != nil {
		return nil, fmt.Errorf("a row does not decode: %w", err)
	}
	return row, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, typ, format string, args ...any) {
	writeAnswer(w, problemAnswer{Type: typ, Status: status, Detail: fmt.Sprintf(format, args...)})
}

// writeAnswer writes p as problem+json, titled after its status.
func writeAnswer(w http.ResponseWriter, p problemAnswer) {
	p.Title = http.StatusText(p.Status)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// The query server's bounds on a request, the same for every scheduler
// (docs/operations.md): its headers arrive within headerTimeout and hold
// at most maxHeaderBytes (net/http allows 4 KiB more), and the whole
// request, body included, arrives within readTimeout.
const (
	headerTimeout  = 5 * time.Second
	readTimeout    = 10 * time.Second
	maxHeaderBytes = 8 << 10
)

// Listen is the part (lifecycle.Part) that answers h's requests on ln,
// ready once it listens; stopped, it stops taking requests and waits (at
// most 5 s) for those in flight.
func Listen(h http.Handler, ln net.Listener) lifecycle.Part {
	return lifecycle.Func("scheduler query server", func(ctx context.Context, ready func()) error {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: headerTimeout,
			ReadTimeout:       readTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       2 * time.Minute,
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		ready() // ln is open: requests wait in its backlog until Serve takes them
		select {
		case err := <-errc:
			return fmt.Errorf("jobquery: %w", err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("jobquery: shutdown: %w", err)
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("jobquery: %w", err)
		}
		return nil
	})
}
