package schema

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

func TestShareSumsToLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ limit, n uint32 }{{10, 4}, {7, 7}, {32, 5}, {1, 1}, {100, 12}, {3, 2}} {
		var sum, lo, hi uint32 = 0, c.limit, 0
		for i := range c.n {
			s := Share(c.limit, c.n, i)
			sum += s
			lo, hi = min(lo, s), max(hi, s)
		}
		require.Equal(t, c.limit, sum, "%+v", c)
		require.LessOrEqual(t, hi-lo, uint32(1), "%+v: as even as whole numbers allow", c)
	}
}

func TestShardOfSpreadsJobs(t *testing.T) {
	t.Parallel()
	counts := make([]int, 4)
	for i := range 4000 {
		s := ShardOf("job-"+strconv.Itoa(i), 4)
		require.Less(t, s, uint32(4))
		counts[s]++
	}
	for i, c := range counts {
		require.InDelta(t, 1000, c, 150, "shard %d", i)
	}
	require.Zero(t, ShardOf("x", 1))
	require.Equal(t, ShardOf("x", 5), ShardOf("x", 5), "deterministic")
}

func TestSpreadIsBoundedByLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  *chimev1.NamespaceConfig
		want uint32
		err  string
	}{
		{"unset", &chimev1.NamespaceConfig{}, 1, ""},
		{"one", &chimev1.NamespaceConfig{Spread: 1}, 1, ""},
		{"eight", &chimev1.NamespaceConfig{Spread: 8}, 8, ""},
		{"above the default concurrency", &chimev1.NamespaceConfig{Spread: 40}, 32, "max_concurrency 32"},
		{"above max_concurrency", &chimev1.NamespaceConfig{Spread: 8, MaxConcurrency: 4}, 4, "max_concurrency 4"},
		{"above the burst", &chimev1.NamespaceConfig{Spread: 8, RateLimit: &chimev1.RateLimit{PerSecond: 100, Burst: 5}}, 5, "burst of 5"},
		{"burst from per_second", &chimev1.NamespaceConfig{Spread: 8, RateLimit: &chimev1.RateLimit{PerSecond: 3}}, 3, "burst of 3"},
		{"above MaxSpread", &chimev1.NamespaceConfig{Spread: MaxSpread + 1, MaxConcurrency: 1000}, MaxSpread, "at most 256"},
		{"an empty rate limit", &chimev1.NamespaceConfig{Spread: 8, RateLimit: &chimev1.RateLimit{}}, 8, ""},
		{"a burst without a rate", &chimev1.NamespaceConfig{Spread: 8, RateLimit: &chimev1.RateLimit{Burst: 2}}, 8, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.cfg.Namespace = "hot"
			require.Equal(t, c.want, Spread(c.cfg))
			require.Equal(t, spreadOfEffective(c.cfg), Spread(c.cfg), "as the effective config says")
			err := ValidateNamespaceConfig(c.cfg)
			if c.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.err)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, "spread", ve.Field)
		})
	}
}

// spreadOfEffective is Spread computed from the whole effective config,
// the way Spread's answers are defined.
func spreadOfEffective(cfg *chimev1.NamespaceConfig) uint32 {
	n := min(cfg.GetSpread(), MaxSpread)
	if n <= 1 {
		return 1
	}
	eff := EffectiveNamespace(cfg.GetNamespace(), cfg)
	n = min(n, eff.GetMaxConcurrency())
	if eff.GetRateLimit().GetPerSecond() > 0 {
		n = min(n, Burst(eff.GetRateLimit()))
	}
	return max(n, 1)
}
