package namespaces

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
		err  string
	}{
		{name: "zero takes the defaults"},
		{name: "Replication", cfg: Config{Config: processors.Config{Client: processors.Client{Replication: -2}}}, err: "namespaces: Replication is -2: must be positive, or 0 for the default 1"},
		{name: "Membership", cfg: Config{Config: processors.Config{Membership: groups.Membership{SessionTimeout: -time.Second}}}, err: "namespaces: Membership: session timeout -1s is below 2s (0 takes the default 6s)"},
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
			require.Equal(t, 1, c.Replication)
			require.Equal(t, schema.NewTopics(""), c.Topics)
			require.NotNil(t, c.Storage)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		})
	}
}
