package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/internal/lifecycle"
)

// roleAPI runs the HTTP API against the configured brokers, reading
// analytics from CHIME_CLICKHOUSE_DSN when it is set.
func roleAPI(e *env, g *lifecycle.Group) error {
	var src *analyticsSource
	if e.cfg.ClickHouseDSN != "" {
		src = newAnalyticsSource()
		src.set(e.cfg.ClickHouseDSN, nil)
	}
	rm, err := newReadModels(e, true)
	if err != nil {
		return err
	}
	a, err := newAPI(e, false, src, rm, nil)
	if err != nil {
		return err
	}
	g.Add(a.clients).Add(append(rm.parts(), a.parts...)...)
	a.logReady(g)
	return nil
}

// apiRole is the HTTP API's parts, and what its readiness waits for.
type apiRole struct {
	log *slog.Logger
	// parts: the server, which listens at once, and the analytics
	// reader; the caller runs them with the read models.
	parts []lifecycle.Part
	// reads are the parts GET /readyz waits for: the views, and in
	// chime dev the scheduler whose partitions the API reads.
	reads  []lifecycle.Part
	listen lifecycle.Part
	addr   string
	// clients closes the backend's Kafka clients, flushing what the API
	// published (a Closer, which the role adds to its group before the
	// API).
	clients lifecycle.Part
}

// newAPI builds the API on --addr, reading the views of rm (and in chime
// dev, jobs from sr, its scheduler). It listens at once (GET /readyz says
// when what it reads is ready); in dev, an unset admin token is taken
// from, or generated into, the state dir. The analytics routes read the
// ClickHouse src names, once it does; nil src: they answer 503, not
// configured.
func newAPI(e *env, dev bool, src *analyticsSource, rm *readModels, sr *schedulerRole) (*apiRole, error) {
	log := e.log.With("component", "api")
	token := e.cfg.AdminToken
	if token == "" && dev {
		var err error
		if token, err = devAdminToken(e); err != nil {
			return nil, err
		}
	}
	if token == "" {
		log.Warn("no admin token: namespaces and keys cannot be managed; set CHIME_ADMIN_TOKEN")
	}
	secret, err := e.querySecret()
	if err != nil {
		return nil, err
	}
	bcfg := api.BackendConfig{
		Brokers:     e.brokers,
		Topics:      e.cfg.Topics(),
		ClientID:    e.cfg.ClientID + "-api",
		SASL:        e.sasl,
		Logger:      log,
		Partitions:  e.cfg.Partitions,
		QuerySecret: secret,
		Namespaces:  rm.namespaces,
		Breakers:    rm.breakers,
	}
	a := &apiRole{log: log, reads: rm.parts()}
	if sr != nil {
		bcfg.LocalJobs, bcfg.LocalQueryAddr = sr.s, sr.queryAddr
		a.reads = append(a.reads, sr.s)
	}
	be, err := api.NewBackend(bcfg)
	if err != nil {
		return nil, err
	}
	cfg := be.Config()
	cfg.Ready = func() error { return lifecycle.Ready(a.reads...) }
	cfg.AdminToken = token
	cfg.Logger = log
	cfg.Quotas = quota.Limits{RequestsPerSecond: e.cfg.QuotaRequests, JobsPerSecond: e.cfg.QuotaJobs, PendingJobs: e.cfg.QuotaPending, Namespaces: e.cfg.MaxNamespaces}
	// /metrics serves the whole process: in chime dev that includes the
	// scheduler, dispatcher and breaker.
	cfg.Registerer, cfg.Gatherer = e.registry, e.registry
	if src != nil {
		store := &analyticsHandle{}
		cfg.Analytics = store
		a.parts = append(a.parts, lifecycle.Func("api analytics reader", func(ctx context.Context, ready func()) error {
			defer store.close()
			ready() // the routes answer 503 until the store is open
			store.open(ctx, e, log, src)
			<-ctx.Done()
			return nil
		}))
	} else {
		log.Info("analytics routes (breaker history, stats, attempts, dead letters) answer 503: set CHIME_CLICKHOUSE_DSN to enable them")
	}
	app, err := api.New(cfg)
	if err != nil {
		be.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", e.cfg.APIAddr)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("api: listen on %s (--addr, CHIME_API_ADDR): %w", e.cfg.APIAddr, err)
	}
	a.addr = ln.Addr().String()
	log.Info("api listening", "addr", a.addr)
	a.listen = api.Listen(app, ln)
	a.parts = append([]lifecycle.Part{a.listen}, a.parts...)
	a.clients = lifecycle.Closer("api kafka clients", be.Close)
	return a, nil
}

// logReady has g log when the API is ready: it listens and what it reads
// is (operators and tests wait for the line).
func (a *apiRole) logReady(g *lifecycle.Group) {
	g.OnReady(func() { a.log.Info("api ready", "addr", a.addr) }, append(a.reads, a.listen)...)
}

// devAdminToken reads <state dir>/admin-token, creating it with a random
// token the first time and printing that token once.
func devAdminToken(e *env) (string, error) {
	path := filepath.Join(e.cfg.StateDir, config.AdminTokenFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(raw)); len(tok) >= config.MinAdminTokenLen {
			return tok, nil
		}
		return "", fmt.Errorf("%s holds no valid admin token (at least %d characters); delete it to have a new one generated", path, config.MinAdminTokenLen)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading the admin token: %w", err)
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never returns an error
	tok := hex.EncodeToString(b[:])
	if err := os.MkdirAll(e.cfg.StateDir, 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("saving the admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("saving the admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("saving the admin token: %w", err)
	}
	fmt.Fprintf(e.out, "chime dev: admin token (shown once, kept in %s):\n%s\n", path, tok)
	return tok, nil
}

// analyticsSource says where a ClickHouse is, once that is known, or why
// there is none. The sink reads the configured DSN or the local server's
// (its part sets it); the API, the configured DSN, or in `chime dev` the
// one the sink opened, once it has (and migrated it).
type analyticsSource struct {
	once sync.Once
	done chan struct{}
	dsn  string
	err  error
}

func newAnalyticsSource() *analyticsSource { return &analyticsSource{done: make(chan struct{})} }

// set is called once; later calls are ignored.
func (s *analyticsSource) set(dsn string, err error) {
	s.once.Do(func() {
		s.dsn, s.err = dsn, err
		close(s.done)
	})
}

func (s *analyticsSource) wait(ctx context.Context) (string, error) {
	select {
	case <-s.done:
		return s.dsn, s.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// analyticsHandle is the API's analytics store. The API listens at once;
// the store comes when ClickHouse answers. Until then, or when analytics
// is off, every query fails with analytics.ErrUnavailable (a 503).
type analyticsHandle struct {
	mu    sync.Mutex
	store *analytics.Store
	err   error
}

var _ api.AnalyticsStore = (*analyticsHandle)(nil)

// open waits for the source and connects, retrying while ClickHouse is
// unavailable, until ctx ends.
func (h *analyticsHandle) open(ctx context.Context, e *env, log *slog.Logger, src *analyticsSource) {
	dsn, err := src.wait(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.set(nil, fmt.Errorf("%w: analytics is disabled in this process (%v)", analytics.ErrUnavailable, err))
		}
		return
	}
	store, err := openStore(ctx, e, log, dsn)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("analytics routes disabled: cannot open ClickHouse", "err", err)
			if !errors.Is(err, analytics.ErrUnavailable) {
				err = fmt.Errorf("%w: %w", analytics.ErrUnavailable, err)
			}
			h.set(nil, err)
		}
		return
	}
	log.Info("analytics routes reading ClickHouse")
	h.set(store, nil)
}

func (h *analyticsHandle) set(store *analytics.Store, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.store, h.err = store, err
}

func (h *analyticsHandle) get() (*analytics.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.store != nil:
		return h.store, nil
	case h.err != nil:
		return nil, h.err
	}
	return nil, fmt.Errorf("%w: this API process has not connected to ClickHouse yet", analytics.ErrUnavailable)
}

func (h *analyticsHandle) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
	h.err = fmt.Errorf("%w: the API is shutting down", analytics.ErrUnavailable)
}

func (h *analyticsHandle) BreakerHistory(ctx context.Context, ns string, from, to time.Time) ([]analytics.Transition, error) {
	s, err := h.get()
	if err != nil {
		return nil, err
	}
	return s.BreakerHistory(ctx, ns, from, to)
}

func (h *analyticsHandle) Stats(ctx context.Context, ns string, from, to time.Time, step time.Duration) ([]analytics.Point, error) {
	s, err := h.get()
	if err != nil {
		return nil, err
	}
	return s.Stats(ctx, ns, from, to, step)
}

func (h *analyticsHandle) Attempts(ctx context.Context, ns, jobID string, q analytics.AttemptQuery) ([]analytics.Attempt, bool, error) {
	s, err := h.get()
	if err != nil {
		return nil, false, err
	}
	return s.Attempts(ctx, ns, jobID, q)
}

func (h *analyticsHandle) ListDeadLetters(ctx context.Context, ns string, q analytics.DeadLetterQuery) ([]analytics.DeadLetter, error) {
	s, err := h.get()
	if err != nil {
		return nil, err
	}
	return s.ListDeadLetters(ctx, ns, q)
}

func (h *analyticsHandle) GetDeadLetter(ctx context.Context, ns, id string) (*analytics.DeadLetter, error) {
	s, err := h.get()
	if err != nil {
		return nil, err
	}
	return s.GetDeadLetter(ctx, ns, id)
}

func (h *analyticsHandle) CountDeadLetters(ctx context.Context, ns string, q analytics.DeadLetterQuery) (int, error) {
	s, err := h.get()
	if err != nil {
		return 0, err
	}
	return s.CountDeadLetters(ctx, ns, q)
}

func (h *analyticsHandle) RecordReplays(ctx context.Context, ds []*analytics.DeadLetter) error {
	s, err := h.get()
	if err != nil {
		return err
	}
	return s.RecordReplays(ctx, ds)
}
