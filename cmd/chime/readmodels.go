package main

import (
	"context"

	"github.com/chime-sched/chime/views"
)

// readModels are the views of the namespace and breaker tables that every
// role of a process reads. chime dev keeps one set for all its roles (the
// scheduler, breaker, dispatcher and API each kept their own before, so
// every table was consumed four times in one process); a role run alone
// (nil readModels) keeps its own.
type readModels struct {
	namespaces *views.Namespaces
	breakers   *views.Breakers
}

// startReadModels runs both views until stop is called, and returns once
// they have caught up with their tables. stop ends them; call it after
// every role reading them has stopped.
func startReadModels(ctx context.Context, e *env) (*readModels, func(), error) {
	t := e.cfg.Topics()
	log := e.log.With("component", "views")
	ns, err := views.NewNamespaces(e.brokers, t, e.cfg.ClientID+"-namespaces", e.replicationOf(t.NamespaceTable()), log)
	if err != nil {
		return nil, nil, err
	}
	brk, err := views.NewBreakers(e.brokers, t, e.cfg.ClientID+"-breakers", e.replicationOf(t.BreakerTable()), log)
	if err != nil {
		return nil, nil, err
	}
	vctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- ns.Run(vctx) }()
	go func() { done <- brk.Run(vctx) }()
	stop := func() {
		cancel()
		<-done
		<-done
	}
	if err := ns.WaitReady(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	if err := brk.WaitReady(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return &readModels{namespaces: ns, breakers: brk}, stop, nil
}
