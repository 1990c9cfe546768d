package jobstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
		err  string
	}{
		{name: "zero takes the defaults"},
		{name: "CacheSize", opts: Options{CacheSize: -1}, err: "jobstore: CacheSize is -1: must be positive, or 0 for the default 134217728"},
		{name: "MaxCheckpointAge", opts: Options{MaxCheckpointAge: -time.Hour}, err: "jobstore: MaxCheckpointAge is -1h0m0s: must be positive, or 0 for the default 20h0m0s"},
		{name: "FlushInterval", opts: Options{FlushInterval: -time.Millisecond}, err: "jobstore: FlushInterval is -1ms: must be positive, or 0 for the default 5ms"},
		{name: "FlushAfter", opts: Options{FlushAfter: -1}, err: "jobstore: FlushAfter is -1: must be positive, or 0 for the default 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := tc.opts
			err := o.validate()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				_, err = Open(tc.opts)
				require.EqualError(t, err, tc.err, "Open refuses it too")
				return
			}
			require.NoError(t, err)
			require.Equal(t, Options{CacheSize: DefaultCacheSize, MemTableSize: DefaultMemTableSize, MaxCheckpointAge: DefaultMaxCheckpointAge,
				FlushInterval: DefaultFlushInterval, FlushAfter: DefaultFlushAfter}, Options{CacheSize: o.CacheSize, MemTableSize: o.MemTableSize,
				MaxCheckpointAge: o.MaxCheckpointAge, FlushInterval: o.FlushInterval, FlushAfter: o.FlushAfter})
			require.NotNil(t, o.Now)
			require.NotNil(t, o.Logger)
		})
	}
}
