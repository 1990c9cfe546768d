// Package promised produces records whose promise needs a value of its
// own (whom to tell, which write it was) without a closure per record.
//
// franz-go calls a record's promise with the record. A closure capturing
// the value costs an allocation a record, besides the record itself; on
// the hot path (the scheduler's table, the dispatcher's outcomes) that
// was one of every few allocations a fired job makes. Here the record,
// the value and the context the record is produced under are one
// allocation: the record's Context carries the value, and every record
// of a kind shares one promise function that reads it back (Value).
package promised

import (
	"context"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// record is a kgo.Record carrying v for its promise.
type record[T any] struct {
	kgo.Record
	ctx carrier[T]
}

// carrier is the record's context: ctx's cancellation (franz-go fails a
// record whose context ends while it waits for room in the buffer) and
// the value.
type carrier[T any] struct {
	context.Context
	v T
}

// New returns a record on topic with key and value, produced under ctx,
// carrying v. The key is not copied: franz-go only reads a record's key
// (to partition, encode and compress it), and a Go string never changes.
func New[T any](ctx context.Context, topic, key string, value []byte, v T) *kgo.Record {
	r := &record[T]{ctx: carrier[T]{Context: ctx, v: v}}
	r.Topic, r.Key, r.Value = topic, KeyBytes(key), value
	r.Context = &r.ctx
	return &r.Record
}

// Value is what the record, made by New with the same T, carries. It
// panics on any other record: a promise given records of another kind is
// a programming error, as a wrong type assertion is.
func Value[T any](r *kgo.Record) T {
	return r.Context.(*carrier[T]).v
}

// KeyBytes is s as the bytes of a record's key, without a copy. The
// bytes must not be written to; franz-go does not write to a key.
func KeyBytes(s string) []byte {
	if s == "" {
		return []byte{} // an empty key, not a null one, as []byte("") is
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
