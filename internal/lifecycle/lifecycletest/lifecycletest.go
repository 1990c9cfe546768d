// Package lifecycletest starts lifecycle parts for a test.
package lifecycletest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chime-sched/chime/internal/lifecycle"
)

// ReadyWithin bounds how long Start waits for each part.
const ReadyWithin = 60 * time.Second

// Start starts parts one after another, each once the ones before it are
// ready (as a lifecycle.Group's stages), and fails the test when one is
// not ready within ReadyWithin. When the test ends they are stopped in
// reverse, and one that stopped with an error fails it. A test may stop
// a part itself before: a second Stop only waits.
func Start(t testing.TB, parts ...lifecycle.Part) {
	t.Helper()
	t.Cleanup(func() {
		for _, p := range slices.Backward(parts) {
			p.Stop()
			if err := p.Err(); err != nil {
				t.Errorf("%s stopped with an error: %v", p.Name(), err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), ReadyWithin)
	defer cancel()
	for _, p := range parts {
		if err := p.Start(context.Background()); err != nil {
			t.Fatalf("starting %s: %v", p.Name(), err)
		}
		if err := lifecycle.Wait(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}
