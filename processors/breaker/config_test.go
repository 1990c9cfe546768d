package breaker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/setting/settingtest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	// Every processor needs its namespaces; validate has nothing against
	// their absence, New refuses it (TestNewNeedsNamespaces).
	build := func(c Config) error {
		c.Namespaces = schema.StaticNamespaces{}
		_, err := New(c)
		return err
	}
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, 1, c.Replication)
			require.Equal(t, DefaultCheckpointInterval, c.CheckpointInterval)
			require.Equal(t, schema.NewTopics(""), c.Topics)
			require.NotNil(t, c.Storage)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{Name: "EveryChange stays", Cfg: Config{CheckpointInterval: EveryChange}, Check: func(t *testing.T, c Config) {
			require.EqualValues(t, EveryChange, c.CheckpointInterval)
		}},
		{Name: "Replication", Cfg: Config{Config: processors.Config{Client: processors.Client{Replication: -1}}}, Err: "breaker: Replication is -1: must be positive, or 0 for the default 1"},
		{Name: "CheckpointInterval", Cfg: Config{CheckpointInterval: -time.Second}, Err: "breaker: CheckpointInterval is -1s: must be positive, 0 for the default 1s, or breaker.EveryChange to write every change"},
		{Name: "Membership", Cfg: Config{Config: processors.Config{Membership: groups.Membership{Advertise: "host"}}}, Err: `breaker: Membership: advertised address "host" is not host:port`},
	})
}

func TestNewNeedsNamespaces(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	require.EqualError(t, err, "breaker: Config.Namespaces is required: start a views.Namespaces before the processor, or pass schema.StaticNamespaces")
}
