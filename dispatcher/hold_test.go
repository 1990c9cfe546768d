package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldLog records what the holder did with each due, in order.
type heldLog struct {
	mu     sync.Mutex
	events []string
}

func (l *heldLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *heldLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *heldLog) hold(h *holder, at time.Time, name string) {
	h.add(at, emission{key: name}, heldFuncs{func() {
		if time.Now().Before(at) {
			l.add("early " + name)
			return
		}
		l.add("start " + name)
	}, func() { l.add("recalled " + name) }, func() { l.add("drop " + name) }})
}

// heldFuncs is a heldRun of three functions.
type heldFuncs struct{ onStart, onRecalled, onDrop func() }

func (f heldFuncs) start()    { f.onStart() }
func (f heldFuncs) recalled() { f.onRecalled() }
func (f heldFuncs) drop()     { f.onDrop() }

// The holder starts each due at its time, never before, in time order and
// in arrival order within an instant; an earlier due added later goes
// first; a recall takes its due out at once; closing drops the rest.
func TestHolderStartsDuesAtTheirTime(t *testing.T) {
	t.Parallel()
	h := newHolder(context.Background())
	var log heldLog
	base := time.Now().Add(150 * time.Millisecond)
	log.hold(h, base.Add(100*time.Millisecond), "c")
	log.hold(h, base, "a1")
	log.hold(h, base, "a2")
	log.hold(h, base.Add(50*time.Millisecond), "recalled")
	log.hold(h, base.Add(time.Hour), "later")
	log.hold(h, base.Add(-100*time.Millisecond), "first") // earlier than all, added last
	require.Equal(t, 6, h.held())
	h.recall(emission{key: "recalled"})
	require.Equal(t, []string{"recalled recalled"}, log.get(), "taken out at once")

	deadline := time.Now().Add(10 * time.Second)
	for len(log.get()) < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, []string{"recalled recalled", "start first", "start a1", "start a2", "start c"}, log.get())
	require.Equal(t, 1, h.held())
	h.close()
	require.Equal(t, "drop later", log.get()[5], "closing drops what is held")
	require.Zero(t, h.held())
	log.hold(h, time.Now(), "after")
	require.Equal(t, "drop after", log.get()[6], "a closed holder drops what it is given")
}

// Cutting the calls (the context) drops every held due.
func TestHolderDropsWhenTheCallsAreCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	h := newHolder(ctx)
	defer h.close()
	var log heldLog
	log.hold(h, time.Now().Add(time.Hour), "x")
	log.hold(h, time.Now().Add(time.Hour), "y")
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for len(log.get()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.ElementsMatch(t, []string{"drop x", "drop y"}, log.get())
}
