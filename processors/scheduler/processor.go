// Package scheduler owns chime's scheduler processor: the goka group that
// holds every job's state (table keyed "namespace/job_id"), the per-partition
// timer index kept beside the table's storage, the pump that turns due
// timers into ticks, and the decisions that turn ticks into due events.
//
// Data flow:
//
//	job-commands ──► [scheduler] ──► due (key namespace) ──► dispatcher
//	ticks ─────────►     │ table: JobState + timer index
//	                     ├──► job-events, rejections
//	                     └──► Kafka-target topics (delivered here)
package scheduler

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
	"github.com/chime-sched/chime/views/jobindex"
)

// Scheduler is one scheduler instance; run several with the same topics and
// they share the partitions through the goka group.
type Scheduler struct {
	cfg     Config
	decider *decider
	// namespaces is set before the processor starts (New or Run).
	namespaces views.NamespaceSource
	timers     *timers
	// db is the table's store: LocalState's, or one in memory (ownDB).
	db        *jobstore.DB
	ownDB     bool
	tickCl    *kgo.Client
	targets   []string
	unwritten *unwritten

	mu   sync.Mutex
	proc *goka.Processor

	fireLag prometheus.Histogram
	fires   *prometheus.CounterVec
	// oversized counts decisions not written because a record of theirs
	// would exceed Kafka's limit (bound.go).
	oversized prometheus.Counter
	// swept counts the overdue rows the running sweep handled.
	swept atomic.Int64
	// dueKeys keys the due events (duekeys.go).
	dueKeys dueKeys
	// cmdPartitions is the job-commands topic's partition count (0 until
	// known): a command on another partition than its key's is refused.
	cmdPartitions atomic.Int32
	// assignments counts the assignments taken (Assignments).
	assignments atomic.Uint64
}

// New builds a scheduler. It does not connect until Run.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, namespaces: cfg.Namespaces, unwritten: newUnwritten(cfg.MaxUnwritten)}
	allowed := map[string]bool{cfg.Topics.BreakerTimers(): true}
	for _, t := range cfg.KafkaTargetTopics {
		if t != "" {
			allowed[t] = true
		}
	}
	for t := range allowed {
		s.targets = append(s.targets, t)
	}
	slices.Sort(s.targets)
	s.decider = &decider{cfg: cfg, allowed: allowed}
	sender := cfg.tickSender
	if sender == nil {
		cl, err := kgo.NewClient(append(kafkaauth.Current().Kgo(),
			kgo.SeedBrokers(cfg.Brokers...),
			kgo.ClientID(cfg.ClientID+"-ticks"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Millisecond),
			kgo.MaxBufferedRecords(1<<16),
		)...)
		if err != nil {
			return nil, fmt.Errorf("scheduler: tick producer: %w", err)
		}
		s.tickCl = cl
		sender = &kgoTickSender{cl: cl, topic: cfg.Topics.Ticks(), logger: cfg.Logger}
	}
	s.timers = newTimers(cfg, cfg.Topics.SchedulerTable(), sender)
	if err := s.registerMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if cfg.LocalState != nil {
		s.db = cfg.LocalState.store
	} else {
		db, err := jobstore.Open(jobstore.Options{Now: cfg.Now, Logger: cfg.Logger, AutoConfirm: cfg.autoConfirm})
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		s.db, s.ownDB = db, true
	}
	return s, nil
}

func (s *Scheduler) registerMetrics(reg prometheus.Registerer) error {
	s.fireLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "chime_scheduler_fire_lag_seconds",
		Help:    "Due events: time between when the timer was meant to go off (scheduled time plus jitter, or the retry time) and when the due event was emitted.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	s.fires = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_scheduler_fires_total",
		Help: "Occurrences and retries emitted, by target (http: due events; kafka: Kafka-target deliveries).",
	}, []string{"target"})
	s.oversized = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_scheduler_oversized_decisions_total",
		Help: "Commands and ticks whose outcome was not written because a record of it would exceed Kafka's record limit (the command is rejected; the row stays as it was).",
	})
	if reg == nil {
		return nil
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_pending_timers",
		Help: "Rows with a timer in the partitions this instance owns, on disk.",
	}, func() float64 { return float64(s.PendingTimers()) })
	window := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_window_timers",
		Help: "Timers held in memory: those due within the timer window (the rest are only on disk).",
	}, func() float64 { return float64(s.WindowTimers()) })
	recovered := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "chime_scheduler_recovered_records_total",
		Help: "Table changelog records read while recovering partitions (after a restart on a disk store: only those written since its offset).",
	}, func() float64 { return float64(s.RecoveredRecords()) })
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_held_fires",
		Help: "Rows held in memory between a fire and the dispatcher's answer, not yet written to the table (at most MaxUnwritten).",
	}, func() float64 { return float64(s.unwritten.len()) })
	for _, c := range []prometheus.Collector{s.fireLag, s.fires, s.oversized, pending, window, recovered, held} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("scheduler metrics: %w", err)
		}
	}
	return nil
}

// Graph is the scheduler's goka group graph: the whole data flow of the
// processor in one declaration.
func (s *Scheduler) Graph() *goka.GroupGraph {
	t := s.cfg.Topics
	edges := []goka.Edge{
		// Commands and ticks arrive as raw bytes and are decoded in the
		// callback: a record that does not decode must become a rejection,
		// not a processor failure.
		goka.Input(goka.Stream(t.JobCommands()), new(schema.BytesCodec), s.onCommand),
		goka.Input(goka.Stream(t.Ticks()), new(schema.BytesCodec), s.onTick),
		goka.Visitor(sweepVisitor, s.onSweep),
		goka.Persist(new(schema.JobStateCodec)),
		goka.Output(goka.Stream(t.Due()), new(schema.DueCodec)),
		goka.Output(goka.Stream(t.JobEvents()), new(schema.JobEventCodec)),
		goka.Output(goka.Stream(t.Rejections()), new(schema.RejectionCodec)),
	}
	for _, topic := range s.targets {
		edges = append(edges, goka.Output(goka.Stream(topic), new(schema.BytesCodec)))
	}
	return goka.DefineGroup(goka.Group(t.SchedulerGroup()), edges...)
}

func (s *Scheduler) options() []goka.ProcessorOption {
	opts := processors.ProcessorOptions(s.cfg.ClientID, s.cfg.Replication, s.cfg.Membership, s.cfg.Logger)
	opts = append(opts, s.cfg.extraOptions...)
	// After extraOptions: goka's tester replaces the storage builder, and
	// ours must wrap whatever is in force.
	opts = append(opts,
		goka.WithRebalanceCallback(s.rebalanced),
		goka.WithNilHandling(goka.NilProcess),
	)
	return opts
}

// Run runs the processor until ctx is done, restarting it after failures.
func (s *Scheduler) Run(ctx context.Context) error {
	defer func() {
		if s.tickCl != nil {
			s.tickCl.Close()
		}
	}()
	if s.tickCl != nil {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go watchPartitions(wctx, s.tickCl, map[string]*atomic.Int32{
			s.cfg.Topics.Due():         &s.dueKeys.partitions,
			s.cfg.Topics.JobCommands(): &s.cmdPartitions,
		})
	}
	if s.namespaces == nil {
		v, stop, err := views.StartNamespaces(ctx, s.cfg.Brokers, s.cfg.Topics, s.cfg.ClientID+"-namespaces", s.cfg.Replication, s.cfg.Logger)
		if err != nil {
			return fmt.Errorf("scheduler: %w", err)
		}
		defer stop() // after Supervise: the processor has stopped
		s.namespaces = v
	}
	if s.ownDB {
		defer s.db.Close() // after Supervise: every storage is closed
	}
	// A processor restarted after an error recovers each partition from
	// the store's offset on: the store holds only what Kafka confirmed.
	return processors.Supervise(ctx, "scheduler", s.cfg.Logger, func(ctx context.Context) error {
		p, err := s.newProcessor()
		if err != nil {
			return err
		}
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go s.sweep(pctx, p)
		return p.Run(pctx)
	})
}

// rebalanced records the new assignment; rows held unwritten for
// partitions that left are dropped (their next owner fires from the table).
func (s *Scheduler) rebalanced(a goka.Assignment) {
	s.assignments.Add(1)
	s.timers.rebalanced(a)
	keep := make(map[int32]bool, len(a))
	for p := range a {
		keep[p] = true
	}
	s.unwritten.keep(keep)
}

func (s *Scheduler) newProcessor() (*goka.Processor, error) {
	opts := append(s.options(), goka.WithStorageBuilder(s.timers.builder(s.db)))
	if !s.cfg.autoConfirm {
		// The table's writes reach the store once Kafka stored them.
		opts = append(opts, goka.WithProducerBuilder(confirming(processors.ProducerBuilder(s.cfg.ClientID), s.cfg.Topics.SchedulerTable(), s.db.Confirm)))
	}
	p, err := goka.NewProcessor(s.cfg.Brokers, s.Graph(), opts...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	// A new processor is a new incarnation: what the previous one wrote
	// to Kafka-target topics is written again unless it was confirmed.
	inc := newIncarnation()
	s.decider.incarnation.Store(&inc)
	// What the last processor held unwritten is fired again from the table.
	s.unwritten.keep(nil)
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return p, nil
}

func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WaitReady blocks until the processor has recovered its partitions.
func (s *Scheduler) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			return p.WaitForReadyContext(ctx)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Ready reports whether the processor runs with its tables recovered.
func (s *Scheduler) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.Recovered()
}

// PendingTimers is the number of rows with a timer in the partitions this
// instance owns (pending jobs, and ended ones awaiting removal).
func (s *Scheduler) PendingTimers() int { return s.timers.Pending() }

// WindowTimers is the number of timers held in memory: those due within
// Config.TimerWindow.
func (s *Scheduler) WindowTimers() int { return s.timers.InWindow() }

// RecoveredRecords is the number of table changelog records this instance
// has read while recovering partitions: after a restart on its disk
// store, only those written since the store's offset.
func (s *Scheduler) RecoveredRecords() int64 { return s.db.Replayed() }

// Get reads a job's row from this instance's local table (nil if it is
// not here), with a fire not yet written.
func (s *Scheduler) Get(key string) (st *chimev1.JobState, err error) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !p.Recovered() {
		return nil, errors.New("scheduler: not running or recovering its partitions")
	}
	// goka's Get reads a partition's storage without checking that it is
	// set up: during a rebalance it dereferences a nil storage (seen under
	// load). The partition is then recovering; say so.
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("scheduler: reading %q while its partition moves: %v", key, r)
		}
	}()
	if raw, ok := s.unwritten.peek(key); ok {
		v, err := schema.JobStateCodec{}.Decode(raw)
		if err != nil {
			return nil, err
		}
		return v.(*chimev1.JobState), nil
	}
	v, err := p.Get(key)
	if err != nil || v == nil {
		return nil, err
	}
	return v.(*chimev1.JobState), nil
}

func (s *Scheduler) onCommand(ctx goka.Context, msg any) {
	in := &input{key: ctx.Key(), topic: string(ctx.Topic()), partition: ctx.Partition(), offset: ctx.Offset(), partitions: s.cmdPartitions.Load()}
	in.raw, _ = msg.([]byte)
	s.namespaceOf(ctx, in)
	cur, held := s.current(ctx)
	now := s.cfg.Now()
	dec := s.decider.onCommand(in, cur, now)
	if err := dec.oversized(); err != nil {
		// The row as it was stays; the command is refused, and the
		// partition goes on with the next one.
		s.refused(ctx, err)
		dec = s.decider.refuse(in, fmt.Sprintf("command not applied: %v", err), now)
		if held != nil && !s.holdRow(ctx, held) {
			ctx.SetValue(current0(held))
		}
		held = nil
	}
	s.apply(ctx, dec, held, false)
}

// refused reports a decision that was not written because a record of it
// would not fit in Kafka.
func (s *Scheduler) refused(ctx goka.Context, err error) {
	s.oversized.Inc()
	s.cfg.Logger.Error("scheduler: decision not written", "key", ctx.Key(), "err", err)
}

func (s *Scheduler) onTick(ctx goka.Context, _ any) {
	in := &input{key: ctx.Key(), topic: string(ctx.Topic()), partition: ctx.Partition(), offset: ctx.Offset()}
	s.namespaceOf(ctx, in)
	cur, held := s.current(ctx)
	s.tick(ctx, in, cur, held, s.cfg.Now())
}

// tick applies a tick's decision (from the pump or the sweep). One that
// would not fit in Kafka is not written: the row stays as it was and is
// looked at again at its next tick.
func (s *Scheduler) tick(ctx goka.Context, in *input, cur *chimev1.JobState, held []byte, now time.Time) {
	dec := s.decider.onTick(in, cur, now)
	if err := dec.oversized(); err != nil {
		s.refused(ctx, err)
		dec = decision{}
	}
	s.apply(ctx, dec, held, true)
}

// namespaceOf reads what decisions take from the row's namespace config:
// its relevancy window and spread.
func (s *Scheduler) namespaceOf(ctx goka.Context, in *input) {
	in.nsSpread = 1
	ns, _, ok := schema.SplitJobKey(ctx.Key())
	if !ok {
		return
	}
	cfg, err := s.namespaces.Get(ns)
	in.ns = namespaceState(cfg, err)
	in.nsWindow = cfg.GetRelevancyWindow().AsDuration()
	in.nsSpread = schema.Spread(cfg)
}

// current is the row as last decided: the one held unwritten (taken out;
// apply writes it or puts it back) or the stored one.
func (s *Scheduler) current(ctx goka.Context) (st *chimev1.JobState, held []byte) {
	if r, ok := s.unwritten.take(ctx.Key(), ctx.Partition()); ok {
		if r.storedOK {
			// The store still holds the row as it was before it was
			// held: the write that ends the hold replaces that one.
			s.timers.hint(ctx.Partition(), ctx.Key(), r.stored)
		}
		v, err := schema.JobStateCodec{}.Decode(r.value)
		if err == nil {
			return v.(*chimev1.JobState), r.value
		}
		// Encoded by this process: cannot happen; the stored row decides.
		s.cfg.Logger.Error("scheduler: unwritten row does not decode; using the stored one", "key", ctx.Key(), "err", err)
	}
	st, _ = ctx.Value().(*chimev1.JobState)
	return st, nil
}

// holdRow holds raw as key's row unwritten, with what the store holds of
// it; false when the memory for held rows is full.
func (s *Scheduler) holdRow(ctx goka.Context, raw []byte) bool {
	r := unwrittenRow{partition: ctx.Partition(), value: raw}
	r.stored, r.storedOK = s.timers.stored(ctx.Partition(), ctx.Key())
	return s.unwritten.put(ctx.Key(), r)
}

// apply writes a decision through the goka context: goka commits the input
// offset only after the table write and every emit are acknowledged, so a
// crash in between replays the input. The row and the emits are separate
// Kafka writes: if the row reached Kafka and an emit did not, the replayed
// input finds the row advanced and does nothing. Open fires and
// unconfirmed Kafka-target writes are then re-sent by the next incarnation
// (recover_at); job events are lost (docs/guarantees.md, Known gaps).
//
// A tick's decision that only fires is held unwritten (unwritten.go);
// held is the row current took out of it, put back when the decision
// changes nothing.
func (s *Scheduler) apply(ctx goka.Context, d decision, held []byte, tick bool) {
	t := s.cfg.Topics
	for _, due := range d.dues {
		ctx.Emit(goka.Stream(t.Due()), s.dueKeys.key(due), due)
		s.fireLag.Observe(due.GetEmittedAt().AsTime().Sub(due.GetFireAt().AsTime()).Seconds())
	}
	if len(d.dues) > 0 {
		s.fires.WithLabelValues("http").Add(float64(len(d.dues)))
	}
	if len(d.deliver) > 0 {
		s.fires.WithLabelValues("kafka").Add(float64(len(d.deliver)))
	}
	for _, k := range d.deliver {
		var opts []goka.ContextOption
		if len(k.GetHeaders()) > 0 {
			h := goka.Headers{}
			for hk, hv := range k.GetHeaders() {
				h[hk] = []byte(hv)
			}
			opts = append(opts, goka.WithCtxEmitHeaders(h))
		}
		ctx.Emit(goka.Stream(k.GetTopic()), string(k.GetKey()), k.GetValue(), opts...)
	}
	for _, ev := range d.events {
		ctx.Emit(goka.Stream(t.JobEvents()), ev.GetNamespace(), ev)
	}
	if r := d.rejection; r != nil {
		ctx.Emit(goka.Stream(t.Rejections()), ctx.Key(), r)
		s.cfg.Logger.Info("command rejected", "key", ctx.Key(), "reason", r.GetReason())
	}
	switch {
	case d.del:
		ctx.Delete()
	case d.state != nil:
		if tick && s.hold(ctx, d, held) {
			return
		}
		ctx.SetValue(d.state)
	case held != nil:
		// Nothing changed: the row stays held as it was.
		if !s.holdRow(ctx, held) {
			ctx.SetValue(current0(held))
		}
	}
}

// LiveJobs returns the namespace's live (not ended) jobs in the partitions
// this instance owns: the API's pending-jobs quota reads it.
func (s *Scheduler) LiveJobs(ns string) int64 { return jobindex.LiveIn(s.timers.listings(), ns) }

// ListJobs returns a page of the namespace's jobs in the partitions this
// instance owns, newest first, and whether more follow.
func (s *Scheduler) ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool) {
	return jobindex.List(s.timers.listings(), ns, q)
}

// hold keeps a tick's decision unwritten, and points the timer index at
// the held row's timer: a fire on a row not held yet, or a tick that left
// a held row as it was (a stale tick, or the first tick after a rebalance
// kept the partition). false: it must be written (it does more, or the
// memory for held rows is full).
func (s *Scheduler) hold(ctx goka.Context, d decision, held []byte) bool {
	switch {
	case held == nil && d.onlyFires():
	case held != nil && d.emitsNothing():
	default:
		return false
	}
	raw, err := schema.JobStateCodec{}.Encode(d.state)
	if err != nil || (held != nil && !bytes.Equal(raw, held)) || !s.holdRow(ctx, raw) {
		return false
	}
	s.timers.noteTimer(ctx.Partition(), ctx.Key(), timerOf(raw))
	return true
}

// current0 decodes a held row that must be written after all.
func current0(raw []byte) *chimev1.JobState {
	v, _ := schema.JobStateCodec{}.Decode(raw)
	st, _ := v.(*chimev1.JobState)
	return st
}

// Partitions lists the partitions this instance actively owns.
func (s *Scheduler) Partitions() []int32 { return s.timers.Partitions() }

// Assignments counts the assignments this instance has taken: each
// rebalance and each restart of the processor is one, counted before its
// partitions are set up. A read that finds Ready before and after it, and
// the same count, ran under one recovered assignment (views/jobquery).
func (s *Scheduler) Assignments() uint64 { return s.assignments.Load() }

const sweepVisitor = "sweep"

// sweep visits every row this instance owns every SweepInterval.
func (s *Scheduler) sweep(ctx context.Context, p *goka.Processor) {
	if s.cfg.SweepInterval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !p.Recovered() {
			continue
		}
		// VisitAll fails while partitions move; the next sweep retries.
		if err := p.VisitAll(ctx, sweepVisitor, s.cfg.Now().UnixNano()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Debug("sweep interrupted", "err", err)
		}
		// One line per sweep, not per row: a broken pump can leave many.
		if n := s.swept.Swap(0); n > 0 {
			s.cfg.Logger.Warn("sweep found overdue timers and handled them; the pump missed them", "rows", n)
		}
	}
}

// onSweep handles a row the sweep visits: one whose timer is long overdue
// is treated as ticked. meta is the sweep's start (Unix ns), which names
// its events.
func (s *Scheduler) onSweep(ctx goka.Context, meta any) {
	cur, held := s.current(ctx)
	now := s.cfg.Now()
	if cur == nil || cur.GetTimerAt() == nil || cur.GetTimerAt().AsTime().After(now.Add(-s.cfg.SweepOverdue)) {
		if held != nil && !s.holdRow(ctx, held) {
			ctx.SetValue(cur)
		}
		return
	}
	id, _ := meta.(int64)
	in := &input{key: ctx.Key(), topic: "sweep-" + strconv.FormatInt(id, 10) + "-" + ctx.Key(), partition: ctx.Partition()}
	s.namespaceOf(ctx, in)
	s.swept.Add(1)
	s.tick(ctx, in, cur, held, now)
}
