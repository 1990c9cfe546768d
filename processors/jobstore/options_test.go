package jobstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/setting/settingtest"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	open := func(o Options) error { _, err := Open(o); return err }
	settingtest.Validate(t, (*Options).validate, open, []settingtest.Case[Options]{
		{Name: "zero takes the defaults", Check: func(t *testing.T, o Options) {
			require.Equal(t, Options{CacheSize: DefaultCacheSize, MemTableSize: DefaultMemTableSize, MaxCheckpointAge: DefaultMaxCheckpointAge,
				FlushInterval: DefaultFlushInterval, FlushAfter: DefaultFlushAfter}, Options{CacheSize: o.CacheSize, MemTableSize: o.MemTableSize,
				MaxCheckpointAge: o.MaxCheckpointAge, FlushInterval: o.FlushInterval, FlushAfter: o.FlushAfter})
			require.NotNil(t, o.Now)
			require.NotNil(t, o.Logger)
		}},
		{Name: "CacheSize", Cfg: Options{CacheSize: -1}, Err: "jobstore: CacheSize is -1: must be positive, or 0 for the default 134217728"},
		{Name: "MaxCheckpointAge", Cfg: Options{MaxCheckpointAge: -time.Hour}, Err: "jobstore: MaxCheckpointAge is -1h0m0s: must be positive, or 0 for the default 20h0m0s"},
		{Name: "FlushInterval", Cfg: Options{FlushInterval: -time.Millisecond}, Err: "jobstore: FlushInterval is -1ms: must be positive, or 0 for the default 5ms"},
		{Name: "FlushAfter", Cfg: Options{FlushAfter: -1}, Err: "jobstore: FlushAfter is -1: must be positive, or 0 for the default 4096"},
	})
}
