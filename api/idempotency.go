package api

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// idempotencyStore remembers, per namespace and Idempotency-Key, the hash
// of the request and the answer given, so a retry gets the same answer
// and a different request under the same key is refused. It lives in the
// process: across API instances the job id derived from the key still
// prevents a second job (see jobIDFor).
//
// The cache forgets the oldest key beyond max, and drops
// keys older than ttl by the wall clock to free their memory; whether a
// key has expired is decided on the server's clock (entry.at), so a test's
// clock decides it too.
type idempotencyStore struct {
	ttl time.Duration

	// mu makes begin's look-up and claim one step, and guards the
	// entries, which finish completes in place.
	mu      sync.Mutex
	entries *expirable.LRU[string, *idemEntry]
}

type idemEntry struct {
	bodyHash [32]byte
	at       time.Time
	done     bool
	status   int
	response []byte
}

func newIdempotencyStore(ttl time.Duration, max int) *idempotencyStore {
	return &idempotencyStore{ttl: ttl, entries: expirable.NewLRU[string, *idemEntry](max, nil, ttl)}
}

// idemOutcome is what begin found.
type idemOutcome int

const (
	idemNew      idemOutcome = iota // first use: the caller must finish or abort
	idemReplay                      // same request answered before: entry holds the answer
	idemMismatch                    // the key was used with another request
	idemBusy                        // the same key is being processed right now
)

func (s *idempotencyStore) begin(key string, bodyHash [32]byte, now time.Time) (idemOutcome, idemEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// An answered key past its TTL is forgotten; one still being
	// processed is not, or a slow request's key could be taken twice.
	if e, ok := s.entries.Peek(key); ok && (!e.done || now.Sub(e.at) < s.ttl) {
		switch {
		case e.bodyHash != bodyHash:
			return idemMismatch, *e
		case !e.done:
			return idemBusy, *e
		default:
			return idemReplay, *e
		}
	}
	s.entries.Add(key, &idemEntry{bodyHash: bodyHash, at: now})
	return idemNew, idemEntry{}
}

// finish records the answer to a request begun with idemNew.
func (s *idempotencyStore) finish(key string, status int, response []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries.Peek(key); ok {
		e.done, e.status, e.response = true, status, response
	}
}

// abort forgets a request that failed, so it can be retried.
func (s *idempotencyStore) abort(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries.Remove(key)
}

func (s *idempotencyStore) len() int { return s.entries.Len() }
