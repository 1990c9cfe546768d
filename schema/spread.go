package schema

import (
	"cmp"
	"hash/fnv"

	"github.com/chime-sched/chime/schema/chimev1"
)

// A namespace's due events normally share one key, the namespace, and so
// one due partition and one dispatcher: its limits are counted in one
// place. A hot namespace sets spread = N: each job belongs to one of N
// shards (a hash of its id), each shard's dues go to a partition of their
// own (the scheduler picks the keys), and whichever dispatcher owns that
// partition calls them. The namespace's limits are split between the
// shards, so they hold in sum however the partitions are spread over the
// dispatchers, without the dispatchers talking to each other:
//
//   - max_concurrency and rate_limit.burst: shard i gets Share(limit, N, i),
//     the limit divided as evenly as whole numbers allow, summing exactly;
//   - rate_limit.per_second: per_second / N each;
//   - the breaker's half-open probes: all of one episode's go to shard
//     ProbeShard(version, N), so they are counted by one dispatcher; the
//     next episode (a new version) moves them to the next shard, so a
//     shard without dues cannot hold the breaker half-open for long.
//
// The split is static: a shard with little work leaves its share unused.
// Hashing job ids spreads a hot namespace's work evenly, which is the case
// spread is for. Outcomes stay keyed by namespace, so the breaker still
// sees every one.

// MaxSpread bounds a namespace's spread: more shards than due partitions
// gain nothing, and each shard keeps a lane in whichever dispatcher owns
// it.
const MaxSpread = 256

// Spread is the number of shards cfg's dues are spread over: at least 1,
// at most its spread, and never more than its concurrency limit or rate
// limit burst, so that every shard's share of them is at least 1 (the API
// refuses such a config; this guards against one that got in anyway).
//
// The scheduler asks for every tick and command of a spread namespace, so
// the two limits are taken as EffectiveNamespace would make them (a field
// cfg sets, else the default) without building the whole effective
// config: its reflection was 6 % of a scheduler's CPU at 2,000 fires a
// second (capacity phase). A test holds the two to the same answers.
func Spread(cfg *chimev1.NamespaceConfig) uint32 {
	n := min(cfg.GetSpread(), MaxSpread)
	if n <= 1 {
		return 1
	}
	n = min(n, cmp.Or(cfg.GetMaxConcurrency(), spreadDefaults.GetMaxConcurrency()))
	rl := &chimev1.RateLimit{
		PerSecond: cmp.Or(cfg.GetRateLimit().GetPerSecond(), spreadDefaults.GetRateLimit().GetPerSecond()),
		Burst:     cmp.Or(cfg.GetRateLimit().GetBurst(), spreadDefaults.GetRateLimit().GetBurst()),
	}
	if rl.GetPerSecond() > 0 {
		n = min(n, Burst(rl))
	}
	return max(n, 1)
}

// spreadDefaults are the defaults Spread reads; never modified.
var spreadDefaults = NamespaceDefaults()

// Burst is a rate limit's bucket size: burst if set, else per_second
// rounded down, at least 1.
func Burst(rl *chimev1.RateLimit) uint32 {
	if b := rl.GetBurst(); b > 0 {
		return b
	}
	return max(1, uint32(rl.GetPerSecond()))
}

// ShardOf is the shard of a job in a namespace spread n ways.
func ShardOf(jobID string, n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(jobID))
	return h.Sum32() % n
}

// Share is shard i's part of limit split n ways: limit/n, plus one for the
// first limit%n shards, so the shares sum to limit exactly.
func Share(limit, n, i uint32) uint32 {
	if n <= 1 {
		return limit
	}
	s := limit / n
	if i%n < limit%n {
		s++
	}
	return s
}

// ProbeShard is the shard that sends a half-open episode's probes.
func ProbeShard(version uint64, n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	return uint32(version % uint64(n))
}
