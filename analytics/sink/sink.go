// Package sink owns the analytics sink: a Kafka consumer group on the
// outcomes, breaker-transitions, job-events and dead-letters topics that
// writes them to ClickHouse (analytics.Store) in batches, by size and by
// time.
//
// Offsets are committed only after the batch's insert succeeded. A sink
// that dies between the two replays the batch; a record is skipped then if
// its offset is at or below the highest stored for its source table, Kafka
// partition and day (the day of its row, the table's partition), so no row
// or aggregate is counted twice and none is lost. While ClickHouse is down
// the sink retries the same insert (same deduplication token) with backoff
// and reads nothing more: it lags, and is not ready (Ready), Kafka keeps
// the records, and it catches up when the server is back.
//
// # Why the skip rule loses nothing
//
// The tables are partitioned by day, and an insert spanning two days makes
// two parts, which ClickHouse may store one without the other. So a batch
// is inserted day by day, in ascending order, one insert per table and day
// (analytics.Store.InsertDay): each makes one part, stored whole or not at
// all, with the highest offset per partition of exactly its rows
// (sink_day_offsets, by a materialized view of the same insert).
//
// Claim: for every table t, Kafka partition p and day d, the records of
// (t, p, d) that are stored are a prefix of them in offset order: all those
// at or below M(t, p, d), the highest stored, and none above. Hence the
// rule skips exactly the stored records.
//
// It holds initially (nothing stored) and each insert keeps it. A run
// consumes p from its committed offset C on, in offset order, and inserts
// its batches one after another, the next only once every insert of the
// one before succeeded; a batch holds every record consumed since the one
// before, less those skipped (stored, by the claim) or undecodable (never
// stored, so left out of the claim). When the insert of (t, d) of a batch
// covering offsets up to L of p lands, all the records of (t, p, d) up to L
// are stored: those below C were committed, so every insert of their batch
// had succeeded; those from C to the batch's start were in earlier batches
// of the run, all inserted; those of the batch were skipped as stored or
// are in this very insert. Whatever the new M(t, p, d) (at most L, or the
// earlier M if it was higher, with its prefix), the claim holds for
// (t, p, d). The claim of another day d' is untouched until its own insert
// lands, however many of its records have offsets below L: a sink that
// dies between the days of a batch replays d' in full. A single highest
// offset per (t, p) would not do: it could stand above unstored records of
// d', which would then be skipped and lost.
//
// The day must be the same when the sink splits the batch, when it skips a
// record and when ClickHouse partitions the row: analytics.RowTime is a
// function of the record alone (a Kafka record always has a timestamp),
// and analytics.DayOf computes toDate(at) of the table's DateTime64(3,
// 'UTC') column (see analytics.Day).
//
// Records at or below the highest offset per (t, p) of sink_offsets, which
// sinks before migration 5 wrote, are taken as stored, as those sinks did.
package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Config configures a Sink. A field left at its zero value takes the
// default named on it; a negative one is refused by New.
type Config struct {
	Brokers  []string
	Topics   schema.Topics
	ClientID string // default DefaultClientID
	// SASL is the credential the consumer authenticates with; the zero
	// value is none.
	SASL  kafkaauth.Credential
	Store *analytics.Store
	// BatchSize is the most rows one insert holds. Default
	// DefaultBatchSize.
	BatchSize int
	// FlushInterval is the longest a record waits in a batch. Default
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxBackoff caps the wait between retries of a failed insert (the
	// first wait is 250 ms). Default DefaultMaxBackoff.
	MaxBackoff time.Duration
	Logger     *slog.Logger // default: discard
	// Membership is the consumer's part in the sink group (session
	// timeout, static membership).
	Membership groups.Membership
	// KgoOptions are added to the consumer's options (tests).
	KgoOptions []kgo.Opt
	// Registerer, if set, gets the sink's metrics: its counters (Stats),
	// read when scraped.
	Registerer prometheus.Registerer

	// afterInsert runs between a successful insert and its commit; an
	// error stops the sink there, as a crash would (tests).
	afterInsert func() error
	// afterDay runs after the rows of days[i] of a batch are stored, before
	// the next day's; an error stops the sink there, as a crash would
	// (tests).
	afterDay func(days []analytics.Day, i int) error
}

// The defaults of Config's fields.
const (
	DefaultClientID      = "chime"
	DefaultBatchSize     = 50_000
	DefaultFlushInterval = time.Second
	DefaultMaxBackoff    = 10 * time.Second
)

// validate applies the defaults to the fields left unset and refuses the
// values the sink cannot work with, naming each.
func (c *Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("sink: no Kafka brokers")
	}
	if c.Store == nil {
		return errors.New("sink: no analytics store")
	}
	if c.Topics.Prefix == "" {
		// As every other part: a zero Topics would name unprefixed
		// topics no other part writes.
		c.Topics = schema.NewTopics("")
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	errs := []error{
		setting.Positive("sink", "BatchSize", &c.BatchSize, DefaultBatchSize),
		setting.Positive("sink", "FlushInterval", &c.FlushInterval, DefaultFlushInterval),
		setting.Positive("sink", "MaxBackoff", &c.MaxBackoff, DefaultMaxBackoff),
	}
	if err := c.Membership.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("sink: Membership: %w", err))
	}
	return errors.Join(errs...)
}

// Sink copies chime's event streams into ClickHouse.
type Sink struct {
	lifecycle.Base
	cfg   Config
	log   *slog.Logger
	table map[string]string // topic → table

	rows, batches, skipped, bad, retries atomic.Int64
	// unavailable is why ClickHouse cannot be reached, while the sink
	// retries (nil otherwise): the sink is not ready then.
	unavailable atomic.Pointer[error]
}

// Stats are the sink's running totals, the same its metrics export
// (Config.Registerer).
type Stats struct {
	// Rows inserted, in Batches inserts.
	Rows, Batches int64
	// Skipped records were already stored (a replay); Bad ones could not
	// be decoded and were passed over.
	Skipped, Bad int64
	// Retries counts ClickHouse calls retried while it was unavailable.
	Retries int64
}

// New checks cfg and returns a Sink; Start starts it.
func New(cfg Config) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t := cfg.Topics
	s := &Sink{cfg: cfg, log: cfg.Logger, table: map[string]string{
		t.Outcomes():           analytics.TableAttempts,
		t.BreakerTransitions(): analytics.TableTransitions,
		t.JobEvents():          analytics.TableJobEvents,
		t.DeadLetters():        analytics.TableDeadLetters,
	}}
	if err := s.registerMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Stats returns the running totals.
func (s *Sink) Stats() Stats {
	return Stats{Rows: s.rows.Load(), Batches: s.batches.Load(), Skipped: s.skipped.Load(), Bad: s.bad.Load(), Retries: s.retries.Load()}
}

type tp struct {
	topic     string
	partition int32
}

// span is the offsets of one partition in a batch.
type span struct {
	first, last int64
	epoch       int32
}

type run struct {
	s  *Sink
	cl *kgo.Client
	// batch and spans are being filled. spans hold every record consumed
	// since the last launch, stored or skipped: what the commit covers.
	batch   *analytics.Batch
	spans   map[tp]*span
	started time.Time // first record of the batch
	spare   *analytics.Batch
	// flying is the batch being inserted while the next one fills: one at
	// a time, committed in order.
	flying *inflight
	// ictx is the inserts' context: it outlives the run's for a final flush.
	ictx      context.Context
	lastAllow time.Time
	// stored is what is already stored, read after each assignment (nil:
	// read it before the next record).
	stored     *analytics.Stored
	reassigned atomic.Bool
}

type inflight struct {
	batch *analytics.Batch
	spans map[tp]*span
	done  chan error
}

// Name implements lifecycle.Part.
func (s *Sink) Name() string { return "analytics sink" }

// Start consumes until Stop or ctx ends (then it flushes and commits what
// it has) or a fatal error (Err). It is ready (Started) once it consumes.
func (s *Sink) Start(ctx context.Context) error { return s.Go(ctx, s.run) }

// Ready implements lifecycle.Part: not ready while ClickHouse is
// unavailable and the sink lags, retrying.
func (s *Sink) Ready() error {
	if err := s.Base.Ready(); err != nil {
		return err
	}
	if err := s.unavailable.Load(); err != nil {
		return *err
	}
	return nil
}

func (s *Sink) run(ctx context.Context, ready func()) error {
	ictx, cancelInserts := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelInserts()
	r := &run{s: s, batch: new(analytics.Batch), spans: map[tp]*span{}, ictx: ictx, lastAllow: time.Now()}
	r.reassigned.Store(true)
	topics := make([]string, 0, len(s.table))
	for t := range s.table {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	cl, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(s.cfg.ClientID + "-sink"),
		kgo.FetchMaxWait(fetchWait),
		kgo.FetchMinBytes(schema.BatchedFetchBytes),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, append(append(s.cfg.Membership.Kgo(), s.cfg.SASL.Kgo()...), s.cfg.KgoOptions...)...),
		kgo.ConsumerGroup(s.cfg.Topics.SinkGroup()),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		// Partitions move only when no batch is pending or in flight
		// (AllowRebalance after its commit), so a batch never holds
		// records of a partition another sink owns.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { r.reassigned.Store(true) }),
	)...)
	if err != nil {
		return fmt.Errorf("sink: kafka consumer: %w", err)
	}
	r.cl = cl
	defer cl.Close()
	s.log.Info("analytics sink consuming", "topics", strings.Join(topics, ","), "group", s.cfg.Topics.SinkGroup())
	ready()

	for {
		if r.flying != nil {
			select {
			case err := <-r.flying.done:
				if err := r.land(ctx, err); err != nil {
					return r.shutdown(err, cancelInserts)
				}
			default:
			}
		}
		wait := s.cfg.FlushInterval
		if len(r.spans) > 0 {
			wait = max(time.Until(r.started.Add(s.cfg.FlushInterval)), time.Millisecond)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollRecords(pctx, s.cfg.BatchSize-r.batch.Len())
		cancel()
		if fs.IsClientClosed() {
			return r.shutdown(nil, cancelInserts)
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				s.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if fs.NumRecords() > 0 {
			if err := r.loadStored(ctx); err != nil {
				return r.shutdown(err, cancelInserts)
			}
			fs.EachRecord(r.add)
		}
		if ctx.Err() != nil {
			return r.shutdown(nil, cancelInserts)
		}
		if r.batch.Len() >= s.cfg.BatchSize || len(r.spans) > 0 && time.Since(r.started) >= s.cfg.FlushInterval {
			if err := r.launch(ctx); err != nil {
				return r.shutdown(err, cancelInserts)
			}
		}
		// Under steady load a batch is always filling or flying: drain now
		// and then so that a rebalance waits a few seconds at most.
		if (len(r.spans) > 0 || r.flying != nil) && time.Since(r.lastAllow) > 3*s.cfg.FlushInterval {
			if err := r.drain(ctx); err != nil {
				return r.shutdown(err, cancelInserts)
			}
		}
		if len(r.spans) == 0 && r.flying == nil {
			cl.AllowRebalance()
			r.lastAllow = time.Now()
		}
	}
}

// shutdown ends the run. Without an error it first flushes and commits what is
// pending, for up to 10 s; a failed final flush loses nothing, since its
// records are not committed. With an error, an insert in flight is waited
// for but not committed.
func (r *run) shutdown(err error, cancelInserts context.CancelFunc) error {
	stop := time.AfterFunc(10*time.Second, cancelInserts)
	defer stop.Stop()
	if err == nil {
		if ferr := r.drain(r.ictx); ferr != nil && !errors.Is(ferr, context.Canceled) {
			r.s.log.Warn("final flush failed; the records will be read again", "err", ferr)
		}
	} else if r.flying != nil {
		<-r.flying.done
		r.flying = nil
	}
	r.cl.AllowRebalance()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// launch waits for the insert in flight and commits it, then starts
// inserting the filled batch.
func (r *run) launch(ctx context.Context) error {
	if err := r.wait(ctx); err != nil {
		return err
	}
	if len(r.spans) == 0 {
		return nil
	}
	p := &inflight{batch: r.batch, spans: r.spans, done: make(chan error, 1)}
	r.batch, r.spare = r.spare, nil
	if r.batch == nil {
		r.batch = new(analytics.Batch)
	}
	r.spans = map[tp]*span{}
	r.flying = p
	go func() { p.done <- r.insert(p) }()
	return nil
}

// drain inserts and commits everything: the batch in flight and the one
// filling.
func (r *run) drain(ctx context.Context) error {
	if err := r.launch(ctx); err != nil {
		return err
	}
	return r.wait(ctx)
}

// wait lands the insert in flight, if any.
func (r *run) wait(ctx context.Context) error {
	if r.flying == nil {
		return nil
	}
	select {
	case err := <-r.flying.done:
		return r.land(ctx, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// land commits a finished insert's offsets.
func (r *run) land(ctx context.Context, insertErr error) error {
	p := r.flying
	r.flying = nil
	if insertErr != nil {
		return insertErr
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for k, sp := range p.spans {
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.partition] = kgo.EpochOffset{Epoch: sp.epoch, Offset: sp.last + 1}
	}
	var commitErr error
	r.cl.CommitOffsetsSync(context.WithoutCancel(ctx), offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitResponseErr(resp)
		}
	})
	if commitErr != nil {
		// The rows are stored; a replay skips them. Not fatal.
		r.s.log.Warn("commit failed; the stored records will be skipped when read again", "err", commitErr)
	}
	p.batch.Reset()
	r.spare = p.batch
	return nil
}

// insert stores a batch (on its own goroutine; it touches only p and the
// Sink's counters): day by day, each day's rows in one insert per table,
// each insert retried alone until it succeeds (see the package
// documentation). A batch within one day, the usual, is one insert per
// table, as before.
func (r *run) insert(p *inflight) error {
	n := p.batch.Len()
	if n == 0 {
		return nil
	}
	tok := token(p.spans)
	days := p.batch.Days()
	for i, d := range days {
		what := "insert " + strconv.Itoa(n) + " rows"
		if len(days) > 1 {
			what = "insert the rows of " + d.String() + " of a batch of " + strconv.Itoa(n)
		}
		if err := r.retry(r.ictx, what, func() error {
			return r.s.cfg.Store.InsertDay(r.ictx, p.batch, d, tok)
		}); err != nil {
			return err
		}
		if r.s.cfg.afterDay != nil {
			if err := r.s.cfg.afterDay(days, i); err != nil {
				return err
			}
		}
	}
	r.s.rows.Add(int64(n))
	r.s.batches.Add(1)
	if r.s.cfg.afterInsert != nil {
		return r.s.cfg.afterInsert()
	}
	return nil
}

// loadStored reads the stored offsets after an assignment, retrying while
// ClickHouse is down.
func (r *run) loadStored(ctx context.Context) error {
	if !r.reassigned.Swap(false) && r.stored != nil {
		return nil
	}
	return r.retry(ctx, "read stored offsets", func() error {
		m, err := r.s.cfg.Store.StoredOffsets(ctx)
		if err == nil {
			r.stored = m
		}
		return err
	})
}

// fetchWait bounds how long the sink's fetches wait for
// schema.BatchedFetchBytes: it gathers a second of records per insert
// anyway (FlushInterval), and a fetch answered as soon as one record
// arrived cost it, at 2,000 fires a second on Apache Kafka, about 40 µs of
// CPU per outcome where draining a backlog costs 2.3 µs (docs/capacity.md),
// and the broker a fetch response per few records. Under a burst the bytes
// are there at once and nothing waits (at 2,000 fires a second they come
// within about 100 ms). The wait also paces an idle sink's fetches: one a
// second; at 250 ms, four a second were a fifth of an idle chime dev's CPU
// once the processors' fetches rested (processors.batchedFetches).
const fetchWait = time.Second

func (r *run) add(rec *kgo.Record) {
	key := tp{rec.Topic, rec.Partition}
	sp := r.spans[key]
	if sp == nil {
		sp = &span{first: rec.Offset}
		r.spans[key] = sp
		if len(r.spans) == 1 {
			r.started = time.Now()
		}
	}
	sp.last, sp.epoch = rec.Offset, rec.LeaderEpoch

	table := r.s.table[rec.Topic]
	var m proto.Message
	switch table {
	case analytics.TableAttempts:
		m = new(chimev1.CallbackOutcome)
	case analytics.TableTransitions:
		m = new(chimev1.BreakerTransition)
	case analytics.TableJobEvents:
		m = new(chimev1.JobEvent)
	case analytics.TableDeadLetters:
		m = new(chimev1.DeadLetter)
	default:
		return
	}
	err := schema.UnmarshalInternal(rec.Value, m)
	if err == nil {
		// Decoded first: whether it is stored depends on its row's day.
		pos := analytics.Pos{Partition: rec.Partition, Offset: rec.Offset, Time: rec.Timestamp}
		if r.stored.Has(table, rec.Partition, analytics.DayOf(analytics.RowTime(m, pos)), rec.Offset) {
			r.s.skipped.Add(1)
			return
		}
		err = r.batch.Add(m, pos)
	}
	if err != nil {
		r.s.bad.Add(1)
		r.s.log.Error("undecodable record passed over", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
	}
}

// token names a batch by the offsets it covers: the same records give the
// same token, so a retried insert is dropped by ClickHouse.
func token(spans map[tp]*span) string {
	keys := make([]tp, 0, len(spans))
	for k := range spans {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	h := sha256.New()
	for _, k := range keys {
		sp := spans[k]
		fmt.Fprintf(h, "%s/%d/%d-%d;", k.topic, k.partition, sp.first, sp.last)
	}
	return "sink-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// retry runs f until it succeeds or ctx ends, backing off while
// ClickHouse is unavailable. Other errors (bad data, a bug) are fatal.
func (r *run) retry(ctx context.Context, what string, f func() error) error {
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			if attempt > 1 {
				r.s.unavailable.Store(nil)
				r.s.log.Info("ClickHouse is back", "op", what, "attempts", attempt)
			}
			return nil
		}
		if !errors.Is(err, analytics.ErrUnavailable) {
			return fmt.Errorf("sink: %s: %w", what, err)
		}
		r.s.unavailable.Store(&err)
		r.s.retries.Add(1)
		if attempt == 1 || attempt%10 == 0 {
			r.s.log.Warn("ClickHouse unavailable; the sink lags until it is back", "op", what, "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, r.s.cfg.MaxBackoff)
	}
}
