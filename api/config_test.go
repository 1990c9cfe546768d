package api

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api/quota"
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
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		err    string
		check  func(t *testing.T, c Config)
	}{
		{name: "zero takes the defaults", check: func(t *testing.T, c Config) {
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
		{name: "Unlimited stays", mutate: func(c *Config) {
			c.Quotas = quota.Limits{RequestsPerSecond: quota.Unlimited, JobsPerSecond: quota.Unlimited, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited}
		}, check: func(t *testing.T, c Config) {
			require.Equal(t, quota.Limits{RequestsPerSecond: quota.Unlimited, JobsPerSecond: quota.Unlimited, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited}, c.Quotas)
		}},
		{name: "missing parts", mutate: func(c *Config) { c.JobStates = nil }, err: "api: Config needs Jobs, Control, Namespaces, Breakers and JobStates"},
		{name: "AnalyticsTimeout", mutate: func(c *Config) { c.AnalyticsTimeout = -time.Second }, err: "api: AnalyticsTimeout is -1s: must be positive, or 0 for the default 15s"},
		{name: "ConsistencyWait", mutate: func(c *Config) { c.ConsistencyWait = -time.Second }, err: "api: ConsistencyWait is -1s: must be positive, or 0 for the default 5s"},
		{name: "RecentTTL", mutate: func(c *Config) { c.RecentTTL = -time.Second }, err: "api: RecentTTL is -1s: must be positive, or 0 for the default 2m0s"},
		{name: "IdempotencyTTL", mutate: func(c *Config) { c.IdempotencyTTL = -time.Second }, err: "api: IdempotencyTTL is -1s: must be positive, or 0 for the default 24h0m0s"},
		{name: "IdempotencyMax", mutate: func(c *Config) { c.IdempotencyMax = -1 }, err: "api: IdempotencyMax is -1: must be positive, or 0 for the default 100000"},
		{name: "PublishTimeout", mutate: func(c *Config) { c.PublishTimeout = -time.Second }, err: "api: PublishTimeout is -1s: must be positive, or 0 for the default 10s"},
		{name: "RequestsPerSecond", mutate: func(c *Config) { c.Quotas.RequestsPerSecond = -2 }, err: "quota: RequestsPerSecond is -2: must be positive, 0 for the default 200, or quota.Unlimited for no limit"},
		{name: "JobsPerSecond", mutate: func(c *Config) { c.Quotas.JobsPerSecond = -0.5 }, err: "quota: JobsPerSecond is -0.5: must be positive, 0 for the default 2000, or quota.Unlimited for no limit"},
		{name: "PendingJobs", mutate: func(c *Config) { c.Quotas.PendingJobs = math.NaN() }, err: "quota: PendingJobs is NaN: must be a finite number"},
		{name: "Namespaces", mutate: func(c *Config) { c.Quotas.Namespaces = -10 }, err: "quota: Namespaces is -10: must be positive, 0 for the default 10000, or quota.Unlimited for no limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := full(tc.mutate)
			err := c.validate()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				_, err = New(full(tc.mutate))
				require.EqualError(t, err, tc.err, "New refuses it too")
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}
