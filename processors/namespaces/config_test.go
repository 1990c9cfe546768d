package namespaces

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
	build := func(c Config) error { _, err := New(c); return err }
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, 1, c.Replication)
			require.Equal(t, schema.NewTopics(""), c.Topics)
			require.NotNil(t, c.Storage)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{Name: "Replication", Cfg: Config{Config: processors.Config{Client: processors.Client{Replication: -2}}}, Err: "namespaces: Replication is -2: must be positive, or 0 for the default 1"},
		{Name: "Membership", Cfg: Config{Config: processors.Config{Membership: groups.Membership{SessionTimeout: -time.Second}}}, Err: "namespaces: Membership: session timeout -1s is below 2s (0 takes the default 6s)"},
	})
}
