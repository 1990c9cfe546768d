package promised

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

type write struct{ n int }

func TestRecordCarriesItsValue(t *testing.T) {
	t.Parallel()
	w := &write{n: 7}
	r := New(context.Background(), "t", "ns/job", []byte("v"), w)
	if r.Topic != "t" || string(r.Key) != "ns/job" || string(r.Value) != "v" {
		t.Fatalf("record = %q %q %q", r.Topic, r.Key, r.Value)
	}
	if got := Value[*write](r); got != w {
		t.Fatalf("Value = %p, want %p", got, w)
	}
}

// franz-go fails a record whose context ends while it waits; the
// carrier must pass the caller's cancellation through.
func TestRecordKeepsTheContextsCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r := New(ctx, "t", "k", nil, 1)
	if r.Context.Err() != nil {
		t.Fatal("context ended before its cancel")
	}
	cancel()
	select {
	case <-r.Context.Done():
	default:
		t.Fatal("the record's context did not end with its parent")
	}
	if !errors.Is(r.Context.Err(), context.Canceled) {
		t.Fatalf("Err = %v", r.Context.Err())
	}
}

func TestKeyBytes(t *testing.T) {
	t.Parallel()
	// Never nil: an empty key stays empty, not null, as []byte("") is.
	for _, in := range []string{"", "a", "ns/job-1"} {
		got := KeyBytes(in)
		if string(got) != in || got == nil {
			t.Errorf("KeyBytes(%q) = %q (nil %v)", in, got, got == nil)
		}
	}
}

// One allocation a record: the record, its context and value together.
func TestNewAllocatesOnce(t *testing.T) {
	w := &write{}
	var sink *kgo.Record
	n := testing.AllocsPerRun(100, func() { sink = New(context.Background(), "t", "key", nil, w) })
	if n != 1 {
		t.Fatalf("New allocates %v times, want 1", n)
	}
	_ = sink
}
