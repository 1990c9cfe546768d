// Package breaker owns chime's circuit breaker: one per client namespace,
// decided once in the stream of callback outcomes and pushed to every
// dispatcher through the breaker table.
//
//	outcomes ─────────┐
//	breaker-timers ───┼──► [breaker] ──► table: BreakerStatus (key namespace) ──► views.Breakers ──► dispatchers (Gate)
//	breaker-commands ─┘        │   lookup: namespace-config table (thresholds)
//	                           ├──► breaker-transitions (every state change, with reason and window)
//	                           └──► job-commands: the cool-off timer, a one-shot scheduler job
//	                                whose Kafka target writes a BreakerTimer to breaker-timers
//
// The decisions are package circuit's (pure: status in, status and
// transitions out, clock injected; the dispatcher asks its Gate); this
// package is the goka wiring.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// CoolOffJobID is the scheduler job that carries a namespace's cool-off
// timer: one per namespace, re-armed (upserted) at every trip.
const CoolOffJobID = schema.ReservedJobIDPrefix + "breaker-cooloff"

// Config configures the processor. processors.Config holds what every
// processor shares (Client.ClientID defaults to DefaultClientID); its
// Registerer, if set, gets the breaker's metrics: the state of every
// namespace's breaker this instance decided, transitions, and the
// outcomes read.
type Config struct {
	processors.Config
	Storage storage.Builder // nil = in memory

	// Namespaces reads the namespace configs (the thresholds). Required:
	// a views.Namespaces the caller starts before the processor and stops
	// after it (lifecycle.Group), or a fixed schema.StaticNamespaces.
	Namespaces schema.NamespaceSource

	// CheckpointInterval bounds how often a namespace's window counts
	// alone are written to the table. A change of what the dispatchers
	// gate on (state, version, next check, probes, cool-off) is written at
	// once; the counts are kept in memory in between, so the table is not
	// rewritten for every outcome. A restart or a partition move loses at
	// most this much of the window. Default DefaultCheckpointInterval;
	// EveryChange writes every change.
	CheckpointInterval time.Duration

	// extraOptions are appended to the goka options (unit tests).
	extraOptions []goka.ProcessorOption
}

// DefaultClientID and DefaultCheckpointInterval are Config's defaults.
const (
	DefaultClientID           = "chime-breaker"
	DefaultCheckpointInterval = time.Second
)

// EveryChange, as Config.CheckpointInterval, writes a namespace's status
// to the table at every outcome (0 takes the default instead).
const EveryChange = -1

// validate applies the defaults to the fields left unset and refuses the
// values the processor cannot work with, naming each.
func (c *Config) validate() error {
	if c.Storage == nil {
		c.Storage = memstore.Builder()
	}
	return errors.Join(
		c.Config.Validate("breaker", DefaultClientID),
		setting.PositiveOr("breaker", "CheckpointInterval", &c.CheckpointInterval, DefaultCheckpointInterval, EveryChange, "breaker.EveryChange", "to write every change"),
	)
}

// Processor is the breaker processor.
type Processor struct {
	lifecycle.Base
	cfg        Config
	namespaces schema.NamespaceSource

	runner processors.Runner

	cacheMu sync.Mutex
	cache   map[string]cachedConfig

	// live holds the statuses this instance decided, by namespace, ahead
	// of the table between checkpoints. Only the goroutine of the
	// namespace's partition touches an entry; liveMu guards the map.
	liveMu sync.Mutex
	live   map[string]*liveStatus

	outcomes atomic.Uint64

	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
}

// liveStatus is a namespace's status as last decided, and when it was
// last written to the table.
type liveStatus struct {
	st        *chimev1.BreakerStatus
	partition int32
	written   time.Time
}

// cachedConfig avoids resolving the defaults for every outcome; a change
// of the namespace's configuration bumps its version.
type cachedConfig struct {
	version uint64
	cfg     circuit.Thresholds
}

// New builds the processor. It does not connect until Start.
func New(cfg Config) (*Processor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("breaker: Config.Namespaces is required: start a views.Namespaces before the processor, or pass schema.StaticNamespaces")
	}
	p := &Processor{cfg: cfg, namespaces: cfg.Namespaces, cache: map[string]cachedConfig{}, live: map[string]*liveStatus{}}
	p.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_breaker_state",
		Help: "1 for the state each namespace's breaker is in (as last decided by this instance), 0 for the others.",
	}, []string{"namespace", "state"})
	p.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_breaker_transitions_total",
		Help: "Breaker state changes, by the state entered.",
	}, []string{"to"})
	if cfg.Registerer != nil {
		outcomes := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chime_breaker_outcomes_total",
			Help: "Callback outcome records this instance read (those skipped as undecodable included).",
		}, func() float64 { return float64(p.outcomes.Load()) })
		cfg.Registerer.MustRegister(p.state, p.transitions, outcomes)
	}
	return p, nil
}

// Graph declares the processor. Inputs arrive as raw bytes and are decoded
// in the callbacks: a record that does not decode is logged and skipped,
// never a processor failure.
func (p *Processor) Graph() *goka.GroupGraph {
	t := p.cfg.Topics
	return goka.DefineGroup(goka.Group(t.BreakerGroup()),
		goka.Input(goka.Stream(t.Outcomes()), new(schema.BytesCodec), p.onOutcome),
		goka.Input(goka.Stream(t.BreakerTimers()), new(schema.BytesCodec), p.onTimer),
		goka.Input(goka.Stream(t.BreakerCommands()), new(schema.BytesCodec), p.onCommand),
		goka.Persist(new(schema.BreakerStatusCodec)),
		goka.Output(goka.Stream(t.BreakerTransitions()), new(schema.BreakerTransitionCodec)),
		// The cool-off timer is a JobCommand, marshalled here; goka's
		// hasher puts it on the partition of the scheduler row.
		goka.Output(goka.Stream(t.JobCommands()), new(schema.BytesCodec)),
		goka.Output(goka.Stream(t.Rejections()), new(schema.RejectionCodec)),
	)
}

// inputFetchWait bounds how long the breaker's input fetches wait for
// schema.BatchedFetchBytes (processors.BatchedInput): its windows span
// seconds (BreakerConfig.window, 30 s by default), so an outcome or a
// cool-off timer taken up to 100 ms later changes nothing a client sees.
const inputFetchWait = 100 * time.Millisecond

func (p *Processor) options() []goka.ProcessorOption {
	opts := processors.ProcessorOptions(p.cfg.Config)
	opts = append(opts, processors.BatchedInput(p.cfg.Config, inputFetchWait), goka.WithStorageBuilder(p.cfg.Storage), goka.WithNilHandling(goka.NilProcess),
		goka.WithRebalanceCallback(p.rebalanced))
	// After the storage: goka's tester replaces it.
	return append(opts, p.cfg.extraOptions...)
}

// Name implements lifecycle.Part.
func (p *Processor) Name() string { return "breaker" }

// Start runs the processor until Stop or ctx ends, restarting it after
// failures. It is ready (Started) once it has recovered its partitions
// the first time.
func (p *Processor) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

func (p *Processor) run(ctx context.Context, ready func()) error {
	return p.runner.Run(ctx, "breaker", p.cfg.Logger, ready, func() (*goka.Processor, error) {
		// A new processor starts from the table: what the last one kept
		// in memory past its last checkpoint is gone with it.
		p.forgetLive(nil)
		return goka.NewProcessor(p.cfg.Brokers, p.Graph(), p.options()...)
	})
}

// Ready implements lifecycle.Part: the processor runs with its partitions
// recovered now.
func (p *Processor) Ready() error {
	if err := p.Base.Ready(); err != nil {
		return err
	}
	return p.runner.Recovered()
}

// Get reads a namespace's status from this instance's local table (nil if
// the namespace is not in a partition this instance owns).
func (p *Processor) Get(ns string) (*chimev1.BreakerStatus, error) {
	proc := p.runner.Processor()
	if proc == nil {
		return nil, errors.New("breaker: not running")
	}
	v, err := proc.Get(ns)
	if err != nil || v == nil {
		return nil, err
	}
	return v.(*chimev1.BreakerStatus), nil
}

// OutcomesHandled counts the outcome records this instance has processed
// (including skipped ones), as chime_breaker_outcomes_total does.
func (p *Processor) OutcomesHandled() uint64 { return p.outcomes.Load() }

func (p *Processor) onOutcome(ctx goka.Context, msg any) {
	p.outcomes.Add(1)
	raw, _ := msg.([]byte)
	// Only the fields that decide a breaker: a whole decode would copy
	// ids, the URL and the error text of every outcome for nothing.
	o := new(chimev1.CallbackOutcome)
	if err := schema.UnmarshalOutcomeVerdict(raw, o); err != nil {
		p.skip(ctx, "outcome does not decode as chime.v1.CallbackOutcome", err)
		return
	}
	if o.GetNamespace() != "" && o.GetNamespace() != ctx.Key() {
		p.skip(ctx, fmt.Sprintf("outcome of namespace %q published under key %q", o.GetNamespace(), ctx.Key()), nil)
		return
	}
	now := p.cfg.Now()
	p.decide(ctx, now, func(st *chimev1.BreakerStatus, cfg circuit.Thresholds) (circuit.Result, bool) {
		return circuit.OnOutcome(st, cfg, o, now), false
	})
}

func (p *Processor) onTimer(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	tm := new(chimev1.BreakerTimer)
	if err := schema.UnmarshalInternal(raw, tm); err != nil {
		p.skip(ctx, "timer does not decode as chime.v1.BreakerTimer", err)
		return
	}
	if tm.GetNamespace() != ctx.Key() {
		p.skip(ctx, fmt.Sprintf("timer of namespace %q published under key %q", tm.GetNamespace(), ctx.Key()), nil)
		return
	}
	now := p.cfg.Now()
	p.decide(ctx, now, func(st *chimev1.BreakerStatus, cfg circuit.Thresholds) (circuit.Result, bool) {
		return circuit.OnTimer(st, cfg, tm, now), false
	})
}

func (p *Processor) onCommand(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	now := p.cfg.Now()
	cmd := new(chimev1.BreakerCommand)
	err := schema.UnmarshalInput(raw, cmd)
	if err != nil {
		err = fmt.Errorf("%w: does not decode as chime.v1.BreakerCommand: %v", circuit.ErrCommand, err)
	} else {
		err = circuit.ValidateCommand(ctx.Key(), cmd)
	}
	if err != nil {
		ctx.Emit(goka.Stream(p.cfg.Topics.Rejections()), ctx.Key(), command.Reject(command.Refusal{
			EventID:   "breaker-" + strconv.Itoa(int(ctx.Partition())) + "-" + strconv.FormatInt(ctx.Offset(), 10),
			CommandID: cmd.GetCommandId(),
			Namespace: cmd.GetNamespace(),
			Reason:    err.Error(),
			At:        now,
			Topic:     string(ctx.Topic()),
			Partition: ctx.Partition(),
			Offset:    ctx.Offset(),
			Raw:       raw,
		}))
		p.cfg.Logger.Info("breaker command rejected", "namespace", ctx.Key(), "reason", err)
		return
	}
	p.decide(ctx, now, func(st *chimev1.BreakerStatus, cfg circuit.Thresholds) (circuit.Result, bool) {
		res := circuit.OnCommand(st, cfg, cmd, now)
		// Written at once even when it changes nothing: the API waits
		// for the command id to answer with the resulting state.
		st.LastCommandId = cmd.GetCommandId()
		res.Changed = true
		return res, true
	})
}

func (p *Processor) skip(ctx goka.Context, what string, err error) {
	p.cfg.Logger.Warn("breaker: record skipped", "what", what, "err", err,
		"topic", string(ctx.Topic()), "partition", ctx.Partition(), "offset", ctx.Offset(), "key", ctx.Key())
}

// status is the namespace's status: as this instance last decided it, or
// from the table.
func (p *Processor) status(ctx goka.Context) *chimev1.BreakerStatus {
	p.liveMu.Lock()
	l := p.live[ctx.Key()]
	p.liveMu.Unlock()
	if l != nil && l.partition == ctx.Partition() {
		return l.st
	}
	st, ok := ctx.Value().(*chimev1.BreakerStatus)
	if !ok || st == nil {
		return circuit.NewStatus(ctx.Key())
	}
	if st.Namespace == "" {
		st.Namespace = ctx.Key()
	}
	return st
}

// rebalanced forgets the statuses of partitions this instance no longer
// owns: their next owner reads the table.
func (p *Processor) rebalanced(a goka.Assignment) { p.forgetLive(a) }

// forgetLive drops the live statuses of partitions not in keep (nil: all).
func (p *Processor) forgetLive(keep goka.Assignment) {
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	for ns, l := range p.live {
		if _, ok := keep[l.partition]; !ok {
			delete(p.live, ns)
		}
	}
}

// gateView is what the dispatchers decide on: a change of it is written to
// the table at once.
type gateView struct {
	state                         chimev1.BreakerState
	version                       uint64
	nextCheck                     int64
	probesGranted, probesSucceded uint32
	trips                         uint32
	coolOff                       time.Duration
}

func gateViewOf(st *chimev1.BreakerStatus) gateView {
	return gateView{
		state: st.GetState(), version: st.GetVersion(), nextCheck: st.GetNextCheckAt().AsTime().UnixNano(),
		probesGranted: st.GetProbesGranted(), probesSucceded: st.GetProbesSucceeded(),
		trips: st.GetConsecutiveTrips(), coolOff: st.GetCoolOff().AsDuration(),
	}
}

// config reads the namespace's thresholds from the namespace-config table.
func (p *Processor) config(ctx goka.Context) circuit.Thresholds {
	ns := ctx.Key()
	stored, _ := p.namespaces.Get(ns)
	version := stored.GetVersion()
	p.cacheMu.Lock()
	c, ok := p.cache[ns]
	p.cacheMu.Unlock()
	if ok && c.version == version {
		return c.cfg
	}
	cfg := circuit.ThresholdsFor(ns, stored)
	p.cacheMu.Lock()
	p.cache[ns] = cachedConfig{version: version, cfg: cfg}
	p.cacheMu.Unlock()
	return cfg
}

// decide has decision decide one input on the namespace's status (which
// it changes in place) and writes the result through the goka context:
// goka commits the input only after the table write and every emit are
// acknowledged, so a crash in between replays the input and decides
// again. A change of the window counts alone is kept in memory until
// CheckpointInterval has passed since the namespace's last write, unless
// decision says to write it at once (force).
func (p *Processor) decide(ctx goka.Context, now time.Time, decision func(st *chimev1.BreakerStatus, cfg circuit.Thresholds) (res circuit.Result, force bool)) {
	st := p.status(ctx)
	before := gateViewOf(st)
	res, force := decision(st, p.config(ctx))
	t := p.cfg.Topics
	for _, tr := range res.Transitions {
		ctx.Emit(goka.Stream(t.BreakerTransitions()), ctx.Key(), tr)
		p.state.WithLabelValues(tr.GetNamespace(), schema.BreakerStateName(tr.GetFrom())).Set(0)
		p.state.WithLabelValues(tr.GetNamespace(), schema.BreakerStateName(tr.GetTo())).Set(1)
		p.transitions.WithLabelValues(schema.BreakerStateName(tr.GetTo())).Inc()
		p.cfg.Logger.Info("breaker transition", "namespace", tr.GetNamespace(), "from", tr.GetFrom(), "to", tr.GetTo(), "reason", tr.GetReason())
	}
	if res.Timer != nil {
		raw, err := CoolOffCommand(t, res.Timer, now)
		if err != nil {
			// Marshalling our own messages cannot fail; if it ever does
			// the breaker would stay open, so say it loudly.
			p.cfg.Logger.Error("breaker: cool-off timer not armed", "namespace", ctx.Key(), "err", err)
		} else {
			ctx.Emit(goka.Stream(t.JobCommands()), schema.JobKey(res.Timer.GetNamespace(), CoolOffJobID), raw)
		}
	}
	if !res.Changed {
		if res.Ignored != "" {
			p.cfg.Logger.Debug("breaker: input ignored", "namespace", ctx.Key(), "why", res.Ignored)
		}
		return
	}
	p.liveMu.Lock()
	l := p.live[ctx.Key()]
	if l == nil || l.partition != ctx.Partition() {
		l = &liveStatus{partition: ctx.Partition()}
		p.live[ctx.Key()] = l
	}
	p.liveMu.Unlock()
	l.st = st
	if !force && len(res.Transitions) == 0 && res.Timer == nil && gateViewOf(st) == before &&
		p.cfg.CheckpointInterval > 0 && now.Sub(l.written) < p.cfg.CheckpointInterval {
		return // counts only: the next checkpoint writes them
	}
	ctx.SetValue(st)
	l.written = now
}

// CoolOffCommand is the scheduler command that arms tm: a one-shot job at
// tm.fire_at whose Kafka target writes tm to the breaker-timers topic.
func CoolOffCommand(t schema.Topics, tm *chimev1.BreakerTimer, now time.Time) ([]byte, error) {
	payload, err := schema.Marshal(tm)
	if err != nil {
		return nil, fmt.Errorf("breaker: marshal timer: %w", err)
	}
	ns := tm.GetNamespace()
	cmd := command.Upsert(&chimev1.JobSpec{
		Namespace: ns,
		Id:        CoolOffJobID,
		Schedule:  &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: tm.GetFireAt()}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{
			Topic: t.BreakerTimers(),
			Key:   []byte(ns),
			Value: payload,
		}}},
		// A timer that fires late still ends the cool-off: without it the
		// breaker would stay open.
		RelevancyWindow: durationpb.New(schema.MaxRelevancyWindow),
		Labels:          map[string]string{"chime.breaker": "cool-off"},
	})
	// Derived, not drawn: an arming issued again (a restart re-reading its
	// input) repeats the row's last command, which the scheduler ignores.
	cmd.CommandId = command.CoolOffID(ns, tm.GetVersion(), tm.GetFireAt().AsTime())
	command.Stamp(cmd, now)
	return schema.Marshal(cmd)
}
