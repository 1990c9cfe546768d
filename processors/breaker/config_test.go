package breaker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		// noNamespaces leaves Config.Namespaces unset.
		noNamespaces bool
		err          string
		check        func(t *testing.T, c Config)
	}{
		{name: "zero takes the defaults", check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, 1, c.Replication)
			require.Equal(t, DefaultCheckpointInterval, c.CheckpointInterval)
			require.Equal(t, schema.NewTopics(""), c.Topics)
			require.NotNil(t, c.Storage)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{name: "EveryChange stays", cfg: Config{CheckpointInterval: EveryChange}, check: func(t *testing.T, c Config) {
			require.EqualValues(t, EveryChange, c.CheckpointInterval)
		}},
		{name: "Replication", cfg: Config{Config: processors.Config{Client: processors.Client{Replication: -1}}}, err: "breaker: Replication is -1: must be positive, or 0 for the default 1"},
		{name: "CheckpointInterval", cfg: Config{CheckpointInterval: -time.Second}, err: "breaker: CheckpointInterval is -1s: must be positive, 0 for the default 1s, or breaker.EveryChange to write every change"},
		{name: "Membership", cfg: Config{Config: processors.Config{Membership: groups.Membership{Advertise: "host"}}}, err: `breaker: Membership: advertised address "host" is not host:port`},
		{name: "Namespaces", noNamespaces: true, err: "breaker: Config.Namespaces is required: start a views.Namespaces before the processor, or pass schema.StaticNamespaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.noNamespaces {
				tc.cfg.Namespaces = schema.StaticNamespaces{} // every processor needs one
			}
			c := tc.cfg
			err := c.validate()
			if tc.noNamespaces {
				// New refuses it; validate has nothing against it.
				require.NoError(t, err)
				_, err = New(tc.cfg)
				require.EqualError(t, err, tc.err)
				return
			}
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				_, err = New(tc.cfg)
				require.EqualError(t, err, tc.err, "New refuses it too")
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}
