package producer

// A publish to an address where nothing listens: franz-go retries the
// dial until the record's context ends, so the caller learned only at its
// deadline that the outcome was unknown. Until the client has connected
// once, a dial refused by every seed broker means there is no cluster
// there (a wrong address, or a broker not running): the records waiting
// for it are failed at once with an *UnreachableError. They were never
// sent (nothing was connected to send them to), so they are not
// published. Once a connection was made, a refused dial is a broker
// restarting, and records wait for it as before.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// UnreachableError says that every seed broker refused a connection, and
// none was ever made: nothing listens at Addrs. A command that fails with
// it was not published.
type UnreachableError struct {
	Addrs []string
	// Err is the last dial's error.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("nothing listens at %s (%v)", strings.Join(e.Addrs, ", "), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// dials follows the client's dials to its seed brokers (a
// kgo.HookBrokerConnect). A round ends, its context canceled with an
// *UnreachableError, once every seed refused a dial in it while no dial
// ever succeeded; the next round starts then.
type dials struct {
	seeds     []string
	connected atomic.Bool

	mu      sync.Mutex
	refused map[int32]bool // seed node IDs (franz-go's are negative)
	round   context.Context
	end     context.CancelCauseFunc
}

func newDials(seeds []string) *dials {
	d := &dials{seeds: slices.Sorted(slices.Values(seeds))}
	d.newRound()
	return d
}

// newRound starts a round; d.mu is held or d not yet shared.
func (d *dials) newRound() {
	d.refused = map[int32]bool{}
	d.round, d.end = context.WithCancelCause(context.Background())
}

// refusal is err as an *UnreachableError when it is a refused dial and the
// client never connected; nil otherwise. A request that does not retry its
// dial (an admin request) fails with the dial's error itself.
func (d *dials) refusal(err error) *UnreachableError {
	if d.connected.Load() || !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return &UnreachableError{Addrs: d.seeds, Err: err}
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (d *dials) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		d.connected.Store(true)
		return
	}
	if meta.NodeID >= 0 || !errors.Is(err, syscall.ECONNREFUSED) || d.connected.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refused[meta.NodeID] = true
	if len(d.refused) < len(d.seeds) {
		return
	}
	d.end(&UnreachableError{Addrs: d.seeds, Err: err})
	d.newRound()
}

// bind returns the context to produce a record with: ctx, also canceled
// with an *UnreachableError if the current round ends before the record
// is answered. release, once the record is answered, frees it.
func (d *dials) bind(ctx context.Context) (rctx context.Context, release func()) {
	if d.connected.Load() {
		return ctx, func() {}
	}
	d.mu.Lock()
	round := d.round
	d.mu.Unlock()
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(round, func() { cancel(context.Cause(round)) })
	return rctx, func() {
		stop()
		cancel(nil)
	}
}

// unreachable is the *UnreachableError that ended rctx, if one did.
func unreachable(rctx context.Context) *UnreachableError {
	var u *UnreachableError
	if errors.As(context.Cause(rctx), &u) {
		return u
	}
	return nil
}
