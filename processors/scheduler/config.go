package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/chime-sched/chime/schema/schedule"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
)

// Config configures a scheduler instance: what every processor shares
// (processors.Config; Client.ClientID defaults to DefaultClientID, and the
// Registerer, if set, gets the scheduler's metrics: fire lag, fires,
// pending timers) and the scheduler's own settings. A field left at its
// zero value takes the default named on it; a negative one is refused by
// New, except the value Off (or Keep) where a field says it takes it.
type Config struct {
	processors.Config
	// LocalState is the table's store on disk (see LocalState); the
	// caller opens and closes it. nil keeps the table in memory, recovered
	// from Kafka at every start.
	LocalState *LocalState
	// TimerWindow is how far ahead of the clock the timers are held in
	// memory; beyond it, a pending job costs only disk. Default
	// DefaultTimerWindow.
	TimerWindow time.Duration
	// FireLead is how long before its time an HTTP fire's due event may be
	// emitted: the dispatcher holds it until its fire_at. A burst of fires
	// due at one instant is then decided before the instant, not in the
	// seconds after it. A cancel, pause or update applied before the
	// fire's time recalls it (recall.go). Default DefaultFireLead; Off
	// emits at the time.
	FireLead time.Duration
	// LeadRound rounds an HTTP fire's tick (its time less FireLead) down
	// to a multiple of itself, so the fires due within one round leave in
	// one tick round of the pump: a due record per due partition and
	// round, not per fire, at a steady rate as in a burst (at 2,000 fires
	// a second over 6 partitions, 0.96 due records a fire became a few
	// hundredths). A due event then leaves between FireLead and FireLead +
	// LeadRound before its time. Default DefaultLeadRound; Off ticks each
	// fire exactly FireLead early.
	LeadRound time.Duration
	// RecallMargin: a cancel, pause or update recalls a fire's due event
	// emitted ahead of its time if it is applied more than this before the
	// fire's time; nearer, the dispatcher may be calling already and the
	// fire goes out as emitted. Default DefaultRecallMargin.
	RecallMargin time.Duration

	// Namespaces reads the namespace configs (a job without its own
	// relevancy window takes its namespace's). Required: a views.Namespaces
	// the caller starts before the scheduler and stops after it
	// (lifecycle.Group), or a fixed schema.StaticNamespaces.
	Namespaces schema.NamespaceSource

	// KafkaTargetTopics may be written by Kafka-target jobs, besides the
	// breaker's timer topic.
	KafkaTargetTopics []string
	// TerminalRetention keeps completed, cancelled and dead jobs readable
	// this long before their row is removed. Default
	// schema.DefaultJobRetention; Keep keeps them.
	TerminalRetention time.Duration
	// TickResend is how long the pump waits for a row to change after
	// sending its tick before sending it again. Default DefaultTickResend.
	TickResend time.Duration
	// TickBatch bounds the ticks one pump pass sends. Default
	// DefaultTickBatch.
	TickBatch int
	// PumpIdle bounds how long a pump sleeps with nothing due (a write
	// that brings a timer forward wakes it at once). Default
	// DefaultPumpIdle.
	PumpIdle time.Duration
	// MaxOpenFires bounds the fires per job awaiting their outcome.
	// Default schema.MaxOpenFires (the API refuses triggers at that one).
	MaxOpenFires int
	// MaxRowBytes is the budget of a job's row (bound.go). Default
	// schema.MaxRowBytes.
	MaxRowBytes int
	// NamespaceWait is how long a create for a namespace the scheduler
	// does not know is held before it is rejected (nswait.go). Default
	// DefaultNamespaceWait.
	NamespaceWait time.Duration
	// CatchupScanLimit bounds the occurrences counted one by one when a
	// cron job catches up after downtime. Default DefaultCatchupScanLimit.
	CatchupScanLimit int
	// SweepInterval is how often every owned row is visited as a safety
	// net: a row whose timer is more than SweepOverdue in the past is
	// handled as if its tick had come. The pump is the timer; the sweep
	// only catches what it somehow missed. Default DefaultSweepInterval;
	// Off turns the sweep off.
	SweepInterval time.Duration
	// SweepOverdue is how late a timer must be for the sweep to act.
	// Default DefaultSweepOverdue.
	SweepOverdue time.Duration
	// AckTimeout is how long a fire waits for the dispatcher's retry,
	// defer or ack before its due event is emitted again (doubling per
	// redelivery, at most 1h). It recovers a due event lost in a crash.
	// Default DefaultAckTimeout; Off turns redelivery off.
	AckTimeout time.Duration
	// FlowBacklog is the dispatchers' backlog (backlog.go) beyond which
	// the pump holds fires back: while every busy partition of the due
	// topic is more than this behind, the pump takes no timers (pump.go,
	// heldBack), so due events leave about as fast as the dispatchers
	// complete them and the rows wait pending, instead of being fired,
	// queued and held awaiting an answer. Jobs are as late either way;
	// held back, each costs no more than at a rate chime keeps up with.
	// Default DefaultFlowBacklog; Off never holds back.
	FlowBacklog time.Duration
	// ConfirmAfter is how long a Kafka-target write stays in its row
	// before it counts as stored (chimev1.Delivery): longer than a failed
	// write can take to fail the processor (sarama: up to 4 tries of a 30 s
	// network timeout). Until then a scheduler restart writes it again.
	// Default DefaultConfirmAfter.
	ConfirmAfter time.Duration
	// FireEvents also writes a job event for every fire, and the
	// COMPLETED event of a one-shot job whose fire succeeded (the outcomes
	// stream already records every attempt and its result). Default off.
	FireEvents bool

	// missTimer keeps the timers of the keys it is true for out of the
	// window, as a bug would: unit tests of the sweep.
	missTimer func(key string) bool
	// testProducer replaces the Kafka producer (goka's tester's).
	testProducer goka.ProducerBuilder
	// autoConfirm: no Kafka producer confirms the table's writes (goka's
	// tester); the store takes them as confirmed when made.
	autoConfirm bool
	// extraOptions are appended to the goka options (unit tests).
	extraOptions []goka.ProcessorOption
}

// Off, given to a Config field that says it takes it (FireLead,
// SweepInterval, AckTimeout), turns what the field bounds
// off; 0 takes the default instead. Code reads such a field as "on when
// positive".
const Off = -1

// Keep, as Config.TerminalRetention, keeps ended jobs' rows for ever.
const Keep = -1

// The defaults of Config's fields (docs/guarantees.md lists them; a test
// holds it to these).
const (
	DefaultClientID         = "chime-scheduler"
	DefaultTimerWindow      = time.Minute
	DefaultFireLead         = 2 * time.Second
	DefaultLeadRound        = 100 * time.Millisecond
	DefaultRecallMargin     = 100 * time.Millisecond
	DefaultTickResend       = 10 * time.Second
	DefaultTickBatch        = 4096
	DefaultPumpIdle         = 5 * time.Second
	DefaultNamespaceWait    = time.Minute
	DefaultCatchupScanLimit = schedule.DefaultScanLimit
	DefaultSweepInterval    = 5 * time.Minute
	DefaultSweepOverdue     = time.Minute
	DefaultAckTimeout       = 2 * time.Minute
	DefaultFlowBacklog      = 5 * time.Second
	DefaultConfirmAfter     = 3 * time.Minute
)

// validate applies the defaults to the fields left unset and refuses the
// values the scheduler cannot work with, naming each.
func (c *Config) validate() error {
	const o = "scheduler"
	err := errors.Join(
		c.Config.Validate(o, DefaultClientID),
		setting.Positive(o, "TimerWindow", &c.TimerWindow, DefaultTimerWindow),
		setting.PositiveOr(o, "FireLead", &c.FireLead, DefaultFireLead, Off, "scheduler.Off", "to emit due events at their time"),
		setting.PositiveOr(o, "LeadRound", &c.LeadRound, DefaultLeadRound, Off, "scheduler.Off", "to tick each fire exactly FireLead early"),
		setting.Positive(o, "RecallMargin", &c.RecallMargin, DefaultRecallMargin),
		setting.PositiveOr(o, "TerminalRetention", &c.TerminalRetention, schema.DefaultJobRetention, Keep, "scheduler.Keep", "to keep ended jobs"),
		setting.Positive(o, "TickResend", &c.TickResend, DefaultTickResend),
		setting.Positive(o, "TickBatch", &c.TickBatch, DefaultTickBatch),
		setting.Positive(o, "PumpIdle", &c.PumpIdle, DefaultPumpIdle),
		setting.Positive(o, "MaxOpenFires", &c.MaxOpenFires, schema.MaxOpenFires),
		setting.Positive(o, "MaxRowBytes", &c.MaxRowBytes, schema.MaxRowBytes),
		setting.Positive(o, "NamespaceWait", &c.NamespaceWait, DefaultNamespaceWait),
		setting.Positive(o, "CatchupScanLimit", &c.CatchupScanLimit, DefaultCatchupScanLimit),
		setting.PositiveOr(o, "SweepInterval", &c.SweepInterval, DefaultSweepInterval, Off, "scheduler.Off", "to turn the sweep off"),
		setting.Positive(o, "SweepOverdue", &c.SweepOverdue, DefaultSweepOverdue),
		setting.PositiveOr(o, "AckTimeout", &c.AckTimeout, DefaultAckTimeout, Off, "scheduler.Off", "to turn redelivery off"),
		setting.Positive(o, "ConfirmAfter", &c.ConfirmAfter, DefaultConfirmAfter),
		setting.PositiveOr(o, "FlowBacklog", &c.FlowBacklog, DefaultFlowBacklog, Off, "scheduler.Off", "never to hold fires back"),
	)
	// A fire emitted up to maxLead ahead of its time is not acknowledged
	// before its time: an AckTimeout within the lead would redeliver it
	// in the decision that emits it.
	if lead := c.maxLead(); err == nil && c.AckTimeout > 0 && lead > 0 && c.AckTimeout <= lead {
		err = fmt.Errorf("scheduler: AckTimeout is %s: must be longer than FireLead and LeadRound together (%s), or scheduler.Off", c.AckTimeout, lead)
	}
	return err
}

// maxLead is the most an HTTP fire's due event leaves before its time:
// FireLead, and LeadRound, since its tick is rounded down to a multiple of
// it (0 when fires are not emitted ahead).
func (c *Config) maxLead() time.Duration {
	if c.FireLead <= 0 {
		return 0
	}
	return c.FireLead + max(c.LeadRound, 0)
}

// leadTick is when an HTTP fire's timer at t is ticked: FireLead before
// it, rounded down to a multiple of LeadRound (since the zero time, so
// every scheduler process rounds to the same instants).
func (c *Config) leadTick(t time.Time) time.Time {
	at := t.Add(-c.FireLead)
	if c.LeadRound > 0 {
		at = at.Truncate(c.LeadRound)
	}
	return at
}
