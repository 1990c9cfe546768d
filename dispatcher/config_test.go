package dispatcher

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/setting/settingtest"
	"github.com/chime-sched/chime/schema"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	brokers := []string{"127.0.0.1:9092"}
	build := func(c Config) error { _, err := New(c); return err }
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Cfg: Config{Brokers: brokers}, Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.NotEmpty(t, c.ID)
			require.Equal(t, DefaultBreakerRamp, c.BreakerRamp)
			require.Equal(t, DefaultCallTimeout, c.DefaultTimeout)
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
		{Name: "buffers follow MaxInFlight", Cfg: Config{Brokers: brokers, MaxInFlight: 10}, Check: func(t *testing.T, c Config) {
			require.Equal(t, 40, c.MaxBuffered)
			require.Equal(t, 20, c.MaxQueued)
		}},
		{Name: "a set MaxBuffered sets MaxQueued's default", Cfg: Config{Brokers: brokers, MaxBuffered: 1}, Check: func(t *testing.T, c Config) {
			require.Equal(t, 1, c.MaxBuffered)
			require.Equal(t, 1, c.MaxQueued, "at least one")
		}},
		{Name: "Off stays", Cfg: Config{Brokers: brokers, DedupSize: Off}, Check: func(t *testing.T, c Config) {
			require.Equal(t, Off, c.DedupSize)
		}},
		{Name: "no brokers", Err: "dispatcher: no brokers: set Config.Brokers"},
		{Name: "BreakerRamp", Cfg: Config{Brokers: brokers, BreakerRamp: -time.Second}, Err: "dispatcher: BreakerRamp is -1s: must be positive, or 0 for the default 5s"},
		{Name: "DefaultTimeout", Cfg: Config{Brokers: brokers, DefaultTimeout: -time.Second}, Err: "dispatcher: DefaultTimeout is -1s: must be positive, or 0 for the default 10s"},
		{Name: "DefaultTimeout over the limit", Cfg: Config{Brokers: brokers, DefaultTimeout: schema.MaxHTTPTimeout + time.Second}, Err: "dispatcher: DefaultTimeout is 1m1s: a callback's timeout is at most 1m0s (schema.MaxHTTPTimeout)"},
		{Name: "IdleConnTimeout", Cfg: Config{Brokers: brokers, IdleConnTimeout: -time.Second}, Err: "dispatcher: IdleConnTimeout is -1s: must be positive, or 0 for the default 4s"},
		{Name: "MaxInFlight", Cfg: Config{Brokers: brokers, MaxInFlight: -1}, Err: "dispatcher: MaxInFlight is -1: must be positive, or 0 for the default 1024"},
		{Name: "AdmissionWait", Cfg: Config{Brokers: brokers, AdmissionWait: -time.Second}, Err: "dispatcher: AdmissionWait is -1s: must be positive, or 0 for the default 2s"},
		{Name: "DeferDelay", Cfg: Config{Brokers: brokers, DeferDelay: -time.Second}, Err: "dispatcher: DeferDelay is -1s: must be positive, or 0 for the default 1s"},
		{Name: "MaxBuffered", Cfg: Config{Brokers: brokers, MaxBuffered: -1}, Err: "dispatcher: MaxBuffered is -1: must be positive, or 0 for the default 4096"},
		{Name: "MaxQueued", Cfg: Config{Brokers: brokers, MaxQueued: -1}, Err: "dispatcher: MaxQueued is -1: must be positive, or 0 for the default 2048"},
		{Name: "CommitInterval", Cfg: Config{Brokers: brokers, CommitInterval: -time.Second}, Err: "dispatcher: CommitInterval is -1s: must be positive, or 0 for the default 500ms"},
		{Name: "HoldTick", Cfg: Config{Brokers: brokers, HoldTick: -time.Second}, Err: "dispatcher: HoldTick is -1s: must be positive, 0 for the default 20ms, or dispatcher.Off to start each held due at its own fire_at"},
		{Name: "RevokeWait", Cfg: Config{Brokers: brokers, RevokeWait: -time.Second}, Err: "dispatcher: RevokeWait is -1s: must be positive, or 0 for the default 5s"},
		{Name: "DedupSize", Cfg: Config{Brokers: brokers, DedupSize: -5}, Err: "dispatcher: DedupSize is -5: must be positive, 0 for the default 100000, or dispatcher.Off to remember none"},
		{Name: "BodySnippet", Cfg: Config{Brokers: brokers, BodySnippet: -1}, Err: "dispatcher: BodySnippet is -1: must be positive, or 0 for the default 1024"},
		{Name: "Membership", Cfg: Config{Brokers: brokers, Membership: groups.Membership{InstanceID: "a b"}}, Err: `dispatcher: Membership: instance ID "a b": ' ' is not allowed (letters, digits, '.', '_' and '-')`},
	})
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
		"IdleConnTimeout": dur(DefaultIdleConnTimeout),
		"MaxInFlight":     strconv.Itoa(DefaultMaxInFlight),
		"AdmissionWait":   dur(DefaultAdmissionWait),
		"DeferDelay":      dur(DefaultDeferDelay),
		"MaxBuffered":     strconv.Itoa(BufferedPerInFlight * DefaultMaxInFlight),
		"MaxQueued":       strconv.Itoa(BufferedPerInFlight * DefaultMaxInFlight / 2),
		"CommitInterval":  dur(DefaultCommitInterval),
		"RevokeWait":      dur(DefaultRevokeWait),
		"HoldTick":        dur(DefaultHoldTick),
		"DedupSize":       strconv.Itoa(DefaultDedupSize),
		"BodySnippet":     strconv.Itoa(DefaultBodySnippet),
		"BreakerRamp":     dur(DefaultBreakerRamp),
	} {
		require.Contains(t, doc, "`"+field+"` "+want, "docs/dispatcher.md: %s", field)
	}
	ns := schema.NamespaceDefaults()
	require.Contains(t, doc, strconv.Itoa(int(ns.GetRetry().GetMaxAttempts()))+" attempts, "+strconv.Itoa(int(ns.GetMaxConcurrency()))+" concurrent calls")
}
