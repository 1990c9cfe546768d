package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

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
// a part: ready once the server answers, it tells server its DSN, or why
// there is none, and stops it when stopped. In `chime dev` (dev) a missing
// engine or a server that does not start does not stop the other roles:
// the part is ready all the same, and the sink, told why, warns that
// analytics is off.
func newLocalClickHouse(e *env, dev bool, server *analyticsSource) lifecycle.Part {
	return lifecycle.Func("local ClickHouse", func(ctx context.Context, ready func()) error {
		log := e.log.With("component", "clickhouse")
		local, err := startLocalClickHouse(ctx, e, log)
		if err != nil {
			server.set("", err)
			if ctx.Err() != nil {
				return nil
			}
			if !dev {
				return err
			}
			ready() // as ready as it will be: the rest of chime runs
			<-ctx.Done()
			return nil
		}
		server.set(local.DSN("chime"), nil)
		ready()
		<-ctx.Done()
		if err := local.Stop(); err != nil {
			log.Error("stopping local ClickHouse", "err", err)
		}
		return nil
	})
}

// startLocalClickHouse starts the local server on the state dir, with the
// credential kept there, and says how other processes can share it.
func startLocalClickHouse(ctx context.Context, e *env, log *slog.Logger) (*clickhouse.Server, error) {
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
	})
	if err != nil {
		return nil, fmt.Errorf("local ClickHouse: %w", err)
	}
	shared := (&url.URL{Scheme: "http", User: url.User(cred.User), Host: local.Addr(), Path: "/chime"}).String()
	log.Info("local ClickHouse started", "http", local.HTTPURL(), "data_dir", local.Dir(),
		"hint", "other chime processes can share it with CHIME_CLICKHOUSE_DSN="+shared+" and CHIME_CLICKHOUSE_PASSWORD from "+credPath)
	return local, nil
}

// newSinkPart is the sink as a part of the role's group: it opens the
// analytics store on the ClickHouse server names (CHIME_CLICKHOUSE_DSN, or
// the local server's, whose part is ready before this one starts), then
// runs the sink (analytics/sink) until stopped, and closes the store after
// it. It is ready once the sink consumes. In `chime dev` (dev) analytics is
// not allowed to stop the other roles: no server is a warning and a server
// that cannot be reached is retried, while the rest of chime runs and the
// sink's records wait in Kafka. opened, if not nil, is told once the DSN
// of the store, or why there is none.
func newSinkPart(e *env, dev bool, server *analyticsSource, opened func(dsn string, err error)) lifecycle.Part {
	if opened == nil {
		opened = func(string, error) {}
	}
	return lifecycle.Func("analytics sink", func(ctx context.Context, ready func()) error {
		log := e.log.With("component", "sink")
		store, dsn, err := openAnalytics(ctx, e, server)
		if err != nil {
			opened("", err)
			if dev && ctx.Err() == nil {
				log.Warn("analytics disabled: "+err.Error(), "hint", "set CHIME_CLICKHOUSE_DSN or run `make clickhouse`")
				ready() // as ready as it will be: the rest of chime runs
				<-ctx.Done()
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer store.Close()
		opened(dsn, nil)
		s, err := sink.New(sink.Config{
			Brokers:    e.brokers,
			Topics:     e.cfg.Topics(),
			ClientID:   e.cfg.ClientID,
			SASL:       e.sasl,
			Membership: e.membership,
			Store:      store,
			Logger:     log,
			Registerer: e.registry,
		})
		if err != nil {
			return err
		}
		// The sink needs the store this part opened, so it is started
		// here, and stopped before the store closes.
		if err := s.Start(ctx); err != nil {
			return err
		}
		defer s.Stop()
		if lifecycle.Wait(ctx, s) == nil {
			ready()
		}
		<-s.Stopped()
		return s.Err()
	})
}

// openAnalytics opens the analytics store on the server server names,
// retrying while it is unavailable, until ctx ends. It returns the DSN it
// opened.
func openAnalytics(ctx context.Context, e *env, server *analyticsSource) (*analytics.Store, string, error) {
	dsn, err := server.wait(ctx)
	if err != nil {
		return nil, "", err
	}
	store, err := openStore(ctx, e, e.log.With("component", "clickhouse"), dsn)
	if err != nil {
		return nil, "", err
	}
	return store, dsn, nil
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
