package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/infra/config"
)

// roleAPI runs the HTTP API against the configured brokers.
func roleAPI(ctx context.Context, e *env) error { return runAPI(ctx, e, false) }

// runAPI serves the API on --addr. It listens at once (GET /readyz says
// when the views have caught up); in dev, an unset admin token is taken
// from, or generated into, the state dir.
func runAPI(ctx context.Context, e *env, dev bool) error {
	log := e.log.With("component", "api")
	token := e.cfg.AdminToken
	if token == "" && dev {
		var err error
		if token, err = devAdminToken(e); err != nil {
			return err
		}
	}
	if token == "" {
		log.Warn("no admin token: namespaces and keys cannot be managed; set CHIME_ADMIN_TOKEN")
	}
	be, err := api.NewBackend(api.BackendConfig{
		Brokers:       e.brokers,
		Topics:        e.cfg.Topics(),
		ClientID:      e.cfg.ClientID + "-api",
		ReplicationOf: e.replicationOf,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	defer be.Close()
	cfg := be.Config()
	cfg.AdminToken = token
	cfg.Logger = log
	app, err := api.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", e.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api: listen on %s (--addr, CHIME_API_ADDR): %w", e.cfg.APIAddr, err)
	}
	log.Info("api listening", "addr", ln.Addr().String())
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return be.Run(ctx) })
	g.Go(func() error { return api.Serve(ctx, app, ln) })
	g.Go(func() error {
		if be.WaitReady(ctx) == nil {
			log.Info("api ready", "addr", ln.Addr().String())
		}
		return nil
	})
	return g.Wait()
}

// devAdminToken reads <state dir>/admin-token, creating it with a random
// token the first time and printing that token once.
func devAdminToken(e *env) (string, error) {
	path := filepath.Join(e.cfg.StateDir, "admin-token")
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
	if err := os.MkdirAll(e.cfg.StateDir, 0o755); err != nil {
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
