package main

import (
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors/breaker"
)

// roleBreaker runs the breaker processor and, beside it, the small
// namespace-config processor whose table the breaker reads its thresholds
// from (through a view, started first).
func roleBreaker(e *env, g *lifecycle.Group) error {
	rm, err := newReadModels(e, false)
	if err != nil {
		return err
	}
	brk, err := newBreaker(e, rm)
	if err != nil {
		return err
	}
	nsp, err := newNamespaces(e)
	if err != nil {
		return err
	}
	g.Add(rm.parts()...).Add(nsp, brk).OnReady(func() { e.log.Info("breaker ready") }, nsp, brk)
	return nil
}

// newBreaker builds the breaker processor, reading thresholds from rm.
func newBreaker(e *env, rm *readModels) (*breaker.Processor, error) {
	return breaker.New(breaker.Config{
		Config:     e.processorConfig("breaker", e.replicationOf(e.cfg.Topics().BreakerTable())),
		Namespaces: rm.namespaces,
	})
}
