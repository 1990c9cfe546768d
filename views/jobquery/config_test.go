package jobquery

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/views/jobquery/signature"
)

func TestRouterConfigValidate(t *testing.T) {
	t.Parallel()
	full := func(mutate func(*RouterConfig)) RouterConfig {
		// validate only checks that an admin client is given.
		c := RouterConfig{Admin: kadm.NewClient(nil), Group: "g", Topic: "t", Partitions: 4, Secret: strings.Repeat("s", signature.MinSecretLen)}
		if mutate != nil {
			mutate(&c)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		mutate func(*RouterConfig)
		err    string
	}{
		{name: "zero takes the defaults"},
		{name: "no partitions", mutate: func(c *RouterConfig) { c.Partitions = 0 }, err: "jobquery: RouterConfig needs Admin, Group, Topic and Partitions"},
		{name: "short secret", mutate: func(c *RouterConfig) { c.Secret = "x" }, err: "jobquery: the query secret has 1 characters; it needs at least 16"},
		{name: "CallTimeout", mutate: func(c *RouterConfig) { c.CallTimeout = -time.Second }, err: "jobquery: CallTimeout is -1s: must be positive, or 0 for the default 3s"},
		{name: "MaxAge", mutate: func(c *RouterConfig) { c.MaxAge = -time.Second }, err: "jobquery: MaxAge is -1s: must be positive, or 0 for the default 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := full(tc.mutate)
			err := c.validate()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				_, err = NewRouter(full(tc.mutate))
				require.EqualError(t, err, tc.err, "NewRouter refuses it too")
				return
			}
			require.NoError(t, err)
			require.Equal(t, DefaultCallTimeout, c.CallTimeout)
			require.Equal(t, DefaultMaxAge, c.MaxAge)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		})
	}
}
