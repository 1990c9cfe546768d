// Package dispatcher owns chime's dispatcher: it consumes due events,
// makes the HTTP callbacks, decides what follows each attempt (ack, retry,
// defer, dead letter) and reports every attempt as an outcome.
//
// Flow, per due event:
//
//	due (key ns) ──► consumer.go ──► gate.go ──► lanes.go ──► gate.go ──► call.go ──► classify.go, retry.go
//	                    │            breaker:     slots,       again, and
//	                    │            open → Defer rate limit;  takes the
//	                    │                         too long →   half-open
//	                    │                         Defer        probes
//	                    │   every due ends in: outcomes (key ns), dead-letters, job-commands (Retry/Defer/Ack)
//	                    └── offset committed once all of those are acknowledged
//
// A retry is a command back to the scheduler, never a sleep here: the
// scheduler re-emits the due at not_before with the next attempt number.
package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/promised"
	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// Dispatcher is one dispatcher instance; several with the same topics share
// the due partitions through the consumer group.
type Dispatcher struct {
	lifecycle.Base
	cfg     Config
	log     *slog.Logger
	client  *callClient
	urls    callURLs
	lanes   *lanes
	dedup   *dedup
	recalls *recalls
	// answers batches the answers to the scheduler (answers.go).
	answers *answers
	gate    *gate
	out     *kgo.Client // outcomes and dead letters
	cmds    *producer.Producer
	// The topics publish writes to, named once: a name is built by
	// concatenation (schema.Topics), an allocation per call.
	outcomesTopic, deadLettersTopic string

	// callCtx is cancelled only when a shutdown gives up waiting for calls.
	callCtx    context.Context
	cancelCall context.CancelFunc

	stats struct {
		consumed, completed, calls, duplicates atomic.Int64
		held, probes, resent, early            atomic.Int64
		recalls, dropped                       atomic.Int64
		byClass                                [7]atomic.Int64
	}
}

// Stats are counters since start, the same the dispatcher's metrics export
// (Config.Registerer).
type Stats struct {
	// Consumed due events, Completed ones (results acknowledged by Kafka),
	// Calls made, Duplicates skipped.
	Consumed, Completed, Calls, Duplicates int64
	// Held: dues deferred by their namespace's breaker; Probes: calls
	// sent as half-open probes.
	Held, Probes int64
	// Resent: calls sent again, on new connections, because the first
	// send's connection closed before any byte of an answer (mostly one
	// the endpoint had closed while it sat idle in the pool).
	Resent int64
	// Early: dues that arrived before their fire_at (the scheduler emits
	// ahead of time) and were held until it.
	Early int64
	// Recalls: recalls received (recall.go); Dropped: emissions dropped
	// because they were recalled before their call.
	Recalls, Dropped int64
	// ByClass counts outcomes by class.
	ByClass map[chimev1.OutcomeClass]int64
}

// New returns a dispatcher; Start starts it.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var err error
	d := &Dispatcher{
		cfg:     cfg,
		log:     cfg.Logger,
		client:  newCallClient(&cfg.Guard, cfg.IdleConnTimeout),
		urls:    newCallURLs(),
		lanes:   newLanes(cfg.MaxInFlight, defaultMaxConcurrency, cfg.MaxQueued, maxConnsPerHost),
		dedup:   newDedup(cfg.DedupSize),
		recalls: newRecalls(),

		gate: newGate(cfg.Breakers, cfg.BreakerRamp),

		outcomesTopic:    cfg.Topics.Outcomes(),
		deadLettersTopic: cfg.Topics.DeadLetters(),
	}
	// One Kafka client for commands and outcomes (the producer's): each
	// produce request carries both, half the requests of two clients.
	// Its records linger producerLinger.
	d.cmds, err = producer.New(
		producer.Brokers(cfg.Brokers),
		producer.TopicPrefix(cfg.Topics.Prefix),
		producer.ClientID(cfg.ClientID),
		producer.Clock(cfg.Now),
		producer.SASLPlain(cfg.SASL.User, cfg.SASL.Password),
		producer.KgoOptions(append([]kgo.Opt{kgo.ProducerLinger(producerLinger)}, cfg.KgoOptions...)...),
	)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: producer: %w", err)
	}
	d.out = d.cmds.Client()
	d.answers = newAnswers(d)
	if err := d.registerMetrics(cfg.Registerer); err != nil {
		d.cmds.Close()
		return nil, err
	}
	d.callCtx, d.cancelCall = context.WithCancel(context.Background())
	return d, nil
}

// cutCalls ends the calls in flight: their context is cancelled and their
// connections closed.
func (d *Dispatcher) cutCalls() {
	d.cancelCall()
	d.client.cutAll()
}

// ID is the dispatcher_id this instance reports in outcomes.
func (d *Dispatcher) ID() string { return d.cfg.ID }

// Stats returns the counters.
func (d *Dispatcher) Stats() Stats {
	s := Stats{
		Consumed:   d.stats.consumed.Load(),
		Completed:  d.stats.completed.Load(),
		Calls:      d.stats.calls.Load(),
		Duplicates: d.stats.duplicates.Load(),
		Held:       d.stats.held.Load(),
		Probes:     d.stats.probes.Load(),
		Resent:     d.stats.resent.Load(),
		Early:      d.stats.early.Load(),
		Recalls:    d.stats.recalls.Load(),
		Dropped:    d.stats.dropped.Load(),
		ByClass:    map[chimev1.OutcomeClass]int64{},
	}
	for i := range d.stats.byClass {
		if n := d.stats.byClass[i].Load(); n > 0 {
			s.ByClass[chimev1.OutcomeClass(i)] = n
		}
	}
	return s
}

// result is everything one due produces, published together.
type result struct {
	outcome *chimev1.CallbackOutcome
	dead    *chimev1.DeadLetter
	cmds    []*chimev1.JobCommand
	// published, if set, learns whether the result is in Kafka before the
	// due completes.
	published func(ok bool)
}

// handle takes one due event from decoding to its results acknowledged by
// Kafka, then calls then once: with false when the results may not be in
// Kafka (the offset must then not be committed). owned ends when the due's
// partition is revoked: a due still waiting for admission is then
// abandoned to the new owner rather than called twice.
//
// handle returns once the call is made and its results handed to the
// producer, before Kafka acknowledged them: the goroutine is free for the
// next due while the answers linger for their batch (answers.go), and then
// runs on the producer's callback.
func (d *Dispatcher) handle(owned context.Context, due *chimev1.Due, consumed time.Time, then func(ok bool)) {
	key := emissionOf(due)
	for {
		f, mine, seen := d.dedup.begin(key)
		if seen {
			d.stats.duplicates.Add(1)
			then(true)
			return
		}
		if mine {
			finish := func(ok bool) {
				d.dedup.finish(key, f, ok)
				then(ok)
			}
			if res, ok := d.process(owned, due, key, consumed); res != nil {
				d.publish(d.callCtx, *res, finish)
			} else {
				finish(ok)
			}
			return
		}
		select {
		case <-f.done:
			if f.ok {
				d.stats.duplicates.Add(1)
				then(true)
				return
			}
		case <-owned.Done():
			then(false)
			return
		}
	}
}

// producerLinger is how long the dispatcher's outcomes and answers gather
// in its client before a produce request takes them. Nothing waits on them
// but the commit of their due and the breaker's and the scheduler's view,
// which a few milliseconds do not change; at a steady 2,000 calls a second
// over 6 partitions, 2 ms made nearly a request per outcome, and each
// costs the broker more than the records in it (docs/capacity.md).
const producerLinger = 10 * time.Millisecond

// process decides and calls, and returns the result to publish, or nil
// and whether the due is done without one. The call and the publishing
// run on callCtx: once started they finish even if the partition moves,
// so their results are not lost (the new owner may repeat the call; the
// Idempotency-Key says so).
func (d *Dispatcher) process(owned context.Context, due *chimev1.Due, em emission, consumed time.Time) (*result, bool) {
	if d.recalls.recalled(em) {
		d.stats.dropped.Add(1)
		return nil, true
	}
	name := due.GetNamespace()
	ns := d.cfg.Namespaces.Namespace(name)
	if res := d.expired(due, ns); res != nil {
		return res, true
	}
	// An open breaker defers at once, without queueing in the lane.
	if v := d.gate.peek(due, d.cfg.Now()); !v.allow {
		res := d.held(due, v)
		return &res, true
	}
	ln := d.lanes.get(due, ns)
	// Parsed once (remembered, callurl.go): admission needs its host's
	// gate, the call the rest.
	u := d.urls.parse(due.GetCallback().GetUrl())
	adm, kind, ok := d.lanes.acquire(owned, ln, u.gate, time.Now().Add(d.cfg.AdmissionWait))
	if !ok {
		if owned.Err() != nil {
			return nil, false
		}
		res := d.deferred(due, kind)
		return &res, true
	}
	if owned.Err() != nil {
		adm.release()
		return nil, false
	}
	if res := d.expired(due, ns); res != nil {
		adm.release()
		return res, true
	}
	if d.recalls.recalled(em) {
		// Recalled while it waited for admission.
		adm.release()
		d.stats.dropped.Add(1)
		return nil, true
	}
	// Asked again right before the call: the state may have changed while
	// the due waited for admission, and only this answer takes a probe.
	v := d.gate.take(due, d.cfg.Now())
	if !v.allow {
		adm.release()
		res := d.held(due, v)
		return &res, true
	}
	d.stats.calls.Add(1)
	cr := d.call(due, ns, u, consumed)
	adm.release()
	if d.callCtx.Err() != nil {
		d.gate.giveBack(due, v)
		return nil, false // shutdown cut the call short: the next owner makes it
	}
	res := d.decide(due, ns, cr)
	res.outcome.Probe = v.probe
	if v.probe {
		d.stats.probes.Add(1)
		res.published = func(ok bool) {
			// A probe whose outcome the breaker never sees (not published)
			// or does not count (a refused URL says nothing about the
			// client) is given back: another due becomes the probe, or the
			// half-open breaker would wait for it forever.
			if counted, _ := circuit.Classify(res.outcome); !ok || !counted {
				d.gate.giveBack(due, v)
			}
		}
	}
	return &res, true
}

// expired answers a due whose relevancy deadline has passed. The deadline
// is the due's own (the scheduler sets it from the job's window, else the
// namespace's); a due without one takes the namespace's relevancy_window
// as the dispatcher reads it now (set after the due was emitted, or a due
// from a scheduler before the namespace lookup). nil: not expired (a
// pointer, so that the common answer allocates nothing: a result held in a
// variable whose address escapes is on the heap whether or not it is used).
func (d *Dispatcher) expired(due *chimev1.Due, ns *chimev1.NamespaceConfig) *result {
	now := d.cfg.Now()
	var deadline time.Time
	switch {
	case due.GetDeadline() != nil:
		deadline = due.GetDeadline().AsTime()
	case ns.GetRelevancyWindow().AsDuration() > 0 && due.GetScheduledAt() != nil:
		deadline = due.GetScheduledAt().AsTime().Add(ns.GetRelevancyWindow().AsDuration())
	default:
		return nil
	}
	if !now.After(deadline) {
		return nil
	}
	o := d.outcome(due, chimev1.OutcomeClass_OUTCOME_CLASS_EXPIRED, now, now)
	o.ErrorKind = kindExpired
	o.Error = fmt.Sprintf("relevancy deadline %s passed; not sent", deadline.UTC().Format(time.RFC3339Nano))
	// A dead letter too: a fire that was never sent is what an operator
	// replays after an outage (docs/api.md, Dead letters).
	res := d.dead(due, result{outcome: o}, chimev1.AckResult_ACK_RESULT_EXPIRED, o.Error)
	return &res
}

// deferred hands a due held back by its namespace's limits back to the
// scheduler without charging an attempt.
func (d *Dispatcher) deferred(due *chimev1.Due, kind string) result {
	reason := fmt.Sprintf("namespace %s: waited %s for its %s; deferred", due.GetNamespace(), d.cfg.AdmissionWait, map[string]string{kindRateLimit: "rate limit", kindConcurrency: "concurrency cap"}[kind])
	return d.deferTo(due, kind, reason, d.cfg.Now().Add(deferSpread(d.cfg.DeferDelay)))
}

// held hands a due held back by its namespace's breaker back to the
// scheduler, for its place in the ramp behind the breaker's next check
// (gate.go), without charging an attempt.
func (d *Dispatcher) held(due *chimev1.Due, v verdict) result {
	d.stats.held.Add(1)
	return d.deferTo(due, kindBreaker, v.why(due.GetNamespace()), d.gate.notBefore(v, due.GetIdempotencyKey()))
}

func (d *Dispatcher) deferTo(due *chimev1.Due, kind, reason string, next time.Time) result {
	now := d.cfg.Now()
	o := d.outcome(due, chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED, now, now)
	o.ErrorKind, o.Error = kind, reason
	o.WillRetry, o.NextAttemptAt = true, timestamppb.New(next)
	return result{outcome: o, cmds: []*chimev1.JobCommand{command.Defer(command.EmissionOf(due), next, reason)}}
}

// decide turns a call's result into the outcome and what follows it.
func (d *Dispatcher) decide(due *chimev1.Due, ns *chimev1.NamespaceConfig, cr callResult) result {
	now := d.cfg.Now()
	o := d.outcome(due, cr.class, cr.started, now)
	o.StatusCode = int32(cr.status)
	o.Latency = durationpb.New(cr.latency)
	o.ErrorKind, o.Error = cr.errKind, cr.err
	o.BodySnippet = cr.body
	o.Url, o.Method = cr.url, cr.method
	attempt := max(due.GetAttempt(), 1)
	res := result{outcome: o}

	switch cr.class {
	case chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS:
		res.cmds = append(res.cmds, d.ack(due, chimev1.AckResult_ACK_RESULT_SUCCEEDED, ""))
		return res
	case chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE:
		p := resolvePolicy(due.GetRetry(), ns.GetRetry())
		if attempt >= p.MaxAttempts {
			return d.dead(due, res, chimev1.AckResult_ACK_RESULT_DEAD,
				fmt.Sprintf("retries exhausted: attempt %d of %d failed (%s)", attempt, p.MaxAttempts, describe(cr)))
		}
		delay, fromHeader := retryDelay(p, attempt, cr.retryAfter, now)
		next := now.Add(delay)
		if p.MaxElapsed > 0 && due.GetScheduledAt() != nil && next.Sub(due.GetScheduledAt().AsTime()) > p.MaxElapsed {
			return d.dead(due, res, chimev1.AckResult_ACK_RESULT_DEAD,
				fmt.Sprintf("retries exhausted: the next attempt at %s would exceed max_elapsed %s after the scheduled time (%s)", next.UTC().Format(time.RFC3339), p.MaxElapsed, describe(cr)))
		}
		reason := describe(cr)
		if fromHeader {
			reason += "; Retry-After " + cr.retryAfter
		}
		o.WillRetry, o.NextAttemptAt = true, timestamppb.New(next)
		res.cmds = append(res.cmds, command.Retry(command.EmissionOf(due), attempt+1, next, reason, historyEntry(o)))
		return res
	case chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED:
		return d.dead(due, res, chimev1.AckResult_ACK_RESULT_FAILED, "refused: "+cr.err)
	default: // permanent
		return d.dead(due, res, chimev1.AckResult_ACK_RESULT_FAILED, "permanent: "+describe(cr))
	}
}

func describe(cr callResult) string {
	if cr.status != 0 {
		return "HTTP " + strconv.Itoa(cr.status)
	}
	return cr.errKind + ": " + cr.err
}

// historySnippet is how much of a failed attempt's response body its
// history entry keeps: the row and every later due event carry it.
const historySnippet = 256

// historyEntry is the copy of a failed attempt that the Retry command hands
// to the scheduler for the fire's history.
func historyEntry(o *chimev1.CallbackOutcome) *chimev1.CallbackOutcome {
	h := proto.CloneOf(o)
	if len(h.BodySnippet) > historySnippet {
		h.BodySnippet = h.BodySnippet[:historySnippet]
	}
	return h
}

// wholeAttempt fills in what the scheduler leaves out of a fire's history
// because the job's row already says it (scheduler.compactOutcome): a dead
// letter's attempts each name their job and callback.
func wholeAttempt(due *chimev1.Due, h *chimev1.CallbackOutcome) *chimev1.CallbackOutcome {
	if h.GetNamespace() != "" && h.GetUrl() != "" && h.GetMethod() != "" {
		return h
	}
	h = proto.CloneOf(h)
	if h.Namespace == "" {
		h.Namespace, h.JobId = due.GetNamespace(), due.GetJobId()
	}
	if h.Url == "" {
		h.Url = due.GetCallback().GetUrl()
	}
	if h.Method == "" {
		h.Method = cmp.Or(due.GetCallback().GetMethod(), http.MethodPost)
	}
	return h
}

// dead adds the dead letter and the closing ack. The dead letter carries
// the due (callback, retry policy, labels) and every attempt of the fire:
// the earlier ones from the due's history (kept by the scheduler from the
// Retry commands), then this one.
func (d *Dispatcher) dead(due *chimev1.Due, res result, ack chimev1.AckResult, reason string) result {
	attempts := make([]*chimev1.CallbackOutcome, 0, len(due.GetHistory())+1)
	for _, h := range due.GetHistory() {
		attempts = append(attempts, wholeAttempt(due, h))
	}
	attempts = append(attempts, res.outcome)
	res.dead = &chimev1.DeadLetter{
		EventId:  emissionOf(due).eventID("dl-"),
		Due:      due,
		Attempts: attempts,
		Reason:   reason,
		At:       timestamppb.New(d.cfg.Now()),
	}
	res.cmds = append(res.cmds, d.ack(due, ack, reason))
	return res
}

func (d *Dispatcher) ack(due *chimev1.Due, r chimev1.AckResult, detail string) *chimev1.JobCommand {
	return command.Ack(command.EmissionOf(due), max(due.GetAttempt(), 1), r, detail)
}

// outcome starts the outcome of due. Its event_id derives from the
// emission, so a replayed due produces the same ID and consumers
// deduplicate it.
func (d *Dispatcher) outcome(due *chimev1.Due, class chimev1.OutcomeClass, started, finished time.Time) *chimev1.CallbackOutcome {
	// One allocation for the outcome and its two instants (three in the
	// generated types'): the dispatcher makes one for every call.
	p := &struct {
		o                 chimev1.CallbackOutcome
		started, finished timestamppb.Timestamp
	}{}
	p.started.Seconds, p.started.Nanos = started.Unix(), int32(started.Nanosecond())
	p.finished.Seconds, p.finished.Nanos = finished.Unix(), int32(finished.Nanosecond())
	p.o = chimev1.CallbackOutcome{
		StartedAt:    &p.started,
		FinishedAt:   &p.finished,
		EventId:      emissionOf(due).eventID("out-"),
		Namespace:    due.GetNamespace(),
		JobId:        due.GetJobId(),
		FireSeq:      due.GetFireSeq(),
		Attempt:      max(due.GetAttempt(), 1),
		Class:        class,
		ScheduledAt:  due.GetScheduledAt(),
		DispatcherId: d.cfg.ID,
		Url:          due.GetCallback().GetUrl(),
		Method:       due.GetCallback().GetMethod(),
	}
	return &p.o
}

// publish writes the outcome, dead letter and commands, and calls then
// once Kafka acknowledged all of them (ok), or one failed. It does not
// wait: then runs on the producer's callback (or at once, when nothing
// could be produced), so it must not block.
func (d *Dispatcher) publish(ctx context.Context, res result, then func(ok bool)) {
	p := &publishing{d: d, res: res, then: then}
	// One share for publish itself, given up at its end: then cannot run
	// before every record is handed to the producer.
	p.left.Store(1)
	ns := res.outcome.GetNamespace()
	if res.outcome.GetMethod() == "" {
		res.outcome.Method = http.MethodPost
	}
	p.produce(ctx, d.outcomesTopic, ns, res.outcome)
	if res.dead != nil {
		p.produce(ctx, d.deadLettersTopic, ns, res.dead)
	}
	for _, c := range res.cmds {
		// The due carried something the scheduler would reject (fire_seq
		// 0, say): it could never be applied; say so and do not hold the
		// partition for it.
		command.Stamp(c, d.cfg.Now())
		if err := schema.ValidateCommand(c, schema.ValidateOptions{}); err != nil {
			d.log.Error("command for due is invalid; not sent", "namespace", c.GetNamespace(), "job", c.GetJobId(), "err", err)
			continue
		}
		p.left.Add(1)
		d.answers.publish(ctx, c, p.acked)
	}
	p.acked(nil)
}

// publishing is one result on its way to Kafka: it counts the records not
// yet acknowledged and keeps the first failure.
type publishing struct {
	d    *Dispatcher
	res  result
	then func(ok bool)
	left atomic.Int32

	mu       sync.Mutex
	firstErr error
}

func (p *publishing) produce(ctx context.Context, topic, key string, m proto.Message) {
	v, err := schema.Marshal(m)
	if err != nil {
		p.fail(err)
		return
	}
	p.left.Add(1)
	p.d.out.Produce(ctx, promised.New(ctx, topic, key, v, p), published)
}

// published is the promise of every result record: it acknowledges the
// record to its publishing (promised).
func published(r *kgo.Record, err error) {
	if err != nil {
		err = fmt.Errorf("produce to %s: %w", r.Topic, err)
	}
	promised.Value[*publishing](r).acked(err)
}

func (p *publishing) fail(err error) {
	p.mu.Lock()
	if p.firstErr == nil {
		p.firstErr = err
	}
	p.mu.Unlock()
}

// acked records one acknowledgement (err nil) or failure; the last one
// ends the publishing.
func (p *publishing) acked(err error) {
	if err != nil {
		p.fail(err)
	}
	if p.left.Add(-1) != 0 {
		return
	}
	p.mu.Lock()
	err = p.firstErr
	p.mu.Unlock()
	if err != nil && p.d.callCtx.Err() == nil {
		o := p.res.outcome
		p.d.log.Error("publishing results failed; the due stays uncommitted and is redelivered after a restart or rebalance",
			"namespace", o.GetNamespace(), "job", o.GetJobId(), "fire_seq", o.GetFireSeq(), "err", err)
	}
	if err == nil {
		p.d.stats.byClass[p.res.outcome.GetClass()].Add(1)
	}
	if p.res.published != nil {
		p.res.published(err == nil)
	}
	p.then(err == nil)
}
