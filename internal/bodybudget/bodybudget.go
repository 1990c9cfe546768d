// Package bodybudget owns the process-wide budget of request body bytes
// that chime's HTTP servers (the API and the scheduler's query server)
// hold at once, and how a body is read within it. A server admits a body
// only once its request is authenticated, reserves the body's announced
// size before reading a byte of it, and answers 503 (Retry-After) without
// reading when the budget has no room: whatever the clients send, the
// bodies held by one process stay under the budget (plus fasthttp's 8 KiB
// look-ahead and the socket buffers of each connection).
package bodybudget

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/semaphore"
)

// Default is the budget of a chime process (CHIME_BODY_BUDGET): 64
// bodies of the API's largest (1 MiB) at once, far more small ones.
const Default = 64 << 20

// Budget bounds the body bytes held across the requests in flight. One
// Budget is shared by every server of a process.
type Budget struct {
	size int64
	sem  *semaphore.Weighted
}

// New returns a budget of size bytes; size must be positive.
func New(size int64) (*Budget, error) {
	if size <= 0 {
		return nil, fmt.Errorf("bodybudget: the budget is %d bytes; it must be positive", size)
	}
	return &Budget{size: size, sem: semaphore.NewWeighted(size)}, nil
}

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// Reservation is room taken in a budget for one body.
type Reservation struct {
	b *Budget
	n int64
}

// Release gives the room back, once the body is no longer needed.
func (r Reservation) Release() {
	if r.n > 0 {
		r.b.sem.Release(r.n)
	}
}

// Reserve takes room for a body announced as announced bytes (negative:
// chunked, of unknown length, which takes limit+1, as much as Read may
// hold before it knows the body is too large). false: the budget has not
// that much room left now, and nothing was taken.
func (b *Budget) Reserve(announced, limit int64) (Reservation, bool) {
	n := announced
	if n < 0 || n > limit {
		n = limit + 1
	}
	if n == 0 {
		return Reservation{}, true
	}
	if n > b.size || !b.sem.TryAcquire(n) {
		return Reservation{}, false
	}
	return Reservation{b: b, n: n}, true
}

// ErrTooLarge is what Read answers for a body over its limit.
var ErrTooLarge = errors.New("the request body is over its limit")

// Read reads a whole body of announced length (negative: unknown) from r,
// at most limit bytes: a body of known length into a buffer of exactly
// that size, one of unknown length growing up to limit+1. A body longer
// than limit is ErrTooLarge; one shorter than announced, the read error
// (io.ErrUnexpectedEOF at the end of the stream).
func Read(r io.Reader, announced, limit int64) ([]byte, error) {
	if announced > limit {
		return nil, ErrTooLarge
	}
	if announced >= 0 {
		body := make([]byte, announced)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, ErrTooLarge
	}
	return body, nil
}
