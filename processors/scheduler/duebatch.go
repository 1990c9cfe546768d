package scheduler

import (
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Due events go out in batches: what a round of the pump's ticks decided
// in one partition of the table (pump.go), or what one command record
// decided (a batch of creates due now), is written as a record per due
// partition (chimev1.Due's batch), not a record per fire. A burst of a
// hundred thousand fires due at one instant is then a few hundred records
// for Kafka and the dispatchers instead of a hundred thousand.
//
// Order: a recall must follow the due event it takes back on their
// partition. Both go through the same batcher, the partition's, in the
// order decided: the batcher is guarded by the partition storage's writer
// lock, like the rows, and whoever holds it sends what it holds (a tick
// round at its end, a command at the end of its record), so what a tick
// left in it goes out before what a command adds after it, through the
// processor's one producer, which keeps each partition's records in the
// order sent.
//
// Nothing is held across a write the decision depends on: a due's row
// keeps its fire open until the answer, so a due lost with a crashed
// process is sent again by the next incarnation (recover_at), as before
// when the due had a record of its own.

// dueBatcher holds the due events (and recalls) of one table partition
// that are decided and not sent yet, in the order decided. The partition
// storage's writer lock guards it.
type dueBatcher struct {
	held []heldDue
}

type heldDue struct {
	key string
	due *chimev1.Due
}

// maxDueBatchBytes bounds a batch record: half of what a record may hold,
// so that a batch of due events never nears the broker's limit (each due
// fits a record alone: bound.go).
const maxDueBatchBytes = schema.MaxRecordBytes / 2

func (b *dueBatcher) add(key string, due *chimev1.Due) {
	b.held = append(b.held, heldDue{key: key, due: due})
}

// flush sends what is held and forgets it: a record per due partition of
// the n the due topic has (each due alone while n is not known), through
// emit, each keyed like its first due so that it lands where they all
// belong.
func (b *dueBatcher) flush(n int32, emit func(key string, due *chimev1.Due)) {
	held := b.held
	b.held = nil
	if len(held) == 0 {
		return
	}
	if n <= 0 || len(held) == 1 {
		for _, h := range held {
			emit(h.key, h.due)
		}
		return
	}
	type open struct {
		key   string
		dues  []*chimev1.Due
		bytes int
	}
	var order []*open
	byPart := map[int32]*open{}
	send := func(o *open) {
		if len(o.dues) == 1 {
			emit(o.key, o.dues[0])
			return
		}
		emit(o.key, &chimev1.Due{Batch: o.dues})
	}
	for _, h := range held {
		p := schema.PartitionOf(h.key, n)
		size := schema.Size(h.due) + 8 // with its tag and length in the batch
		o := byPart[p]
		if o != nil && o.bytes+size > maxDueBatchBytes {
			// Full: it goes now, before the next of its partition.
			send(o)
			o.dues = nil
			o = nil
		}
		if o == nil {
			o = &open{key: h.key}
			byPart[p] = o
			order = append(order, o)
		}
		o.dues = append(o.dues, h.due)
		o.bytes += size
	}
	for _, o := range order {
		if len(o.dues) > 0 {
			send(o)
		}
	}
}
