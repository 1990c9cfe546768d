package setting_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/setting"
)

func TestPositive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		in, out time.Duration
		err     string
	}{
		{"zero takes the default", 0, time.Minute, ""},
		{"positive stays", time.Second, time.Second, ""},
		{"negative is refused", -time.Second, -time.Second, "x: Wait is -1s: must be positive, or 0 for the default 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.in
			err := setting.Positive("x", "Wait", &v, time.Minute)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.out, v)
		})
	}
}

func TestPositiveOr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		in, out int
		err     string
	}{
		{"zero takes the default", 0, 10, ""},
		{"positive stays", 3, 3, ""},
		{"special stays", -1, -1, ""},
		{"other negative is refused", -2, -2, "x: Size is -2: must be positive, 0 for the default 10, or x.Off to turn it off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.in
			err := setting.PositiveOr("x", "Size", &v, 10, -1, "x.Off", "to turn it off")
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.out, v)
		})
	}
}

func TestAtLeast(t *testing.T) {
	t.Parallel()
	v := 0
	require.NoError(t, setting.AtLeast("x", "N", &v, 8, 2, "two halves"))
	require.Equal(t, 8, v)
	v = 1
	require.EqualError(t, setting.AtLeast("x", "N", &v, 8, 2, "two halves"), "x: N is 1: must be at least 2 (two halves), or 0 for the default 8")
}

func TestFloatsMustBeFinite(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := f
		require.ErrorContains(t, setting.Positive("x", "Rate", &v, 1), "x: Rate is ")
		require.ErrorContains(t, setting.PositiveOr("x", "Rate", &v, 1, -1, "x.Unlimited", "for no limit"), "must be a finite number")
	}
}
