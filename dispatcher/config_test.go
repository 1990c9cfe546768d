package dispatcher

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	brokers := []string{"127.0.0.1:9092"}
	for _, tc := range []struct {
		name  string
		cfg   Config
		err   string
		check func(t *testing.T, c Config)
	}{
		{name: "zero takes the defaults", cfg: Config{Brokers: brokers}, check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.NotEmpty(t, c.ID)
			require.Equal(t, DefaultBreakerRamp, c.BreakerRamp)
			require.Equal(t, DefaultCallTimeout, c.DefaultTimeout)
			require.Equal(t, DefaultMaxTimeout, c.MaxTimeout)
			require.Equal(t, DefaultIdleConnTimeout, c.IdleConnTimeout)
			require.Equal(t, DefaultMaxInFlight, c.MaxInFlight)
			require.Equal(t, DefaultAdmissionWait, c.AdmissionWait)
			require.Equal(t, DefaultDeferDelay, c.DeferDelay)
			require.Equal(t, BufferedPerInFlight*DefaultMaxInFlight, c.MaxBuffered)
			require.Equal(t, BufferedPerInFlight*DefaultMaxInFlight/2, c.MaxQueued)
			require.Equal(t, DefaultCommitInterval, c.CommitInterval)
			require.Equal(t, DefaultRevokeWait, c.RevokeWait)
			require.Equal(t, DefaultDedupSize, c.DedupSize)
			require.Equal(t, DefaultBodySnippet, c.BodySnippet)
			require.Equal(t, schema.NewTopics(""), c.Topics)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
		}},
		{name: "buffers follow MaxInFlight", cfg: Config{Brokers: brokers, MaxInFlight: 10}, check: func(t *testing.T, c Config) {
			require.Equal(t, 40, c.MaxBuffered)
			require.Equal(t, 20, c.MaxQueued)
		}},
		{name: "a set MaxBuffered sets MaxQueued's default", cfg: Config{Brokers: brokers, MaxBuffered: 1}, check: func(t *testing.T, c Config) {
			require.Equal(t, 1, c.MaxBuffered)
			require.Equal(t, 1, c.MaxQueued, "at least one")
		}},
		{name: "Off stays", cfg: Config{Brokers: brokers, DedupSize: Off}, check: func(t *testing.T, c Config) {
			require.Equal(t, Off, c.DedupSize)
		}},
		{name: "no brokers", err: "dispatcher: no brokers: set Config.Brokers"},
		{name: "BreakerRamp", cfg: Config{Brokers: brokers, BreakerRamp: -time.Second}, err: "dispatcher: BreakerRamp is -1s: must be positive, or 0 for the default 5s"},
		{name: "DefaultTimeout", cfg: Config{Brokers: brokers, DefaultTimeout: -time.Second}, err: "dispatcher: DefaultTimeout is -1s: must be positive, or 0 for the default 10s"},
		{name: "MaxTimeout", cfg: Config{Brokers: brokers, MaxTimeout: -time.Second}, err: "dispatcher: MaxTimeout is -1s: must be positive, or 0 for the default 1m0s"},
		{name: "IdleConnTimeout", cfg: Config{Brokers: brokers, IdleConnTimeout: -time.Second}, err: "dispatcher: IdleConnTimeout is -1s: must be positive, or 0 for the default 4s"},
		{name: "MaxInFlight", cfg: Config{Brokers: brokers, MaxInFlight: -1}, err: "dispatcher: MaxInFlight is -1: must be positive, or 0 for the default 1024"},
		{name: "AdmissionWait", cfg: Config{Brokers: brokers, AdmissionWait: -time.Second}, err: "dispatcher: AdmissionWait is -1s: must be positive, or 0 for the default 2s"},
		{name: "DeferDelay", cfg: Config{Brokers: brokers, DeferDelay: -time.Second}, err: "dispatcher: DeferDelay is -1s: must be positive, or 0 for the default 1s"},
		{name: "MaxBuffered", cfg: Config{Brokers: brokers, MaxBuffered: -1}, err: "dispatcher: MaxBuffered is -1: must be positive, or 0 for the default 4096"},
		{name: "MaxQueued", cfg: Config{Brokers: brokers, MaxQueued: -1}, err: "dispatcher: MaxQueued is -1: must be positive, or 0 for the default 2048"},
		{name: "CommitInterval", cfg: Config{Brokers: brokers, CommitInterval: -time.Second}, err: "dispatcher: CommitInterval is -1s: must be positive, or 0 for the default 500ms"},
		{name: "RevokeWait", cfg: Config{Brokers: brokers, RevokeWait: -time.Second}, err: "dispatcher: RevokeWait is -1s: must be positive, or 0 for the default 5s"},
		{name: "DedupSize", cfg: Config{Brokers: brokers, DedupSize: -5}, err: "dispatcher: DedupSize is -5: must be positive, 0 for the default 100000, or dispatcher.Off to remember none"},
		{name: "BodySnippet", cfg: Config{Brokers: brokers, BodySnippet: -1}, err: "dispatcher: BodySnippet is -1: must be positive, or 0 for the default 1024"},
		{name: "Membership", cfg: Config{Brokers: brokers, Membership: groups.Membership{InstanceID: "a b"}}, err: `dispatcher: Membership: instance ID "a b": ' ' is not allowed (letters, digits, '.', '_' and '-')`},
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
			tc.check(t, c)
		})
	}
}

// TestDocsListDefaults holds docs/dispatcher.md's list of Config defaults
// to the constants.
func TestDocsListDefaults(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/dispatcher.md")
	require.NoError(t, err)
	// The list wraps lines wherever; read it as one line.
	doc := regexp.MustCompile(`\s+`).ReplaceAllString(string(raw), " ")
	dur := func(d time.Duration) string {
		if d < time.Second {
			return strconv.Itoa(int(d/time.Millisecond)) + " ms"
		}
		return strconv.Itoa(int(d/time.Second)) + " s"
	}
	for field, want := range map[string]string{
		"DefaultTimeout":  dur(DefaultCallTimeout),
		"MaxTimeout":      dur(DefaultMaxTimeout),
		"IdleConnTimeout": dur(DefaultIdleConnTimeout),
		"MaxInFlight":     strconv.Itoa(DefaultMaxInFlight),
		"AdmissionWait":   dur(DefaultAdmissionWait),
		"DeferDelay":      dur(DefaultDeferDelay),
		"MaxBuffered":     strconv.Itoa(BufferedPerInFlight * DefaultMaxInFlight),
		"MaxQueued":       strconv.Itoa(BufferedPerInFlight * DefaultMaxInFlight / 2),
		"CommitInterval":  dur(DefaultCommitInterval),
		"RevokeWait":      dur(DefaultRevokeWait),
		"DedupSize":       strconv.Itoa(DefaultDedupSize),
		"BodySnippet":     strconv.Itoa(DefaultBodySnippet),
		"BreakerRamp":     dur(DefaultBreakerRamp),
	} {
		require.Contains(t, doc, "`"+field+"` "+want, "docs/dispatcher.md: %s", field)
	}
	ns := schema.NamespaceDefaults()
	require.Contains(t, doc, strconv.Itoa(int(ns.GetRetry().GetMaxAttempts()))+" attempts, "+strconv.Itoa(int(ns.GetMaxConcurrency()))+" concurrent calls")
}
