package api

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/producer"
)

// This file is the API's side of the namespace quotas: the middleware and
// the 429 and 403 answers. Package api/quota owns the limits, their
// defaults and the rate limiters.

// pendingRetryAfter is the Retry-After of a namespace at its pending-jobs
// quota: jobs end as they fire or are cancelled, not at a known time.
const pendingRetryAfter = time.Minute

// limitRequests is the per-namespace request quota, after authenticate.
func (s *server) limitRequests(c *fiber.Ctx) error {
	p, _ := c.Locals(principalKey).(principal)
	if p.admin {
		return c.Next()
	}
	if wait, ok := s.quotas.Request(p.namespace, s.now()); !ok {
		return tooMany(c, wait, "namespace %s is over its request quota of %g requests/s on this API process", p.namespace, s.quotas.Limits().RequestsPerSecond)
	}
	return c.Next()
}

// limitJobs is the per-namespace quota of jobs created, for n jobs (see
// jobQuota.take); a refusal is the 429 problem.
func (s *server) limitJobs(c *fiber.Ctx, n int) error {
	if r := s.jobQuota(c).take(n); r != nil {
		return r.problem(c)
	}
	return nil
}

// jobQuota is one request's hold on its namespace's job quotas: every
// route that creates jobs (create, batch, dead-letter replay) takes them
// from here, so no route creates jobs past them.
//
// The pending count is liveCounts': the schedulers' count, read in the
// background and at most a few seconds old, plus what this process
// admitted and cancelled since. Another API process's creates show in it
// at the next read, so a namespace created through several can overshoot
// by what they create in that time (a few seconds of its jobs-per-second
// quota at most). A job created again under an id it already has counts
// as a new one here, so a namespace at its quota can update a job by
// cancelling it first.
type jobQuota struct {
	s  *server
	ns string
	// off: the admin token is not limited (its jobs are counted).
	off bool
}

func (s *server) jobQuota(c *fiber.Ctx) *jobQuota {
	p, _ := c.Locals(principalKey).(principal)
	return &jobQuota{s: s, ns: c.Params("ns"), off: p.admin}
}

// take admits n more jobs, or says why not: the pending jobs first (a
// refused request takes no rate), then the rate.
func (q *jobQuota) take(n int) *jobRefusal {
	cfg := q.s.quotas.Limits()
	counted := cfg.PendingJobs > 0
	if q.off {
		if counted {
			q.s.live.add(q.ns, int64(n))
		}
		return nil
	}
	if counted {
		if live := q.s.live.estimate(q.ns); float64(live+int64(n)) > cfg.PendingJobs {
			q.s.live.touch(q.ns) // jobs may have ended since the count
			return &jobRefusal{pendingRetryAfter, fmt.Sprintf("namespace %s has %d jobs that have not ended, and its quota is %g (%d asked); cancel jobs or wait for them to fire",
				q.ns, live, cfg.PendingJobs, n)}
		}
	}
	if wait, ok := q.s.quotas.Jobs(q.ns, n, q.s.now()); !ok {
		return &jobRefusal{wait, fmt.Sprintf("namespace %s is over its quota of %g jobs created/s on this API process (%d asked)", q.ns, cfg.JobsPerSecond, n)}
	}
	if counted {
		q.s.live.add(q.ns, int64(n))
	}
	return nil
}

// acked follows a job command of ns this process published: its offset
// is what the namespace's listings and counts must show, and the
// pending-jobs quota counts a cancel (the API cancels only live jobs) and
// has the count read if it is due, which then shows the command.
func (s *server) acked(ns string, cancel bool, r producer.Receipt) {
	s.published.record(ns, r.Partition, r.Offset)
	if s.quotas.Limits().PendingJobs > 0 {
		if cancel {
			s.live.add(ns, -1)
		}
		s.live.touch(ns)
	}
}

// jobRefusal is why the job quotas refused new jobs, and how long to
// wait; as an error, a route that reports it in its answer (bulk replay)
// tells it from other failures.
type jobRefusal struct {
	wait   time.Duration
	reason string
}

// problem is the 429 a create gets, Retry-After set on c.
func (r *jobRefusal) problem(c *fiber.Ctx) error { return tooMany(c, r.wait, "%s", r.reason) }

// Error is the reason with when to retry, as the problem's detail says it.
func (r *jobRefusal) Error() string { return r.reason + retryHint(r.wait) }

// limitNamespaces refuses a new namespace once Quotas.Namespaces exist:
// each costs a row in every view and a breaker, and a leaked admin token
// in a loop should not be able to fill the cluster with them.
func (s *server) limitNamespaces() error {
	limit := s.quotas.Limits().Namespaces
	if limit <= 0 {
		return nil
	}
	names, err := s.cfg.Namespaces.Names()
	if err != nil {
		return viewUnavailable("namespace", err)
	}
	if float64(len(names)) >= limit {
		return problem(fiber.StatusForbidden, "quota-exceeded", "there are %d namespaces and the limit is %g (CHIME_MAX_NAMESPACES); delete one or raise the limit", len(names), limit)
	}
	return nil
}

func tooMany(c *fiber.Ctx, wait time.Duration, format string, args ...any) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(wait)))
	p := problem(fiber.StatusTooManyRequests, "quota-exceeded", format, args...)
	p.Detail += retryHint(wait)
	return p
}

// retryAfterSeconds is wait as Retry-After says it: whole seconds, at
// least one.
func retryAfterSeconds(wait time.Duration) int { return max(1, int(math.Ceil(wait.Seconds()))) }

// retryHint ends a quota refusal's detail with when to retry.
func retryHint(wait time.Duration) string {
	return "; retry after " + strconv.Itoa(retryAfterSeconds(wait)) + " s"
}
