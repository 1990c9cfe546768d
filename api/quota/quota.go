// Package quota owns what one namespace's keys may ask of one API
// process: the limits, their defaults, and the per-namespace rate limiters
// that keep them. A careless client (a loop without a sleep) or a leaked
// key cannot fill the cluster with jobs or the API's CPU with requests.
// The admin token is not limited. With several API processes behind a
// balancer each applies its own quota, so the namespace gets up to N times
// them in sum.
//
// It imports no HTTP framework: the API (package api) answers the 429s,
// and the settings (infra/config) take their defaults from here.
package quota

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/chime-sched/chime/internal/setting"
)

// Limits bound each namespace on one API process. A field left at 0
// takes its default; Unlimited turns that limit off; any other negative
// value is refused (Validate).
type Limits struct {
	// RequestsPerSecond per namespace; bursts of twice as many. Default
	// DefaultRequestsPerSecond; Unlimited: no limit.
	RequestsPerSecond float64
	// JobsPerSecond created per namespace (a batch counts each job);
	// bursts of ten seconds' worth, at least MinJobsBurst. Default
	// DefaultJobsPerSecond; Unlimited: no limit.
	JobsPerSecond float64
	// PendingJobs a namespace may have that have not ended (scheduled,
	// paused or firing), counted in the jobs table. Default
	// DefaultPendingJobs; Unlimited: no limit.
	PendingJobs float64
	// Namespaces that may exist; creating one more answers 403. Default
	// DefaultMaxNamespaces; Unlimited: no limit.
	Namespaces float64
}

// Unlimited, as a Limits field, turns that limit off (0 takes the
// default instead; any other negative value is refused).
const Unlimited = -1

// The defaults; docs/api.md ("Quotas") says them.
const (
	DefaultRequestsPerSecond = 200
	DefaultJobsPerSecond     = 2000
	DefaultPendingJobs       = 100_000
	DefaultMaxNamespaces     = 10_000
)

// Validate applies the defaults to the limits left unset and refuses a
// negative one other than Unlimited, naming each.
func (l *Limits) Validate() error {
	const o, u, means = "quota", "quota.Unlimited", "for no limit"
	return errors.Join(
		setting.PositiveOr(o, "RequestsPerSecond", &l.RequestsPerSecond, DefaultRequestsPerSecond, Unlimited, u, means),
		setting.PositiveOr(o, "JobsPerSecond", &l.JobsPerSecond, DefaultJobsPerSecond, Unlimited, u, means),
		setting.PositiveOr(o, "PendingJobs", &l.PendingJobs, DefaultPendingJobs, Unlimited, u, means),
		setting.PositiveOr(o, "Namespaces", &l.Namespaces, DefaultMaxNamespaces, Unlimited, u, means),
	)
}

// Limiters keep the rate limits of every namespace seen. Safe for
// concurrent use.
type Limiters struct {
	limits Limits
	// minJobsBurst is the smallest burst of jobs: a full batch must fit.
	minJobsBurst float64
	mu           sync.Mutex
	byNS         map[string]*namespace
}

type namespace struct{ requests, jobs *rate.Limiter }

// New makes the limiters of limits, its zero fields the defaults (a bad
// one is refused, as Validate says); minJobsBurst is the fewest jobs one
// burst admits (the largest batch a request may create).
func New(limits Limits, minJobsBurst int) (*Limiters, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return &Limiters{limits: limits, minJobsBurst: float64(minJobsBurst), byNS: map[string]*namespace{}}, nil
}

// Limits are the limits in force, defaults filled in.
func (q *Limiters) Limits() Limits { return q.limits }

// Request takes one request of namespace ns at now, or says how long
// until there is room for it.
func (q *Limiters) Request(ns string, now time.Time) (wait time.Duration, ok bool) {
	return take(q.of(ns).requests, 1, now)
}

// Jobs takes n job creations of namespace ns at now, or says how long
// until there is room for them; ok is false with no wait when n exceeds a
// whole burst.
func (q *Limiters) Jobs(ns string, n int, now time.Time) (wait time.Duration, ok bool) {
	return take(q.of(ns).jobs, n, now)
}

func (q *Limiters) of(ns string) *namespace {
	q.mu.Lock()
	defer q.mu.Unlock()
	nq := q.byNS[ns]
	if nq == nil {
		nq = &namespace{requests: limiter(q.limits.RequestsPerSecond, 2*q.limits.RequestsPerSecond),
			jobs: limiter(q.limits.JobsPerSecond, max(10*q.limits.JobsPerSecond, q.minJobsBurst))}
		q.byNS[ns] = nq
	}
	return nq
}

func limiter(perSec, burst float64) *rate.Limiter {
	if perSec == Unlimited {
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
