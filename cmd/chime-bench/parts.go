package main

import (
	"context"
	"slices"
	"time"

	"github.com/chime-sched/chime/internal/lifecycle"
)

// startParts starts parts (lifecycle.Part) one after another, each once
// the ones before it are ready, and fails the bench when one is not ready
// within a minute. stop stops them in reverse; the bench calls it before
// it reports.
func startParts(ctx context.Context, parts ...lifecycle.Part) (stop func()) {
	stop = func() {
		for _, p := range slices.Backward(parts) {
			p.Stop()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, p := range parts {
		if err := p.Start(ctx); err != nil {
			stop()
			fail("%s: %v", p.Name(), err)
		}
		if err := lifecycle.Wait(wctx, p); err != nil {
			stop()
			fail("%v", err)
		}
	}
	return stop
}
