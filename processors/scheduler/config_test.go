package scheduler

import (
	"os"
	"regexp"
	"strconv"
	"strings"
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
	build := func(c Config) error {
		c.Namespaces = schema.StaticNamespaces{} // required by New, not by validate
		_, err := New(c)
		return err
	}
	settingtest.Validate(t, (*Config).validate, build, []settingtest.Case[Config]{
		{Name: "zero takes the defaults", Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultClientID, c.ClientID)
			require.Equal(t, 1, c.Replication)
			require.Equal(t, DefaultTimerWindow, c.TimerWindow)
			require.Equal(t, DefaultFireLead, c.FireLead)
			require.Equal(t, DefaultLeadRound, c.LeadRound)
			require.Equal(t, schema.DefaultJobRetention, c.TerminalRetention)
			require.Equal(t, DefaultTickResend, c.TickResend)
			require.Equal(t, DefaultTickBatch, c.TickBatch)
			require.Equal(t, DefaultPumpIdle, c.PumpIdle)
			require.Equal(t, schema.MaxOpenFires, c.MaxOpenFires)
			require.Equal(t, schema.MaxRowBytes, c.MaxRowBytes)
			require.Equal(t, DefaultNamespaceWait, c.NamespaceWait)
			require.Equal(t, DefaultCatchupScanLimit, c.CatchupScanLimit)
			require.Equal(t, DefaultSweepInterval, c.SweepInterval)
			require.Equal(t, DefaultSweepOverdue, c.SweepOverdue)
			require.Equal(t, DefaultAckTimeout, c.AckTimeout)
			require.Equal(t, DefaultConfirmAfter, c.ConfirmAfter)
			require.NotNil(t, c.Now)
			require.NotNil(t, c.Logger)
			require.Equal(t, schema.NewTopics(""), c.Topics)
		}},
		{Name: "set values stay", Cfg: Config{TickBatch: 7, AckTimeout: 5 * time.Second, TerminalRetention: time.Hour}, Check: func(t *testing.T, c Config) {
			require.Equal(t, 7, c.TickBatch)
			require.Equal(t, 5*time.Second, c.AckTimeout)
			require.Equal(t, time.Hour, c.TerminalRetention)
		}},
		{Name: "Off and Keep stay", Cfg: Config{FireLead: Off, LeadRound: Off, SweepInterval: Off, AckTimeout: Off, TerminalRetention: Keep}, Check: func(t *testing.T, c Config) {
			require.EqualValues(t, Off, c.FireLead)
			require.EqualValues(t, Off, c.LeadRound)
			require.EqualValues(t, Off, c.SweepInterval)
			require.EqualValues(t, Off, c.AckTimeout)
			require.EqualValues(t, Keep, c.TerminalRetention)
		}},
		{Name: "TickBatch", Cfg: Config{TickBatch: -1}, Err: "scheduler: TickBatch is -1: must be positive, or 0 for the default 4096"},
		{Name: "AckTimeout within FireLead", Cfg: Config{AckTimeout: time.Second}, Err: "scheduler: AckTimeout is 1s: must be longer than FireLead and LeadRound together (2.1s), or scheduler.Off"},
		{Name: "AckTimeout within FireLead and LeadRound", Cfg: Config{AckTimeout: 2 * time.Second, LeadRound: time.Second}, Err: "scheduler: AckTimeout is 2s: must be longer than FireLead and LeadRound together (3s), or scheduler.Off"},
		{Name: "AckTimeout beyond FireLead, LeadRound Off", Cfg: Config{AckTimeout: 2*time.Second + time.Millisecond, LeadRound: Off}, Check: func(t *testing.T, c Config) {
			require.Equal(t, DefaultFireLead, c.maxLead())
		}},
		{Name: "LeadRound", Cfg: Config{LeadRound: -time.Second}, Err: "scheduler: LeadRound is -1s: must be positive, 0 for the default 100ms, or scheduler.Off to tick each fire exactly FireLead early"},
		{Name: "Replication", Cfg: Config{Config: processors.Config{Client: processors.Client{Replication: -3}}}, Err: "scheduler: Replication is -3: must be positive, or 0 for the default 1"},
		{Name: "TimerWindow", Cfg: Config{TimerWindow: -time.Second}, Err: "scheduler: TimerWindow is -1s: must be positive, or 0 for the default 1m0s"},
		{Name: "TickResend", Cfg: Config{TickResend: -time.Second}, Err: "scheduler: TickResend is -1s: must be positive, or 0 for the default 10s"},
		{Name: "PumpIdle", Cfg: Config{PumpIdle: -time.Second}, Err: "scheduler: PumpIdle is -1s: must be positive, or 0 for the default 5s"},
		{Name: "MaxOpenFires", Cfg: Config{MaxOpenFires: -1}, Err: "scheduler: MaxOpenFires is -1: must be positive, or 0 for the default 256"},
		{Name: "MaxRowBytes", Cfg: Config{MaxRowBytes: -1}, Err: "scheduler: MaxRowBytes is -1: must be positive, or 0 for the default 786432"},
		{Name: "NamespaceWait", Cfg: Config{NamespaceWait: -time.Second}, Err: "scheduler: NamespaceWait is -1s: must be positive, or 0 for the default 1m0s"},
		{Name: "CatchupScanLimit", Cfg: Config{CatchupScanLimit: -1}, Err: "scheduler: CatchupScanLimit is -1: must be positive, or 0 for the default 10000"},
		{Name: "SweepOverdue", Cfg: Config{SweepOverdue: -time.Second}, Err: "scheduler: SweepOverdue is -1s: must be positive, or 0 for the default 1m0s"},
		{Name: "ConfirmAfter", Cfg: Config{ConfirmAfter: -time.Second}, Err: "scheduler: ConfirmAfter is -1s: must be positive, or 0 for the default 3m0s"},
		{Name: "FireLead", Cfg: Config{FireLead: -time.Second}, Err: "scheduler: FireLead is -1s: must be positive, 0 for the default 2s, or scheduler.Off to emit due events at their time"},
		{Name: "TerminalRetention", Cfg: Config{TerminalRetention: -time.Hour}, Err: "scheduler: TerminalRetention is -1h0m0s: must be positive, 0 for the default 168h0m0s, or scheduler.Keep to keep ended jobs"},
		{Name: "SweepInterval", Cfg: Config{SweepInterval: -time.Minute}, Err: "scheduler: SweepInterval is -1m0s: must be positive, 0 for the default 5m0s, or scheduler.Off to turn the sweep off"},
		{Name: "AckTimeout", Cfg: Config{AckTimeout: -time.Minute}, Err: "scheduler: AckTimeout is -1m0s: must be positive, 0 for the default 2m0s, or scheduler.Off to turn redelivery off"},
		{Name: "Membership", Cfg: Config{Config: processors.Config{Membership: groups.Membership{SessionTimeout: time.Second}}}, Err: "scheduler: Membership: session timeout 1s is below 2s (0 takes the default 6s)"},
		{Name: "every refusal at once", Cfg: Config{TickBatch: -1, PumpIdle: -1}, Err: "scheduler: TickBatch is -1: must be positive, or 0 for the default 4096\nscheduler: PumpIdle is -1ns: must be positive, or 0 for the default 5s"},
	})
}

// TestNewRefusesBadConfig: New reports validate's refusal before it
// connects or opens anything.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{TickBatch: -1, Namespaces: schema.StaticNamespaces{}})
	require.EqualError(t, err, "scheduler: TickBatch is -1: must be positive, or 0 for the default 4096")
	// Nothing starts a view behind the caller's back: the caller passes one.
	_, err = New(Config{})
	require.EqualError(t, err, "scheduler: Config.Namespaces is required: start a views.Namespaces before the scheduler, or pass schema.StaticNamespaces")
}

// TestGuaranteesListDefaults holds the scheduler table of
// docs/guarantees.md to the defaults.
// human writes a default as the docs do: "7 days", "2 min", "10 s".
func human(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
	}
}

// count writes a number as the docs do: "10,000".
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestGuaranteesListDefaults(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/guarantees.md")
	require.NoError(t, err)
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\| ([^|]+) \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	for field, want := range map[string]string{
		"MaxOpenFires":      count(schema.MaxOpenFires) + " (`schema.MaxOpenFires`)",
		"MaxRowBytes":       count(schema.MaxRowBytes>>10) + " KiB (`schema.MaxRowBytes`)",
		"NamespaceWait":     human(DefaultNamespaceWait),
		"AckTimeout":        human(DefaultAckTimeout),
		"FlowBacklog":       human(DefaultFlowBacklog),
		"CatchupScanLimit":  count(DefaultCatchupScanLimit),
		"TickResend":        human(DefaultTickResend),
		"TerminalRetention": human(schema.DefaultJobRetention) + " (`CHIME_JOB_RETENTION`)",
		"FireLead":          human(DefaultFireLead),
		"LeadRound":         human(DefaultLeadRound),
		"RecallMargin":      human(DefaultRecallMargin),
		"PumpIdle":          human(DefaultPumpIdle),
		"SweepInterval":     human(DefaultSweepInterval),
		"FireEvents":        "off",
	} {
		require.Contains(t, rows, field, "docs/guarantees.md has no row for %s", field)
		require.Equal(t, want, rows[field], "docs/guarantees.md: %s", field)
	}
	require.NotContains(t, rows, "DefaultRelevancyWindow", "the scheduler has no default window: a namespace's relevancy_window is the one")
}
