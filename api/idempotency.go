// Idempotency-Key: a create retried with the same key gets the same
// answer, on this process from the store below, on any process from the
// job id the key derives.

package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/hashicorp/golang-lru/v2/expirable"
)

// HeaderIdempotencyKey makes a create safe to retry: the same key in the
// same namespace returns the same job and never creates a second one.
const HeaderIdempotencyKey = "Idempotency-Key"

// headerReplayed marks an answer given from the idempotency store.
const headerReplayed = "Idempotent-Replayed"

const maxIdempotencyKeyLen = 255

// jobIDFor returns the job's id: the one given, else one derived from the
// idempotency key (so a retry on any API instance names the same job),
// else a random one.
func jobIDFor(ns, given, idemKey string, index int) string {
	switch {
	case given != "":
		return given
	case idemKey != "":
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", ns, idemKey, index))
		return "idem-" + hex.EncodeToString(h[:16])
	}
	// Random (v4), not time-ordered like a command id: it names a job, and
	// nothing sorts jobs by it.
	return uuid.NewString()
}

func (s *server) idempotencyKey(c *fiber.Ctx) (string, error) {
	k := c.Get(HeaderIdempotencyKey)
	if k == "" {
		return "", nil
	}
	if len(k) > maxIdempotencyKeyLen {
		return "", invalidFields(FieldError{Field: HeaderIdempotencyKey, Reason: fmt.Sprintf("is %d bytes long; the limit is %d", len(k), maxIdempotencyKeyLen)})
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", invalidFields(FieldError{Field: HeaderIdempotencyKey, Reason: fmt.Sprintf("has byte %q at %d; use printable ASCII without spaces (a UUID, say)", k[i], i)})
		}
	}
	return k, nil
}

// idempotent runs create under the Idempotency-Key of the request, if any:
// a replay of an answered request gets the same answer, a different body
// under the same key a 422.
func (s *server) idempotent(c *fiber.Ctx, ns, key string, req any, create func() (int, any, error)) error {
	if key == "" {
		status, body, err := create()
		if err != nil {
			return err
		}
		return c.Status(status).JSON(body)
	}
	canon, _ := json.Marshal(req)
	hash := sha256.Sum256(append([]byte(c.Route().Path+"\x00"), canon...))
	storeKey := ns + "\x00" + key
	switch outcome, e := s.idem.begin(storeKey, hash, s.now()); outcome {
	case idemMismatch:
		p := problem(fiber.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key %q was used at %s with a different request; use a new key for a new request", key, e.at.UTC().Format(time.RFC3339))
		p.Errors = []FieldError{{Field: HeaderIdempotencyKey, Reason: "was used with a different request"}}
		return p
	case idemBusy:
		return problem(fiber.StatusConflict, "idempotency-key-in-use", "a request with Idempotency-Key %q is still being processed; retry in a moment", key)
	case idemReplay:
		s.metrics.replays.Inc()
		c.Set(headerReplayed, "true")
		c.Status(e.status).Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(e.response)
	}
	status, body, err := create()
	if err != nil {
		s.idem.abort(storeKey)
		return err
	}
	raw, err := marshalJSON(body)
	if err != nil {
		s.idem.abort(storeKey)
		return err
	}
	s.idem.finish(storeKey, status, raw)
	c.Status(status).Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(raw)
}

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
