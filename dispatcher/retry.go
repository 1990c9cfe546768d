package dispatcher

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// defaultRetry is the retry policy of a namespace that sets none; it
// fills what neither the job nor its namespace sets. Read only.
var defaultRetry = schema.NamespaceDefaults().GetRetry()

// Policy is a resolved retry policy: every field set.
type Policy struct {
	MaxAttempts uint32
	Initial     time.Duration
	Multiplier  float64
	MaxInterval time.Duration
	Jitter      float64
	MaxElapsed  time.Duration
}

// resolvePolicy takes each field from the job's policy, else the
// namespace's, else the namespace default's (schema.NamespaceDefaults): a
// job that only sets max_attempts keeps its namespace's intervals.
func resolvePolicy(job, ns *chimev1.RetryPolicy) Policy {
	var p Policy
	for _, rp := range []*chimev1.RetryPolicy{defaultRetry, ns, job} {
		if rp == nil {
			continue
		}
		if v := rp.GetMaxAttempts(); v > 0 {
			p.MaxAttempts = v
		}
		if v := rp.GetInitialInterval().AsDuration(); v > 0 {
			p.Initial = v
		}
		if v := rp.GetMaxInterval().AsDuration(); v > 0 {
			p.MaxInterval = v
		}
		if v := rp.GetMultiplier(); v >= 1 {
			p.Multiplier = v
		}
		if v := rp.GetJitter(); v > 0 && v <= 1 {
			p.Jitter = v
		}
		if v := rp.GetMaxElapsed().AsDuration(); v > 0 {
			p.MaxElapsed = v
		}
	}
	if p.MaxInterval < p.Initial {
		p.MaxInterval = p.Initial
	}
	return p
}

// backoffDelay is the wait before attempt+1 after attempt failed:
// backoff/v4's exponential curve, with its randomization, stepped to the
// attempt. The dispatcher is stateless between attempts (the attempt
// number travels in the Due), so the curve is replayed each time; it is
// at most MaxAttempts steps.
func backoffDelay(p Policy, attempt uint32) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: p.Jitter,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.MaxInterval,
		MaxElapsedTime:      0, // chime measures max_elapsed from scheduled_at itself
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	d := b.NextBackOff()
	for i := uint32(1); i < attempt && i < 64; i++ {
		d = b.NextBackOff()
	}
	return d
}

// parseRetryAfter reads a Retry-After header: delta-seconds or an
// HTTP-date. ok is false when the header is absent or unreadable.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(365*24*time.Hour/time.Second) {
			n = int64(365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// retryDelay is the delay before the next attempt: Retry-After, when the
// endpoint sent one, replaces the computed backoff; either is capped by
// the policy's max interval.
func retryDelay(p Policy, attempt uint32, retryAfter string, now time.Time) (d time.Duration, fromHeader bool) {
	if ra, ok := parseRetryAfter(retryAfter, now); ok {
		return min(ra, p.MaxInterval), true
	}
	return min(backoffDelay(p, attempt), p.MaxInterval), false
}

// deferSpread spreads deferred callbacks over [base, 2*base) so that a
// burst held back at once does not come back at once.
func deferSpread(base time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	return base + rand.N(base)
}
