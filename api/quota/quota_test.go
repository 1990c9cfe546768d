package quota_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api/quota"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// TestLimitsValidate: 0 takes the default, a positive limit and
// Unlimited are kept, any other negative (or NaN) is refused, by Validate
// and by New alike.
func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		in, want quota.Limits
		err      string
	}{
		{name: "zero takes the defaults", want: quota.Limits{RequestsPerSecond: quota.DefaultRequestsPerSecond,
			JobsPerSecond: quota.DefaultJobsPerSecond, PendingJobs: quota.DefaultPendingJobs, Namespaces: quota.DefaultMaxNamespaces}},
		{name: "set and Unlimited are kept", in: quota.Limits{RequestsPerSecond: 0.5, JobsPerSecond: 5, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited},
			want: quota.Limits{RequestsPerSecond: 0.5, JobsPerSecond: 5, PendingJobs: quota.Unlimited, Namespaces: quota.Unlimited}},
		{name: "RequestsPerSecond", in: quota.Limits{RequestsPerSecond: -2},
			err: "quota: RequestsPerSecond is -2: must be positive, 0 for the default 200, or quota.Unlimited for no limit"},
		{name: "JobsPerSecond", in: quota.Limits{JobsPerSecond: -0.5},
			err: "quota: JobsPerSecond is -0.5: must be positive, 0 for the default 2000, or quota.Unlimited for no limit"},
		{name: "PendingJobs", in: quota.Limits{PendingJobs: math.NaN()}, err: "quota: PendingJobs is NaN: must be a finite number"},
		{name: "Namespaces", in: quota.Limits{Namespaces: -10},
			err: "quota: Namespaces is -10: must be positive, 0 for the default 10000, or quota.Unlimited for no limit"},
		{name: "every bad one is named", in: quota.Limits{RequestsPerSecond: -2, Namespaces: -10},
			err: "quota: RequestsPerSecond is -2: must be positive, 0 for the default 200, or quota.Unlimited for no limit\n" +
				"quota: Namespaces is -10: must be positive, 0 for the default 10000, or quota.Unlimited for no limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := tc.in
			err := l.Validate()
			q, newErr := quota.New(tc.in, 100)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				require.EqualError(t, newErr, tc.err, "New refuses it too")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, l)
			require.NoError(t, newErr)
			require.Equal(t, tc.want, q.Limits(), "the limits in force")
		})
	}
}

func TestLimiters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits quota.Limits
		// take: requests (n == 0) or jobs taken one after the other at t0.
		take []int
		ok   []bool
	}{
		{"requests burst twice the rate", quota.Limits{RequestsPerSecond: 2}, []int{0, 0, 0, 0, 0}, []bool{true, true, true, true, false}},
		{"no request limit", quota.Limits{RequestsPerSecond: quota.Unlimited}, []int{0, 0, 0, 0, 0, 0}, []bool{true, true, true, true, true, true}},
		{"jobs burst ten seconds' worth", quota.Limits{JobsPerSecond: 20}, []int{150, 50, 1}, []bool{true, true, false}},
		{"a whole batch fits the burst", quota.Limits{JobsPerSecond: 1}, []int{100, 1}, []bool{true, false}},
		{"more than a burst never fits", quota.Limits{JobsPerSecond: 1}, []int{101}, []bool{false}},
		{"no job limit", quota.Limits{JobsPerSecond: quota.Unlimited}, []int{1000, 1000}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := quota.New(tc.limits, 100)
			require.NoError(t, err)
			for i, n := range tc.take {
				var ok bool
				if n == 0 {
					_, ok = q.Request("acme", t0)
				} else {
					_, ok = q.Jobs("acme", n, t0)
				}
				require.Equal(t, tc.ok[i], ok, "take %d", i)
			}
			_, ok := q.Request("other", t0)
			require.True(t, ok, "each namespace has its own limiters")
		})
	}
}

func TestLimitersSayHowLongToWait(t *testing.T) {
	t.Parallel()
	q, err := quota.New(quota.Limits{RequestsPerSecond: 1}, 100)
	require.NoError(t, err)
	for range 2 {
		_, ok := q.Request("acme", t0)
		require.True(t, ok)
	}
	wait, ok := q.Request("acme", t0)
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
	_, ok = q.Request("acme", t0.Add(wait))
	require.True(t, ok, "a refusal takes nothing")
}
