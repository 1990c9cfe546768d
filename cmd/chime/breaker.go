package main

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/chime-sched/chime/processors/breaker"
)

// roleBreaker runs the breaker processor and, beside it, the small
// namespace-config processor whose table the breaker reads its thresholds
// from.
func roleBreaker(ctx context.Context, e *env) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return roleNamespaces(ctx, e) })
	g.Go(func() error { return runBreaker(ctx, e, nil) })
	return g.Wait()
}

// runBreaker runs the breaker processor; rm, if set, is the process's
// shared namespace view (nil: the processor keeps its own).
func runBreaker(ctx context.Context, e *env, rm *readModels) error {
	cfg := breaker.Config{
		Brokers:     e.brokers,
		Topics:      e.cfg.Topics(),
		ClientID:    e.cfg.ClientID + "-breaker",
		Replication: e.replicationOf(e.cfg.Topics().BreakerTable()),
		Membership:  e.membership,
		Logger:      e.log.With("component", "breaker"),
		Registerer:  e.registry,
	}
	if rm != nil {
		cfg.Namespaces = rm.namespaces
	}
	p, err := breaker.New(cfg)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}
