package analytics

import (
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// FuzzRecords: the sink stores whatever decodes on the outcomes,
// transitions, job-events and dead-letters topics. Any such record gets a
// row time and day, and turns into one value per column of its table
// without a panic; every column gets as many values as there are rows.
func FuzzRecords(f *testing.F) {
	o, _ := proto.Marshal(&chimev1.CallbackOutcome{EventId: "e", Namespace: "acme", FinishedAt: timestamppb.Now()})
	dl, _ := proto.Marshal(&chimev1.DeadLetter{EventId: "d", Due: &chimev1.Due{Namespace: "acme"}, Attempts: []*chimev1.CallbackOutcome{{}}})
	f.Add(uint8(0), o, int64(1))
	f.Add(uint8(3), dl, int64(-5))
	f.Add(uint8(1), []byte{0x22, 0x06, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, int64(1<<62))
	f.Fuzz(func(t *testing.T, which uint8, raw []byte, offset int64) {
		msgs := []proto.Message{new(chimev1.CallbackOutcome), new(chimev1.BreakerTransition), new(chimev1.JobEvent), new(chimev1.DeadLetter)}
		m := msgs[int(which)%len(msgs)]
		if proto.Unmarshal(raw, m) != nil {
			return
		}
		pos := Pos{Partition: 1, Offset: offset, Time: time.Unix(0, offset%(1<<62))}
		_ = DayOf(RowTime(m, pos))
		var b Batch
		if err := b.Add(m, pos); err != nil {
			t.Fatal(err)
		}
		for _, appendRows := range []func(driver.Batch) error{
			func(bt driver.Batch) error { return appendOutcomes(bt, &b.outcomes) },
			func(bt driver.Batch) error { return appendTransitions(bt, &b.transitions) },
			func(bt driver.Batch) error { return appendJobEvents(bt, &b.events) },
			func(bt driver.Batch) error { return appendDeadLetters(bt, &b.dead) },
		} {
			rec := &columnRecorder{}
			if err := appendRows(rec); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// columnRecorder is the part of a ClickHouse batch the append functions
// use: columns, each taking one slice of values.
type columnRecorder struct {
	driver.Batch
	cols []*recordedColumn
}

func (r *columnRecorder) Column(i int) driver.BatchColumn {
	for len(r.cols) <= i {
		r.cols = append(r.cols, &recordedColumn{})
	}
	return r.cols[i]
}

type recordedColumn struct {
	driver.BatchColumn
	values []any
}

func (c *recordedColumn) Append(v any) error {
	c.values = append(c.values, v)
	return nil
}
