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
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/promised"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
)

// Scheduler is one scheduler instance; run several with the same topics and
// they share the partitions through the goka group.
type Scheduler struct {
	lifecycle.Base
	cfg Config
	// tickTopic is what a tick's events name as their input's topic
	// (their ids derive from it), built once: onTick runs per row.
	tickTopic  string
	decider    *decider
	namespaces schema.NamespaceSource
	timers     *timers
	// db is the table's store: LocalState's, or one in memory (ownDB).
	db    *jobstore.DB
	ownDB bool
	// kcl is the franz-go client for metadata (nil in goka's tester,
	// which has no broker).
	kcl *kgo.Client
	// tableCl produces the table's records, from the store's write cache
	// (nil in goka's tester).
	tableCl *kgo.Client
	// gate holds command offsets back until their rows are stored.
	gate    *commitGate
	targets []string
	// serving is which partitions job reads are answered for (serving.go).
	serving *serving
	// tablePartitions is the table topic's partition count (0 until
	// known).
	tablePartitions atomic.Int32

	mu   sync.Mutex
	proc *goka.Processor
	// tickMu makes each round of ticks one step (pump.go).
	tickMu sync.Mutex
	// codecs are the outputs' codecs, by topic: a tick encodes its
	// records itself (rowctx.go).
	codecs map[string]goka.Codec
	// running is the processor incarnation running now (nil between).
	running atomic.Pointer[tickOut]

	fireLag prometheus.Histogram
	fires   *prometheus.CounterVec
	// recalls counts due events taken back (recall.go).
	recalls prometheus.Counter
	// oversized counts decisions not written because a record of theirs
	// would exceed Kafka's limit (bound.go).
	oversized prometheus.Counter
	// dueKeys keys the due events (duekeys.go).
	dueKeys dueKeys
	// cmdPartitions is the job-commands topic's partition count (0 until
	// known): a command on another partition than its key's is refused.
	cmdPartitions atomic.Int32
	// assignments counts the assignments taken (Assignments).
	assignments atomic.Uint64
}

// New builds a scheduler. It does not connect until Start.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("scheduler: Config.Namespaces is required: start a views.Namespaces before the scheduler, or pass schema.StaticNamespaces")
	}
	s := &Scheduler{cfg: cfg, namespaces: cfg.Namespaces, serving: newServing(), tickTopic: cfg.Topics.SchedulerTable() + "-tick"}
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
	s.codecs = map[string]goka.Codec{}
	for _, e := range s.Graph().OutputStreams() {
		s.codecs[e.Topic()] = e.Codec()
	}
	s.codecs[cfg.Topics.SchedulerTable()] = new(schema.JobStateCodec)
	if len(cfg.Brokers) > 0 {
		cl, err := kgo.NewClient(append(cfg.SASL.Kgo(), kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID(cfg.ClientID+"-admin"))...)
		if err != nil {
			return nil, fmt.Errorf("scheduler: kafka client: %w", err)
		}
		s.kcl = cl
		if !cfg.autoConfirm {
			// The table's records, in each partition in the order the
			// store sends them (idempotent), to the partition it names,
			// compressed as the processors' (processors.ProducerBuilder).
			tcl, err := kgo.NewClient(append(cfg.SASL.Kgo(),
				kgo.SeedBrokers(cfg.Brokers...),
				kgo.ClientID(cfg.ClientID+"-table"),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerLinger(processors.ProducerLinger),
				kgo.RecordDeliveryTimeout(processors.ProducerDeliveryTimeout),
				kgo.MaxBufferedRecords(1<<17),
			)...)
			if err != nil {
				cl.Close()
				return nil, fmt.Errorf("scheduler: table producer: %w", err)
			}
			s.tableCl = tcl
		}
	}
	s.timers = newTimers(cfg, cfg.Topics.SchedulerTable())
	s.timers.onRecovered = s.serving.recovered
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
	if s.tableCl != nil {
		table := cfg.Topics.SchedulerTable()
		s.db.SetProducer(func(p int32, key string, value []byte, done jobstore.Done) {
			r := promised.New(context.Background(), table, key, value, done)
			r.Partition = p
			s.tableCl.Produce(context.Background(), r, tableStored)
		})
	}
	s.gate = newCommitGate(s.db, cfg.Topics.JobCommands())
	s.db.OnDurable(s.gate.durable)
	// A partition that stops applying its writes is recovered from the
	// changelog by a new processor.
	s.db.OnBroken(func(p int32, err error) {
		if out := s.running.Load(); out != nil {
			out.fail(fmt.Errorf("scheduler: partition %d of the table store: %w", p, err))
		}
	})
	return s, nil
}

// tableStored is the promise of every table record: it tells the store's
// write the record carries (promised).
func tableStored(r *kgo.Record, err error) { promised.Value[jobstore.Done](r).Stored(r.Offset, err) }

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
	s.recalls = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_scheduler_recalls_total",
		Help: "Due events emitted ahead of their time and taken back by a cancel, pause or update that came before it.",
	})
	s.oversized = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_scheduler_oversized_decisions_total",
		Help: "Commands and ticks whose outcome was not written because a record of it would exceed Kafka's record limit (the command is rejected; the row stays as it was).",
	})
	if reg == nil {
		return nil
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_pending_timers",
		Help: "Rows with a timer in the partitions this instance owns, in the write cache or on disk.",
	}, func() float64 { return float64(s.PendingTimers()) })
	window := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_window_timers",
		Help: "Timers held in memory: those due within the timer window (the rest are only on disk).",
	}, func() float64 { return float64(s.WindowTimers()) })
	recovered := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "chime_scheduler_recovered_records_total",
		Help: "Table changelog records read while recovering partitions (after a restart on a disk store: only those written since its offset).",
	}, func() float64 { return float64(s.RecoveredRecords()) })
	dirty := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_dirty_rows",
		Help: "Rows in the table store's write cache not sent to Kafka yet: they wait for later writes to fold into them (a fire for its answer), up to the store's MaxHold.",
	}, func() float64 { return float64(s.db.Dirty()) })
	backlog := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_scheduler_dispatch_backlog_seconds",
		Help: "How long ago the oldest due event the dispatchers have not completed was emitted (their committed offsets against the due topic's end offsets, read every 2 s); redelivery waits for it on top of the ack timeout.",
	}, func() float64 { return time.Duration(s.decider.backlog.Load()).Seconds() })
	cs := []prometheus.Collector{s.fireLag, s.fires, s.recalls, s.oversized, pending, window, recovered, dirty, backlog, storeCollector{s}}
	for _, c := range cs {
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
	opts := processors.ProcessorOptions(s.cfg.Config)
	opts = append(opts, s.cfg.extraOptions...)
	// After extraOptions: goka's tester replaces the storage builder, and
	// ours must wrap whatever is in force.
	opts = append(opts,
		goka.WithRebalanceCallback(s.rebalanced),
		goka.WithNilHandling(goka.NilProcess),
	)
	return opts
}

// CommandsFetchWait is the most a fetch of the scheduler's commands
// waits for schema.BatchedFetchBytes of them
// (processors.BatchedGroupBuilder). At a steady rate each fetch brought a
// command or two (the API's creates, the dispatchers' answers), and the
// scheduler and the broker paid a fetch's fixed cost for each. The wait
// is what a lone command may take longer on its way: half of it on
// average, since a fetch waits from when it was asked for. A job created
// due now fires that much later, a listing or quota count that waits for
// the scheduler to have applied a command waits that much longer
// (jobquery.ReadWait bounds it), and a control recalls a fire only if it
// is applied RecallMargin before it. At 2,000 fires/s on Apache Kafka a
// 5 ms wait saved nothing measurable, 20 ms a tenth of the scheduler's
// CPU per job, and more at 24 partitions (docs/capacity.md).
const CommandsFetchWait = 20 * time.Millisecond

// processorOptions are the goka options of a processor whose ticks write
// through out.
func (s *Scheduler) processorOptions(out *tickOut) []goka.ProcessorOption {
	opts := append(s.options(), goka.WithStorageBuilder(s.timers.builder(s.db)))
	build := s.cfg.testProducer
	if build == nil {
		build = processors.ProducerBuilder(s.cfg.Client)
	}
	if !s.cfg.autoConfirm {
		// A command's offset is committed once the rows it wrote are in
		// Kafka (gate.go); commands are fetched in batches.
		opts = append(opts, goka.WithConsumerGroupBuilder(processors.BatchedGroupBuilder(s.cfg.Config, s.gate.wrap, CommandsFetchWait)))
	}
	// The pump's ticks write through the processor's producer.
	opts = append(opts, goka.WithProducerBuilder(func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := build(brokers, clientID, hasher)
		if err == nil {
			out.set(p)
		}
		return p, err
	}))
	return opts
}

// Name implements lifecycle.Part.
func (s *Scheduler) Name() string { return "scheduler" }

// Start runs the processor until Stop or ctx ends, restarting it after
// failures. It is ready (Started) once it has recovered its partitions
// the first time.
func (s *Scheduler) Start(ctx context.Context) error { return s.Go(ctx, s.run) }

func (s *Scheduler) run(ctx context.Context, ready func()) error {
	defer func() {
		s.serving.stopped()
		if s.kcl != nil {
			s.kcl.Close()
		}
		if s.tableCl != nil {
			s.tableCl.Close()
		}
	}()
	if s.kcl != nil {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go watchPartitions(wctx, s.kcl, map[string]*atomic.Int32{
			s.cfg.Topics.Due():         &s.dueKeys.partitions,
			s.cfg.Topics.JobCommands(): &s.cmdPartitions,
		})
		go watchBacklog(wctx, s.kcl, s.cfg.Topics.Due(), s.cfg.Topics.DispatcherGroup(), &s.decider.backlog, &s.decider.flow)
	}
	if s.ownDB {
		defer s.db.Close() // after Supervise: every storage is closed
	}
	// A processor restarted after an error recovers each partition from
	// the store's offset on: the store holds only what Kafka confirmed.
	return processors.Supervise(ctx, "scheduler", s.cfg.Logger, func(ctx context.Context) error {
		out := &tickOut{}
		p, err := s.newProcessor(ctx, out)
		if err != nil {
			return err
		}
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		out.stop = stop
		s.running.Store(out)
		defer s.running.CompareAndSwap(out, nil)
		go s.pump(pctx, out)
		go processors.SignalReady(pctx, p, ready)
		err = p.Run(pctx)
		if ferr := out.failed(); ferr != nil {
			return ferr
		}
		return err
	})
}

// rebalanced records the new assignment.
func (s *Scheduler) rebalanced(a goka.Assignment) {
	s.assignments.Add(1)
	s.timers.rebalanced(a)
	keep := make(map[int32]bool, len(a))
	for p := range a {
		keep[p] = true
	}
	s.serving.assigned(keep)
	go s.reachCommitted(a)
}

func (s *Scheduler) newProcessor(ctx context.Context, out *tickOut) (*goka.Processor, error) {
	if s.kcl != nil {
		// The store must be a copy of this changelog: checked at every
		// processor start, while no partition is open.
		adm := kadm.NewClient(s.kcl)
		m, err := mirror(ctx, adm, s.cfg.Topics.SchedulerTable())
		if err != nil {
			return nil, err
		}
		b := &logBounds{adm: adm, table: s.cfg.Topics.SchedulerTable()}
		if err := s.db.Verify(m, b.get); err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		s.tablePartitions.Store(m.Partitions)
	}
	p, err := goka.NewProcessor(s.cfg.Brokers, s.Graph(), s.processorOptions(out)...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	// A new processor is a new incarnation: what the previous one wrote
	// to Kafka-target topics is written again unless it was confirmed.
	inc := newIncarnation()
	s.decider.incarnation.Store(&inc)
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

// Ready implements lifecycle.Part: the processor runs with its partitions
// recovered now (not while a rebalance moves them). views/jobquery reads
// rows only while it is.
func (s *Scheduler) Ready() error {
	if err := s.Base.Ready(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.proc.Recovered() {
		return processors.ErrRecovering
	}
	return s.db.Health()
}

// PendingTimers is the number of rows with a timer in the partitions this
// instance owns (pending jobs, and ended ones awaiting removal).
func (s *Scheduler) PendingTimers() int { return s.timers.Pending() }

// StoredTimers is the number of those rows the store holds on disk: what a
// restart finds without reading the changelog.
func (s *Scheduler) StoredTimers() int { return s.timers.Stored() }

// WindowTimers is the number of timers held in memory: those due within
// Config.TimerWindow.
func (s *Scheduler) WindowTimers() int { return s.timers.InWindow() }

// RecoveredRecords is the number of table changelog records this instance
// has read while recovering partitions: after a restart on its disk
// store, only those written since the store's offset.
func (s *Scheduler) RecoveredRecords() int64 { return s.db.Replayed() }

// Assignments counts the assignments this instance has taken: each
// rebalance and each restart of the processor is one, counted before its
// partitions are set up. A read that finds Ready before and after it, and
// the same count, ran under one recovered assignment (views/jobquery).
func (s *Scheduler) Assignments() uint64 { return s.assignments.Load() }
