package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/analytics/sink"
	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/infra/credential"
	"github.com/chime-sched/chime/internal/lifecycle"
)

// roleSink runs the analytics sink: outcomes, breaker transitions, job
// events and dead letters into ClickHouse (CHIME_CLICKHOUSE_DSN, or a local
// server, started before the sink and stopped after it).
func roleSink(e *env, g *lifecycle.Group) error {
	server, local := analyticsServer(e, false)
	if local != nil {
		g.Add(local)
	}
	g.Add(newSinkPart(e, false, server, nil))
	return nil
}

// analyticsServer says where the sink finds ClickHouse: at
// CHIME_CLICKHOUSE_DSN, or else at the local server that local starts (nil
// with a DSN), a part for a stage before the sink's.
func analyticsServer(e *env, dev bool) (server *analyticsSource, local lifecycle.Part) {
	server = newAnalyticsSource()
	if e.cfg.ClickHouseDSN != "" {
		server.set(e.cfg.ClickHouseDSN, nil)
		return server, nil
	}
	return server, newLocalClickHouse(e, dev, server)
}

// newLocalClickHouse is the local ClickHouse server (infra/clickhouse) as
// a supervised part (e.degradable): ready once the server answers, it tells
// server its DSN, or why there is none, and stops it when stopped. A server
// that exits (killed, crashed) is started again, on the same port, so the
// DSN stays good. In `chime dev` (dev) a missing engine does not stop the
// other roles: the part stays down, and the sink, told why, says that
// analytics is off; in `chime sink` it stops the process.
func newLocalClickHouse(e *env, dev bool, server *analyticsSource) lifecycle.Part {
	port := 0 // picked at the first start, kept after
	return e.degradable("local ClickHouse", !dev, func(prometheus.Registerer) (lifecycle.Part, error) {
		return lifecycle.Func("local ClickHouse", func(ctx context.Context, ready func()) error {
			log := e.log.With("component", "clickhouse")
			local, err := startLocalClickHouse(ctx, e, log, port)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, clickhouse.ErrNotInstalled) {
					server.set("", err)
					return lifecycle.Permanent(err)
				}
				return err
			}
			port = local.HTTPPort()
			server.set(local.DSN("chime"), nil)
			ready()
			select {
			case <-ctx.Done():
				if err := local.Stop(); err != nil {
					log.Error("stopping local ClickHouse", "err", err)
				}
				return nil
			case <-local.Exited():
				_ = local.Kill() // releases its data dir
				return fmt.Errorf("local ClickHouse exited: %v", local.ExitErr())
			}
		}), nil
	})
}

// startLocalClickHouse starts the local server on the state dir, with the
// credential kept there, and says how other processes can share it.
func startLocalClickHouse(ctx context.Context, e *env, log *slog.Logger, port int) (*clickhouse.Server, error) {
	tools, err := findClickHouse()
	if err != nil {
		return nil, err
	}
	// Kept in the state dir, not generated per start, so that other
	// processes sharing this server can be given it.
	credPath := e.cfg.ClickHouseCredentialPath()
	cred, err := credential.LoadOrCreate(credPath, clickhouse.DefaultUser)
	if err != nil {
		return nil, fmt.Errorf("local ClickHouse: %w", err)
	}
	local, err := clickhouse.Start(ctx, clickhouse.Options{
		Dir:      e.cfg.ClickHouseDataDir(),
		ToolsDir: tools,
		Log:      logWriter{log},
		User:     cred.User,
		Password: cred.Password,
		HTTPPort: port,
	})
	if err != nil {
		return nil, fmt.Errorf("local ClickHouse: %w", err)
	}
	shared := (&url.URL{Scheme: "http", User: url.User(cred.User), Host: local.Addr(), Path: "/chime"}).String()
	log.Info("local ClickHouse started", "http", local.HTTPURL(), "data_dir", local.Dir(),
		"hint", "other chime processes can share it with CHIME_CLICKHOUSE_DSN="+shared+" and CHIME_CLICKHOUSE_PASSWORD from "+credPath)
	return local, nil
}

// newSinkPart is the sink as a supervised part of the role's group
// (e.degradable): each incarnation opens the analytics store on the
// ClickHouse server names (CHIME_CLICKHOUSE_DSN, or the local server's),
// retrying while it is unavailable, then runs the sink (analytics/sink)
// until stopped, and closes the store after it. It is ready while the sink
// consumes and ClickHouse answers. A sink that fails (ClickHouse answering
// with an error, say) is started again after a back-off, and goes on from
// its group's committed offsets. In `chime dev` (dev) analytics is not
// allowed to stop the other roles: no server at all leaves the sink down,
// with a warning, while the rest of chime runs and the sink's records wait
// in Kafka. opened, if not nil, is told the DSN of the store the first time
// one opens, or why there is none.
func newSinkPart(e *env, dev bool, server *analyticsSource, opened func(dsn string, err error)) lifecycle.Part {
	if opened == nil {
		opened = func(string, error) {}
	}
	return e.degradable("analytics sink", !dev, func(reg prometheus.Registerer) (lifecycle.Part, error) {
		return &sinkRun{e: e, server: server, opened: opened, reg: reg}, nil
	})
}

// sinkRun is one incarnation of the sink part: it opens the store, then runs
// a sink on it. It is ready while its sink is.
type sinkRun struct {
	lifecycle.Base
	e      *env
	server *analyticsSource
	opened func(dsn string, err error)
	reg    prometheus.Registerer
	sink   atomic.Pointer[sink.Sink]
}

func (r *sinkRun) Name() string                    { return "analytics sink" }
func (r *sinkRun) Start(ctx context.Context) error { return r.Go(ctx, r.run) }

// Ready implements lifecycle.Part: the sink's own readiness (it is not
// ready while ClickHouse is unavailable).
func (r *sinkRun) Ready() error {
	if err := r.Base.Ready(); err != nil {
		return err
	}
	return r.sink.Load().Ready() // ready only once the sink was
}

func (r *sinkRun) run(ctx context.Context, ready func()) error {
	e := r.e
	log := e.log.With("component", "sink")
	dsn, err := r.server.wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.opened("", err)
		return lifecycle.Permanent(fmt.Errorf("analytics disabled: %w (set CHIME_CLICKHOUSE_DSN or run `make clickhouse`)", err))
	}
	store, err := openStore(ctx, e, e.log.With("component", "clickhouse"), dsn)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer store.Close()
	r.opened(dsn, nil)
	s, err := sink.New(sink.Config{
		Brokers:    e.brokers,
		Topics:     e.cfg.Topics(),
		ClientID:   e.cfg.ClientID,
		SASL:       e.sasl,
		Membership: e.membership,
		Store:      store,
		Logger:     log,
		Registerer: r.reg,
	})
	if err != nil {
		return lifecycle.Permanent(err)
	}
	r.sink.Store(s)
	// The sink needs the store this part opened, so it is started here,
	// and stopped before the store closes.
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer s.Stop()
	if lifecycle.Wait(ctx, s) == nil {
		ready()
	}
	<-s.Stopped()
	return s.Err()
}

// openStore opens the store at dsn, retrying while the server is
// unavailable, until ctx ends.
func openStore(ctx context.Context, e *env, log *slog.Logger, dsn string) (*analytics.Store, error) {
	opts := analytics.Options{Retention: time.Duration(e.cfg.AnalyticsRetentionDays) * 24 * time.Hour}
	wait := time.Second
	for {
		store, err := analytics.Open(ctx, dsn, opts)
		if err == nil {
			return store, nil
		}
		if !errors.Is(err, analytics.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		log.Warn("ClickHouse unavailable; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// findClickHouse looks for the local engine in .tools beside the working
// dir or the chime binary (bin/chime) or their parents.
func findClickHouse() (string, error) {
	tools, err := clickhouse.FindTools(".")
	if err == nil {
		return tools, nil
	}
	if exe, xerr := os.Executable(); xerr == nil {
		if t, xerr := clickhouse.FindTools(filepath.Dir(exe)); xerr == nil {
			return t, nil
		}
	}
	return "", err
}

// logWriter sends the local server's output lines to the log at debug
// level: it is chatty, and its errors reach chime as query errors.
type logWriter struct {
	log interface{ Debug(string, ...any) }
}

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Debug(string(p))
	return len(p), nil
}
