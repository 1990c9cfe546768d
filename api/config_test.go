package api

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/internal/setting/settingtest"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	// validate only checks that the readers and publishers are given.
	full := func(mutate func(*Config)) Config {
		c := Config{Jobs: struct{ JobPublisher }{}, Control: struct{ ControlPublisher }{}, Namespaces: struct{ NamespaceView }{},
			Breakers: struct{ BreakerView }{}, JobStates: struct{ JobView }{}}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	build := func(c Config) error { _, err := New(c); return err }
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Cfg: full(nil), Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultAnalyticsTimeout, c.AnalyticsTimeout)
			require.Equal(t, DefaultConsistencyWait, c.ConsistencyWait)
			require.Equal(t, DefaultRecentTTL, c.RecentTTL)
			require.Equal(t, DefaultIdempotencyTTL, c.IdempotencyTTL)
			require.Equal(t, DefaultIdempotencyMax, c.IdempotencyMax)
			require.Equal(t, DefaultPublishTimeout, c.PublishTimeout)
			require.Equal(t, quota.Limits{RequestsPerSecond: quota.DefaultRequestsPerSecond, JobsPerSecond: quota.DefaultJobsPerSecond,
				PendingJobs: quota.DefaultPendingJobs, Namespaces: quota.DefaultMaxNamespaces}, c.Quotas)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{Name: "Unlimited stays", Cfg: full(func(c *Config) {
			c.Quotas = quota.Limits{RequestsPerSecond: quota.Unlimited, JobsPerSecond: quota.Unlimited, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited}
		}), Check: func(t *testing.T, c Config) {
			require.Equal(t, quota.Limits{RequestsPerSecond: quota.Unlimited, JobsPerSecond: quota.Unlimited, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited}, c.Quotas)
		}},
		{Name: "missing parts", Cfg: full(func(c *Config) { c.JobStates = nil }), Err: "api: Config needs Jobs, Control, Namespaces, Breakers and JobStates"},
		{Name: "AnalyticsTimeout", Cfg: full(func(c *Config) { c.AnalyticsTimeout = -time.Second }), Err: "api: AnalyticsTimeout is -1s: must be positive, or 0 for the default 15s"},
		{Name: "ConsistencyWait", Cfg: full(func(c *Config) { c.ConsistencyWait = -time.Second }), Err: "api: ConsistencyWait is -1s: must be positive, or 0 for the default 5s"},
		{Name: "RecentTTL", Cfg: full(func(c *Config) { c.RecentTTL = -time.Second }), Err: "api: RecentTTL is -1s: must be positive, or 0 for the default 2m0s"},
		{Name: "IdempotencyTTL", Cfg: full(func(c *Config) { c.IdempotencyTTL = -time.Second }), Err: "api: IdempotencyTTL is -1s: must be positive, or 0 for the default 24h0m0s"},
		{Name: "IdempotencyMax", Cfg: full(func(c *Config) { c.IdempotencyMax = -1 }), Err: "api: IdempotencyMax is -1: must be positive, or 0 for the default 100000"},
		{Name: "PublishTimeout", Cfg: full(func(c *Config) { c.PublishTimeout = -time.Second }), Err: "api: PublishTimeout is -1s: must be positive, or 0 for the default 10s"},
		{Name: "RequestsPerSecond", Cfg: full(func(c *Config) { c.Quotas.RequestsPerSecond = -2 }), Err: "quota: RequestsPerSecond is -2: must be positive, 0 for the default 200, or quota.Unlimited for no limit"},
		{Name: "JobsPerSecond", Cfg: full(func(c *Config) { c.Quotas.JobsPerSecond = -0.5 }), Err: "quota: JobsPerSecond is -0.5: must be positive, 0 for the default 2000, or quota.Unlimited for no limit"},
		{Name: "PendingJobs", Cfg: full(func(c *Config) { c.Quotas.PendingJobs = math.NaN() }), Err: "quota: PendingJobs is NaN: must be a finite number"},
		{Name: "Namespaces", Cfg: full(func(c *Config) { c.Quotas.Namespaces = -10 }), Err: "quota: Namespaces is -10: must be positive, 0 for the default 10000, or quota.Unlimited for no limit"},
	})
}
