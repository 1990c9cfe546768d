package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The consumer hands each due event to its own goroutine (lanes.go decides
// when it may be called), up to MaxBuffered at a time and the rest in the
// order taken as earlier ones finish, so offsets complete out of order. Per
// partition it keeps the offsets taken and not yet committed, in order;
// the committable offset is one past the longest completed prefix. A due
// whose results never reached Kafka stays uncompleted, so its offset, and
// everything after it, is redelivered to whoever owns the partition next.
//
// Rebalances: BlockRebalanceOnPoll makes revocations happen only between
// polls, so a poll never returns records of a partition already revoked.
// On revoke the partition's calls get RevokeWait to finish, the completed
// prefix is committed, and the partition is forgotten: calls still running
// publish their results but no longer commit (the new owner replays them,
// and the Idempotency-Key lets the endpoint see it is a repeat).
//
// Handover. Completed offsets beyond the committed prefix would be
// replayed to the partition's next owner. So each commit carries them in
// the offset's metadata (donemeta.go), and on assignment the new owner
// reads the metadata back and skips those offsets: their results are
// already in Kafka. Best effort: what completed after the last commit is
// still replayed (the Idempotency-Key lets the endpoint see the repeat).
//
// Lock order: consumer.commitMu, then consumer.mu.

type entry struct {
	offset int64
	epoch  int32
	done   bool
	// weight is how many due events the record holds.
	weight int
}

type partState struct {
	// owned ends when the partition is revoked or lost.
	owned     context.Context
	disown    context.CancelFunc
	entries   []*entry // taken and not committable yet, in offset order
	inflight  int
	next      int64 // one past the completed prefix; -1 none yet
	nextEpoch int32
	committed int64
	// doneSeq counts completions; committedSeq is doneSeq as of the last
	// commit: while they differ, the done set beyond the prefix changed
	// and is committed again even if the prefix did not move.
	doneSeq, committedSeq uint64
	// skip are offsets the previous owner completed beyond its committed
	// prefix (from the commit metadata).
	skip map[int64]bool
}

type consumer struct {
	d     *Dispatcher
	cl    *kgo.Client
	topic string

	// commitMu makes each commit (snapshot of the prefixes, then the
	// request) one step, so a periodic commit cannot land after a
	// revoke's commit with older offsets.
	commitMu sync.Mutex

	mu    sync.Mutex
	cond  *sync.Cond // broadcast when a partition's inflight drops
	parts map[int32]*partState
	// skips are read from the commit metadata on assignment, for
	// partitions whose first record has not arrived yet.
	skips map[int32]map[int64]bool
	// buffered counts dues taken and not finished, over all partitions
	// (revoked ones too: their calls still hold resources): a record
	// weighs as many dues as it holds, until all of them finished.
	buffered int
	paused   bool
	// active counts the dues handed to their goroutines and not finished;
	// queue holds, in order, the dues taken beyond MaxBuffered active.
	// A poll returns whatever its fetch held, which the pause cannot
	// bound: a fetch of batched (and compressed) due records held tens of
	// thousands of dues, and handing all of them to goroutines at once
	// made them wait for slots beyond AdmissionWait, and be deferred:
	// an outcome, an event and an emission more for each, for work that
	// was only queued (make bench's burst with compressed due records:
	// 111,468 deferrals for 100,000 jobs, 8,687 callbacks/s).
	active int
	queue  []*dueRun

	handlers sync.WaitGroup
	// workers run the calls (workers.go).
	workers *workers
	// holder keeps the dues that came early until their time (hold.go).
	holder *holder
}

// Name implements lifecycle.Part.
func (d *Dispatcher) Name() string { return "dispatcher" }

// Start consumes due events until Stop or ctx ends, then lets calls in
// flight finish (up to RevokeWait), commits what completed and leaves the
// group. It is ready (Started) once it consumes.
func (d *Dispatcher) Start(ctx context.Context) error { return d.Go(ctx, d.run) }

func (d *Dispatcher) run(ctx context.Context, ready func()) error {
	c := &consumer{d: d, topic: d.cfg.Topics.Due(), parts: map[int32]*partState{}, skips: map[int32]map[int64]bool{},
		workers: newWorkers(workerIdle, d.cfg.MaxBuffered), holder: newHolder(d.callCtx, d.cfg.HoldTick)}
	defer c.workers.close()
	defer c.holder.close()
	c.cond = sync.NewCond(&c.mu)
	defer d.closeProducers()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{
		kgo.SeedBrokers(d.cfg.Brokers...),
		kgo.ClientID(d.cfg.ClientID + "-consumer"),
		kgo.FetchMaxWait(schema.IdleFetchWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, append(append(d.cfg.Membership.Kgo(), d.cfg.SASL.Kgo()...), d.cfg.KgoOptions...)...),
		kgo.ConsumerGroup(d.cfg.Topics.DispatcherGroup()),
		kgo.ConsumeTopics(c.topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)...)
	if err != nil {
		return fmt.Errorf("dispatcher: kafka consumer: %w", err)
	}
	c.cl = cl

	commitCtx, stopCommits := context.WithCancel(context.Background())
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		t := time.NewTicker(d.cfg.CommitInterval)
		defer t.Stop()
		for {
			select {
			case <-commitCtx.Done():
				return
			case <-t.C:
				c.commit(commitCtx, nil)
			}
		}
	}()

	actx, stopAnswers := context.WithCancel(context.Background())
	answersDone := make(chan struct{})
	go func() {
		defer close(answersDone)
		d.answers.run(actx)
	}()
	defer func() {
		stopAnswers()
		<-answersDone
	}()

	d.log.Info("dispatcher consuming", "topic", c.topic, "group", d.cfg.Topics.DispatcherGroup(), "id", d.cfg.ID)
	ready()
	for {
		fs := cl.PollRecords(ctx, 4096)
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				d.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		consumed := time.Now()
		fs.EachRecord(func(r *kgo.Record) { c.start(r, consumed) })
		cl.AllowRebalance()
	}

	// Shutdown: stop taking work, let calls finish (their answers go out
	// at once: their dues complete only when the answers are stored),
	// commit, leave.
	c.dropQueued(nil)
	d.answers.drain()
	c.waitHandlers(d.cfg.RevokeWait)
	stopAnswers()
	<-answersDone
	stopCommits()
	<-committerDone
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c.commit(fctx, nil)
	cancel()
	c.mu.Lock()
	for _, st := range c.parts {
		st.disown()
	}
	c.parts = map[int32]*partState{} // the final revoke has nothing left to do
	c.cond.Broadcast()
	c.mu.Unlock()
	cl.CloseAllowingRebalance()
	return nil
}

func (d *Dispatcher) closeProducers() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.cmds.Flush(ctx) // outcomes too: one client
	d.cmds.Close()
	d.cutCalls()
}

// start tracks r and hands each due event it holds (one, or the
// scheduler's batch of them) to its goroutine. The record completes once
// all of them did.
func (c *consumer) start(r *kgo.Record, consumed time.Time) {
	dues, err := schema.DecodeDues(r.Value)
	n := len(dues)
	c.d.stats.consumed.Add(int64(n))
	e := &entry{offset: r.Offset, epoch: r.LeaderEpoch, weight: n}
	c.mu.Lock()
	ps := c.parts[r.Partition]
	if ps == nil {
		ps = &partState{next: -1, committed: -1, skip: c.skips[r.Partition]}
		delete(c.skips, r.Partition)
		ps.owned, ps.disown = context.WithCancel(c.d.callCtx)
		c.parts[r.Partition] = ps
	}
	ps.entries = append(ps.entries, e)
	ps.inflight++
	c.buffered += n
	if !c.paused && c.buffered >= c.d.cfg.MaxBuffered {
		c.paused = true
		c.cl.PauseFetchTopics(c.topic)
	}
	skip := ps.skip[r.Offset]
	if skip {
		delete(ps.skip, r.Offset)
	}
	c.mu.Unlock()

	if skip {
		// The previous owner completed it: its results are in Kafka.
		c.d.stats.duplicates.Add(int64(n))
		c.d.stats.completed.Add(int64(n))
		c.complete(r.Partition, ps, e, true)
		return
	}
	if err != nil {
		// Nothing can be answered for a record that does not decode (no
		// namespace, no job): log it loudly and move on rather than stall
		// the partition behind it.
		c.d.log.Error("due event does not decode; skipped", "err", err, "bytes", len(r.Value))
		c.d.stats.completed.Add(int64(n))
		c.complete(r.Partition, ps, e, true)
		return
	}
	// Each due counts as completed on its own (the metrics count dues);
	// the record, and its offset, only once every one of them is.
	var left atomic.Int32
	left.Store(int32(n))
	var failed atomic.Bool
	done := func(ok bool) {
		if ok {
			c.d.stats.completed.Add(1)
		} else {
			failed.Store(true)
		}
		if left.Add(-1) == 0 {
			c.complete(r.Partition, ps, e, !failed.Load())
		}
	}
	// The record's dues in one allocation, like the dues themselves
	// (schema.DecodeDues). Those that start now are a prefix: once one
	// is queued, the rest queue behind it.
	runs := make([]dueRun, n)
	start := 0
	c.mu.Lock()
	for i, due := range dues {
		runs[i] = dueRun{c: c, due: due, ps: ps, consumed: consumed, done: done}
		if c.active < c.d.cfg.MaxBuffered && len(c.queue) == 0 {
			c.active++
			start++
		} else {
			c.queue = append(c.queue, &runs[i])
		}
	}
	c.mu.Unlock()
	for i := range runs[:start] {
		c.startDue(&runs[i])
	}
}

// dueRun is one due event on its way through the consumer: queued, held
// for its fire_at, handled on a worker, released. Its steps are its
// methods: a due costs an allocation here where a closure for each step
// cost eight (the burst's allocation profile).
type dueRun struct {
	c        *consumer
	due      *chimev1.Due
	ps       *partState
	consumed time.Time
	// done is its record's: whether the due's results are in Kafka.
	done func(ok bool)
}

// release ends an active due: its record learns ok, and the oldest queued
// due takes its place.
func (r *dueRun) release(ok bool) {
	c := r.c
	r.done(ok)
	c.mu.Lock()
	c.active--
	var next *dueRun
	if len(c.queue) > 0 && c.active < c.d.cfg.MaxBuffered {
		next, c.queue[0] = c.queue[0], nil
		c.queue = c.queue[1:]
		if len(c.queue) == 0 {
			c.queue = nil
		}
		c.active++
	}
	c.mu.Unlock()
	if next != nil {
		c.startDue(next)
	}
}

// finish ends a started due (one counted in handlers). It is released
// first: a shutdown that waits for the handlers finds its record
// complete.
func (r *dueRun) finish(ok bool) {
	defer r.c.handlers.Done()
	r.release(ok)
}

// work handles the due, on a worker.
func (r *dueRun) work() { r.c.d.handle(r.ps.owned, r.due, r.consumed, r.finish) }

// start runs a held due at its time (heldRun).
func (r *dueRun) start() {
	if r.ps.owned.Err() != nil { // lost, or the calls were cut
		r.drop()
		return
	}
	r.c.workers.spawn(r.work)
}

// recalled: taken back before its time, nothing to call or report.
func (r *dueRun) recalled() {
	r.c.d.stats.dropped.Add(1)
	r.finish(true)
}

// drop gives up a held due: the partition's next owner has it.
func (r *dueRun) drop() { r.finish(false) }

// dropQueued takes the queued dues of the partitions ps (all, if ps is
// nil) out of the queue, uncompleted: their records are not committed,
// and the partitions' next owner takes them again.
func (c *consumer) dropQueued(ps []int32) {
	c.mu.Lock()
	drop := map[*partState]bool{}
	for _, p := range ps {
		if st := c.parts[p]; st != nil {
			drop[st] = true
		}
	}
	var dropped []*dueRun
	keep := c.queue[:0]
	for _, q := range c.queue {
		if ps == nil || drop[q.ps] {
			dropped = append(dropped, q)
		} else {
			keep = append(keep, q)
		}
	}
	clear(c.queue[len(keep):])
	c.queue = keep
	c.mu.Unlock()
	for _, q := range dropped {
		q.done(false)
	}
}

// startDue hands one due event to its goroutine, or to the holder until
// its time.
func (c *consumer) startDue(r *dueRun) {
	due := r.due
	if due.GetRecall() {
		c.d.recalls.recall(due)
		c.holder.recall(emissionOf(due))
		c.d.stats.recalls.Add(1)
		r.release(true)
		return
	}
	c.handlers.Add(1)
	// The scheduler emits a due up to its FireLead before its time; the
	// call waits for fire_at (at most maxEarly, against clocks far apart)
	// in the holder (hold.go). It counts as in flight meanwhile: nothing
	// after it is committed, and a new owner of the partition gets it
	// again.
	if wait := time.Until(due.GetFireAt().AsTime()); due.GetFireAt() != nil && wait > 0 {
		c.d.stats.early.Add(1)
		c.holder.add(time.Now().Add(min(wait, maxEarly)), emissionOf(due), r)
		return
	}
	c.workers.spawn(r.work)
}

// maxEarly bounds how long a due is held for its fire_at: a clock that
// runs behind the scheduler's must not hold calls for long.
const maxEarly = time.Minute

// complete records that e finished; ok says the results of all its dues
// are in Kafka (the caller counted them as completed).
func (c *consumer) complete(p int32, ps *partState, e *entry, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps.inflight--
	c.buffered -= e.weight
	if c.paused && c.buffered <= c.d.cfg.MaxBuffered/2 {
		c.paused = false
		c.cl.ResumeFetchTopics(c.topic)
	}
	c.cond.Broadcast()
	if c.parts[p] != ps {
		return // revoked meanwhile: the next owner replays it
	}
	if !ok {
		return // stays in entries, undone: nothing past it is committed
	}
	e.done = true
	ps.doneSeq++
	i := 0
	for i < len(ps.entries) && ps.entries[i].done {
		ps.next, ps.nextEpoch = ps.entries[i].offset+1, ps.entries[i].epoch
		i++
	}
	if i > 0 {
		clear(ps.entries[:i])
		ps.entries = ps.entries[i:]
	}
}

// commit commits the completed prefix of the partitions in only (nil: all),
// with the offsets completed beyond it in the commit's metadata.
func (c *consumer) commit(ctx context.Context, only []int32) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	offsets := map[int32]kgo.EpochOffset{}
	meta := map[int32]string{}
	seqs := map[int32]uint64{}
	c.mu.Lock()
	for p, ps := range c.parts {
		if only != nil && !containsPartition(only, p) {
			continue
		}
		if ps.next <= ps.committed && ps.doneSeq == ps.committedSeq {
			continue
		}
		eo := kgo.EpochOffset{Epoch: ps.nextEpoch, Offset: ps.next}
		if ps.next < 0 {
			if len(ps.entries) == 0 {
				continue
			}
			// Nothing completed in order yet: the first offset taken is
			// where this owner started, committed already or never.
			eo = kgo.EpochOffset{Epoch: ps.entries[0].epoch, Offset: ps.entries[0].offset}
		}
		offsets[p] = eo
		meta[p] = encodeDone(eo.Offset, ps.entries)
		seqs[p] = ps.doneSeq
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				rp := &req.Topics[i].Partitions[j]
				if m, ok := meta[rp.Partition]; ok {
					rp.Metadata = &m
				}
			}
		}
		return nil
	})
	var commitErr error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.topic: offsets}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitResponseErr(resp)
		}
	})
	if commitErr != nil {
		if ctx.Err() == nil {
			c.d.log.Warn("committing offsets failed; will retry", "err", commitErr)
		}
		return
	}
	c.mu.Lock()
	for p, eo := range offsets {
		if ps := c.parts[p]; ps != nil {
			ps.committed = max(ps.committed, eo.Offset)
			ps.committedSeq = max(ps.committedSeq, seqs[p])
		}
	}
	c.mu.Unlock()
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// onAssigned reads, for the newly assigned partitions, the offsets the
// previous owner completed beyond its committed prefix. It runs before
// kgo fetches the committed offsets, so before any record of them
// arrives. A failure only costs the suppression.
func (c *consumer) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	ps := assigned[c.topic]
	if len(ps) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsetsForTopics(fctx, c.d.cfg.Topics.DispatcherGroup(), c.topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		c.d.log.Warn("reading the previous owner's completed offsets failed; its completed dues may be called again", "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range ps {
		o, ok := resp.Lookup(c.topic, p)
		if !ok || o.At < 0 {
			continue
		}
		if skip := decodeDone(o.At, o.Metadata); len(skip) > 0 {
			c.skips[p] = skip
			n += len(skip)
		}
	}
	if n > 0 {
		c.d.log.Info("partitions assigned; skipping dues the previous owner completed", "partitions", ps, "skipped", n)
	}
}

// onRevoked gives the revoked partitions' calls RevokeWait to finish,
// commits their completed prefix and forgets them.
func (c *consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[c.topic]
	if len(ps) == 0 {
		return
	}
	c.dropQueued(ps)
	c.waitPartitions(ps, c.d.cfg.RevokeWait)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c.commit(cctx, ps)
	cancel()
	c.commitMu.Lock() // no periodic commit between the last one and forgetting
	c.forget(ps)
	c.commitMu.Unlock()
	c.d.log.Info("partitions revoked", "partitions", ps)
}

// onLost forgets the partitions: committing is pointless, the group has
// moved on without this member.
func (c *consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if ps := lost[c.topic]; len(ps) > 0 {
		c.dropQueued(ps)
		c.forget(ps)
		c.d.log.Warn("partitions lost", "partitions", ps)
	}
}

func (c *consumer) forget(ps []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		if st := c.parts[p]; st != nil {
			st.disown()
		}
		delete(c.parts, p)
		delete(c.skips, p)
	}
}

// waitPartitions waits until none of ps has calls in flight, or for d.
func (c *consumer) waitPartitions(ps []int32, d time.Duration) {
	timedOut := false
	t := time.AfterFunc(d, func() {
		c.mu.Lock()
		timedOut = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !timedOut {
		busy := false
		for _, p := range ps {
			if st := c.parts[p]; st != nil && st.inflight > 0 {
				busy = true
			}
		}
		if !busy {
			return
		}
		c.cond.Wait()
	}
}

// waitHandlers waits for every call to finish; after d it cuts the calls
// short (their dues stay uncommitted) and waits for them to return.
func (c *consumer) waitHandlers(d time.Duration) {
	done := make(chan struct{})
	go func() { c.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		c.d.log.Warn("calls still running at shutdown; cutting them short, their dues are redelivered", "waited", d)
		c.d.cutCalls()
		<-done
	}
}

func commitResponseErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}
