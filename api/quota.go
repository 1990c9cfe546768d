package api

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/time/rate"
)

// Quotas bound what one namespace's keys may ask of one API process: a
// careless client (a loop without a sleep) or a leaked key cannot fill the
// cluster with jobs or the API's CPU with requests. The admin token is not
// limited. With several API processes behind a balancer each applies its
// own quota, so the namespace gets up to N times them in sum.
type Quotas struct {
	// RequestsPerSecond per namespace; bursts of twice as many. Default
	// DefaultRequestsPerSecond; negative: no limit.
	RequestsPerSecond float64
	// JobsPerSecond created per namespace (a batch counts each job);
	// bursts of ten seconds' worth, at least one full batch. Default
	// DefaultJobsPerSecond; negative: no limit.
	JobsPerSecond float64
}

// The quota defaults; docs/api.md ("Quotas") says them.
const (
	DefaultRequestsPerSecond = 200
	DefaultJobsPerSecond     = 2000
)

func (q *Quotas) defaults() {
	if q.RequestsPerSecond == 0 {
		q.RequestsPerSecond = DefaultRequestsPerSecond
	}
	if q.JobsPerSecond == 0 {
		q.JobsPerSecond = DefaultJobsPerSecond
	}
}

type quotas struct {
	cfg  Quotas
	mu   sync.Mutex
	byNS map[string]*nsQuota
}

type nsQuota struct{ requests, jobs *rate.Limiter }

func newQuotas(cfg Quotas) *quotas {
	cfg.defaults()
	return &quotas{cfg: cfg, byNS: map[string]*nsQuota{}}
}

func (q *quotas) of(ns string) *nsQuota {
	q.mu.Lock()
	defer q.mu.Unlock()
	nq := q.byNS[ns]
	if nq == nil {
		nq = &nsQuota{requests: limiter(q.cfg.RequestsPerSecond, 2*q.cfg.RequestsPerSecond),
			jobs: limiter(q.cfg.JobsPerSecond, max(10*q.cfg.JobsPerSecond, MaxBatch))}
		q.byNS[ns] = nq
	}
	return nq
}

func limiter(perSec, burst float64) *rate.Limiter {
	if perSec < 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSec), max(1, int(burst)))
}

// take takes n tokens at now, or says how long until they are there.
func take(l *rate.Limiter, n int, now time.Time) (time.Duration, bool) {
	if l == nil {
		return 0, true
	}
	if n > l.Burst() {
		return 0, false
	}
	r := l.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// limitRequests is the per-namespace request quota, after authenticate.
func (s *server) limitRequests(c *fiber.Ctx) error {
	p, _ := c.Locals(principalKey).(principal)
	if p.admin {
		return c.Next()
	}
	if wait, ok := take(s.quotas.of(p.namespace).requests, 1, s.now()); !ok {
		return tooMany(c, wait, "namespace %s is over its request quota of %g requests/s on this API process", p.namespace, s.quotas.cfg.RequestsPerSecond)
	}
	return c.Next()
}

// limitJobs is the per-namespace quota of jobs created, for n jobs.
func (s *server) limitJobs(c *fiber.Ctx, n int) error {
	p, _ := c.Locals(principalKey).(principal)
	if p.admin {
		return nil
	}
	if wait, ok := take(s.quotas.of(p.namespace).jobs, n, s.now()); !ok {
		return tooMany(c, wait, "namespace %s is over its quota of %g jobs created/s on this API process (%d asked)", p.namespace, s.quotas.cfg.JobsPerSecond, n)
	}
	return nil
}

func tooMany(c *fiber.Ctx, wait time.Duration, format string, args ...any) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	p := problem(fiber.StatusTooManyRequests, "quota-exceeded", format, args...)
	p.Detail += "; retry after " + strconv.Itoa(secs) + " s"
	return p
}
