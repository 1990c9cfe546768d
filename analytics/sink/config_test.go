package sink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/setting/settingtest"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	// validate only checks that a store is given; it does not use it.
	store := &analytics.Store{}
	brokers := []string{"127.0.0.1:9092"}
	build := func(c Config) error { _, err := New(c); return err }
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Cfg: Config{Brokers: brokers, Store: store}, Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, DefaultBatchSize, c.BatchSize)
			require.Equal(t, DefaultFlushInterval, c.FlushInterval)
			require.Equal(t, DefaultMaxBackoff, c.MaxBackoff)
			require.Equal(t, schema.NewTopics(""), c.Topics, "the same topics as every other part")
			require.NotNil(t, c.Logger)
		}},
		{Name: "no brokers", Cfg: Config{Store: store}, Err: "sink: no Kafka brokers"},
		{Name: "no store", Cfg: Config{Brokers: brokers}, Err: "sink: no analytics store"},
		{Name: "BatchSize", Cfg: Config{Brokers: brokers, Store: store, BatchSize: -1}, Err: "sink: BatchSize is -1: must be positive, or 0 for the default 50000"},
		{Name: "FlushInterval", Cfg: Config{Brokers: brokers, Store: store, FlushInterval: -time.Second}, Err: "sink: FlushInterval is -1s: must be positive, or 0 for the default 1s"},
		{Name: "MaxBackoff", Cfg: Config{Brokers: brokers, Store: store, MaxBackoff: -time.Second}, Err: "sink: MaxBackoff is -1s: must be positive, or 0 for the default 10s"},
		{Name: "Membership", Cfg: Config{Brokers: brokers, Store: store, Membership: groups.Membership{SessionTimeout: time.Second}}, Err: "sink: Membership: session timeout 1s is below 2s (0 takes the default 6s)"},
	})
}
