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
// server).
func roleSink(ctx context.Context, e *env) error {
	return e.group().Add(newSinkPart(e, false, nil)).Run(ctx)
}

// newSinkPart is the sink as a part of the role's group: it connects to
// ClickHouse (first starting the local server when no DSN is configured),
// then runs the sink (analytics/sink) until stopped, and closes the store
// and stops the local server after it. It is ready once the sink consumes.
// In `chime dev` (dev) analytics is not allowed to stop the other roles: a
// missing engine is a warning and a server that cannot be reached is
// retried, while the rest of chime runs and the sink's records wait in
// Kafka. opened, if not nil, is told once the DSN of the store (in dev,
// that of the local server it started) or why there is none.
func newSinkPart(e *env, dev bool, opened func(dsn string, err error)) lifecycle.Part {
	if opened == nil {
		opened = func(string, error) {}
	}
	return lifecycle.Func("analytics sink", func(ctx context.Context, ready func()) error {
		log := e.log.With("component", "sink")
		store, dsn, stop, err := openAnalytics(ctx, e)
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
		defer stop()
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

// openAnalytics opens the analytics store, first starting the local
// ClickHouse when no DSN is configured. While the server is unavailable it
// retries until ctx ends. It returns the DSN it opened; stop closes the
// store and stops a local server.
func openAnalytics(ctx context.Context, e *env) (*analytics.Store, string, func(), error) {
	log := e.log.With("component", "clickhouse")
	dsn := e.cfg.ClickHouseDSN
	var local *clickhouse.Server
	if dsn == "" {
		tools, err := findClickHouse()
		if err != nil {
			return nil, "", nil, err
		}
		// Kept in the state dir, not generated per start, so that other
		// processes sharing this server can be given it.
		credPath := e.cfg.ClickHouseCredentialPath()
		cred, err := credential.LoadOrCreate(credPath, clickhouse.DefaultUser)
		if err != nil {
			return nil, "", nil, fmt.Errorf("local ClickHouse: %w", err)
		}
		local, err = clickhouse.Start(ctx, clickhouse.Options{
			Dir:      e.cfg.ClickHouseDataDir(),
			ToolsDir: tools,
			Log:      logWriter{log},
			User:     cred.User,
			Password: cred.Password,
		})
		if err != nil {
			return nil, "", nil, fmt.Errorf("local ClickHouse: %w", err)
		}
		dsn = local.DSN("chime")
		shared := (&url.URL{Scheme: "http", User: url.User(cred.User), Host: local.Addr(), Path: "/chime"}).String()
		log.Info("local ClickHouse started", "http", local.HTTPURL(), "data_dir", local.Dir(),
			"hint", "other chime processes can share it with CHIME_CLICKHOUSE_DSN="+shared+" and CHIME_CLICKHOUSE_PASSWORD from "+credPath)
	}
	stopLocal := func() {
		if local != nil {
			if err := local.Stop(); err != nil {
				log.Error("stopping local ClickHouse", "err", err)
			}
		}
	}
	store, err := openStore(ctx, e, log, dsn)
	if err != nil {
		stopLocal()
		return nil, "", nil, err
	}
	return store, dsn, func() { store.Close(); stopLocal() }, nil
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
