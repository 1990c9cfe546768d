package scheduler

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// This file keeps a job's row within schema.MaxRowBytes. A row holds its
// spec (bounded by validation) and what its fires leave behind: open
// emissions, pending retries and deferrals, their attempt history, and
// unconfirmed Kafka-target writes. Counts are bounded where they grow
// (MaxOpenFires, MaxAttemptHistory, compactOutcome), but what a tenant can
// make a fire carry (URLs and errors of 2 KB, a recurring job firing faster
// than its retries end) can still add up; bound sheds the least valuable
// part first, so that no tenant can make its row too large for Kafka, which
// would stop the scheduler's processor for every tenant of the partition.

// maxDetail bounds the row's last_detail (an ack's or cancel's reason).
const maxDetail = 1 << 10

// bound sheds from the decision's row until it fits the row budget:
//  1. the attempt history of the oldest fires (the outcomes topic and
//     ClickHouse keep every attempt; only the dead letter's list shortens);
//  2. unconfirmed Kafka-target writes, oldest first (the likeliest stored;
//     what is shed is not written again after a restart);
//  3. open fires, oldest first, closed as dead with an event that says why.
//
// A spec alone cannot exceed the budget (TestLargestReachableRowFits).
func (d *decider) bound(in *input, dec *decision, now time.Time) {
	st := dec.state
	if st == nil || dec.del || heldRow(st) {
		return // a held row is its command, which validation bounds
	}
	st.LastDetail = schema.Truncate(st.GetLastDetail(), maxDetail)
	limit := d.cfg.MaxRowBytes
	size := schema.Size(st)
	if size <= limit {
		return
	}
	before := size
	// size is kept as an estimate while shedding (what an element takes
	// in its list, not counting the shorter length prefixes of what holds
	// it, so it only over-counts), then measured again.
	for _, seq := range fireSeqsOf(st) {
		if size <= limit {
			break
		}
		for _, em := range st.GetOpen() {
			if em.GetFireSeq() == seq {
				size -= listSize(em.History)
				em.History = nil
			}
		}
		for _, p := range st.GetPending() {
			if p.GetFireSeq() == seq {
				size -= listSize(p.History)
				p.History = nil
			}
		}
	}
	size = schema.Size(st)
	for size > limit && len(st.GetUnconfirmed()) > 0 {
		size -= elemSize(st.Unconfirmed[0])
		st.Unconfirmed = st.Unconfirmed[1:]
	}
	for size > limit && len(st.GetOpen()) > 0 {
		seq := st.Open[0].GetFireSeq()
		size -= elemSize(st.Open[0])
		if i := slices.IndexFunc(st.GetPending(), func(p *chimev1.Pending) bool { return p.GetFireSeq() == seq }); i >= 0 {
			size -= elemSize(st.Pending[i])
		}
		d.dropOpen(in, dec, seq,
			fmt.Sprintf("fire %d was closed as dead to keep job %q's row within %d bytes (it had %d)", seq, in.key, limit, before), now)
	}
	d.setTimer(in.key, st)
}

// elemSize is what a message takes as an element of a repeated field: its
// tag, its length prefix and itself.
func elemSize(m proto.Message) int {
	n := schema.Size(m)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

func listSize[M proto.Message](l []M) int {
	n := 0
	for _, m := range l {
		n += elemSize(m)
	}
	return n
}

// fireSeqsOf lists the row's open and pending fires, oldest first, each
// once (a fire waiting for its retry is both open and pending).
func fireSeqsOf(st *chimev1.JobState) []uint64 {
	seqs := make([]uint64, 0, len(st.GetOpen())+len(st.GetPending()))
	for _, em := range st.GetOpen() {
		seqs = append(seqs, em.GetFireSeq())
	}
	for _, p := range st.GetPending() {
		seqs = append(seqs, p.GetFireSeq())
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// dropOpen closes an open fire (and its pending retry) of the decision's
// row as dead, saying why.
func (d *decider) dropOpen(in *input, dec *decision, fireSeq uint64, why string, now time.Time) {
	st := dec.state
	st.Open = slices.DeleteFunc(st.Open, func(e *chimev1.Emission) bool { return e.GetFireSeq() == fireSeq })
	st.Pending = slices.DeleteFunc(st.Pending, func(p *chimev1.Pending) bool { return p.GetFireSeq() == fireSeq })
	ev := d.event(in, st, chimev1.JobEventType_JOB_EVENT_TYPE_DEAD, now)
	ev.FireSeq = fireSeq
	ev.Detail = why
	dec.events = append(dec.events, ev)
}

// deliveredTarget is what an unconfirmed write wrote: its own copy, or the
// spec's target.
func deliveredTarget(st *chimev1.JobState, u *chimev1.Delivery) *chimev1.KafkaTarget {
	if k := u.GetTarget(); k != nil {
		return k
	}
	return st.GetSpec().GetTarget().GetKafka()
}

// keepDeliveredTargets gives the unconfirmed writes that refer to the
// spec's target a copy of it before the spec is replaced by next.
func keepDeliveredTargets(st *chimev1.JobState, next *chimev1.JobSpec) {
	k := st.GetSpec().GetTarget().GetKafka()
	if k == nil || proto.Equal(k, next.GetTarget().GetKafka()) {
		return
	}
	for _, u := range st.GetUnconfirmed() {
		if u.Target == nil {
			u.Target = k
		}
	}
}

// oversized reports a record of the decision that Kafka would refuse. bound
// keeps rows within budget and validation bounds what rows and events carry,
// so this is the last check, for what they missed: the processor writes
// nothing of such a decision instead of failing for every tenant.
func (d decision) oversized() error {
	check := func(what string, m proto.Message) error {
		if n := schema.Size(m); n > schema.MaxRecordBytes {
			return fmt.Errorf("its %s would be %d bytes, over the %d-byte record limit", what, n, schema.MaxRecordBytes)
		}
		return nil
	}
	if d.state != nil && !d.del {
		if err := check("row", d.state); err != nil {
			return err
		}
	}
	for _, due := range d.dues {
		if err := check("due event", due); err != nil {
			return err
		}
	}
	for _, ev := range d.events {
		if err := check("job event", ev); err != nil {
			return err
		}
	}
	for _, k := range d.deliver {
		if err := check("kafka target write", k); err != nil {
			return err
		}
	}
	if d.rejection != nil {
		return check("rejection", d.rejection)
	}
	return nil
}
