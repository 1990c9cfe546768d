package sink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	// validate only checks that a store is given; it does not use it.
	store := &analytics.Store{}
	brokers := []string{"127.0.0.1:9092"}
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{name: "zero takes the defaults", cfg: Config{Brokers: brokers, Store: store}},
		{name: "no brokers", cfg: Config{Store: store}, err: "sink: no Kafka brokers"},
		{name: "no store", cfg: Config{Brokers: brokers}, err: "sink: no analytics store"},
		{name: "BatchSize", cfg: Config{Brokers: brokers, Store: store, BatchSize: -1}, err: "sink: BatchSize is -1: must be positive, or 0 for the default 50000"},
		{name: "FlushInterval", cfg: Config{Brokers: brokers, Store: store, FlushInterval: -time.Second}, err: "sink: FlushInterval is -1s: must be positive, or 0 for the default 1s"},
		{name: "MaxBackoff", cfg: Config{Brokers: brokers, Store: store, MaxBackoff: -time.Second}, err: "sink: MaxBackoff is -1s: must be positive, or 0 for the default 10s"},
		{name: "Membership", cfg: Config{Brokers: brokers, Store: store, Membership: groups.Membership{SessionTimeout: time.Second}}, err: "sink: Membership: session timeout 1s is below 2s (0 takes the default 6s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.cfg
			err := c.validate()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				_, err = New(tc.cfg)
				require.EqualError(t, err, tc.err, "New refuses it too")
				return
			}
			require.NoError(t, err)
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, DefaultBatchSize, c.BatchSize)
			require.Equal(t, DefaultFlushInterval, c.FlushInterval)
			require.Equal(t, DefaultMaxBackoff, c.MaxBackoff)
			require.Equal(t, schema.NewTopics(""), c.Topics, "the same topics as every other part")
			require.NotNil(t, c.Logger)
		})
	}
}
