package api

import (
	"container/list"
	"sync"
	"time"
)

// idempotencyStore remembers, per namespace and Idempotency-Key, the hash
// of the request and the answer given, so a retry gets the same answer
// and a different request under the same key is refused. It lives in the
// process: across API instances the job id derived from the key still
// prevents a second job (see jobIDFor).
type idempotencyStore struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[string]*list.Element // of *idemEntry, oldest first
	order   *list.List
}

type idemEntry struct {
	key      string
	bodyHash [32]byte
	at       time.Time
	done     bool
	status   int
	response []byte
}

func newIdempotencyStore(ttl time.Duration, max int) *idempotencyStore {
	return &idempotencyStore{ttl: ttl, max: max, entries: map[string]*list.Element{}, order: list.New()}
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
	s.expire(now)
	if el, ok := s.entries[key]; ok {
		e := el.Value.(*idemEntry)
		switch {
		case e.bodyHash != bodyHash:
			return idemMismatch, *e
		case !e.done:
			return idemBusy, *e
		default:
			return idemReplay, *e
		}
	}
	for s.order.Len() >= s.max {
		s.remove(s.order.Front())
	}
	s.entries[key] = s.order.PushBack(&idemEntry{key: key, bodyHash: bodyHash, at: now})
	return idemNew, idemEntry{}
}

// finish records the answer to a request begun with idemNew.
func (s *idempotencyStore) finish(key string, status int, response []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[key]; ok {
		e := el.Value.(*idemEntry)
		e.done, e.status, e.response = true, status, response
	}
}

// abort forgets a request that failed, so it can be retried.
func (s *idempotencyStore) abort(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.entries[key]; ok {
		s.remove(el)
	}
}

func (s *idempotencyStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if e := el.Value.(*idemEntry); !e.done || now.Sub(e.at) < s.ttl {
			return
		}
		s.remove(el)
	}
}

func (s *idempotencyStore) remove(el *list.Element) {
	delete(s.entries, el.Value.(*idemEntry).key)
	s.order.Remove(el)
}

func (s *idempotencyStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
