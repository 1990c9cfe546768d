package jobquery

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/internal/setting/settingtest"
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
	build := func(c RouterConfig) error { _, err := NewRouter(c); return err }
	settingtest.Validate(t, (*RouterConfig).validate, build, []settingtest.Case[RouterConfig]{
		{Name: "zero takes the defaults", Cfg: full(nil), Check: func(t *testing.T, c RouterConfig) {
			require.Equal(t, DefaultCallTimeout, c.CallTimeout)
			require.Equal(t, DefaultMaxAge, c.MaxAge)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{Name: "no partitions", Cfg: full(func(c *RouterConfig) { c.Partitions = 0 }), Err: "jobquery: RouterConfig needs Admin, Group, Topic and Partitions"},
		{Name: "short secret", Cfg: full(func(c *RouterConfig) { c.Secret = "x" }), Err: "jobquery: the query secret has 1 characters; it needs at least 16"},
		{Name: "CallTimeout", Cfg: full(func(c *RouterConfig) { c.CallTimeout = -time.Second }), Err: "jobquery: CallTimeout is -1s: must be positive, or 0 for the default 3s"},
		{Name: "CallTimeout within ReadWait", Cfg: full(func(c *RouterConfig) { c.CallTimeout = ReadWait }), Err: "jobquery: CallTimeout is 2s: it must exceed ReadWait (2s), which an owner may spend reaching a read's offsets"},
		{Name: "MaxAge", Cfg: full(func(c *RouterConfig) { c.MaxAge = -time.Second }), Err: "jobquery: MaxAge is -1s: must be positive, or 0 for the default 10s"},
	})
}
