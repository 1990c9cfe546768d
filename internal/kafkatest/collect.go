package kafkatest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Collector consumes a topic from its start in the background and keeps
// every record, grouped by the key decode returns. Tests poll it with
// WaitFor instead of sleeping.
type Collector[T any] struct {
	mu    sync.Mutex
	byKey map[string][]T
	all   []T
}

// Collect starts a Collector on topic; it stops when the test ends.
func Collect[T any](t testing.TB, brokers []string, topic string, decode func(r *kgo.Record) (string, T)) *Collector[T] {
	t.Helper()
	return CollectEach(t, brokers, topic, func(r *kgo.Record, keep func(string, T)) { keep(decode(r)) })
}

// CollectEach is Collect for records that hold several values (a batch of
// commands): decode keeps each under its key.
func CollectEach[T any](t testing.TB, brokers []string, topic string, decode func(r *kgo.Record, keep func(key string, v T))) *Collector[T] {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("kafkatest: collect %s: %v", topic, err)
	}
	c := &Collector[T]{byKey: map[string][]T{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				decode(r, func(k string, v T) {
					c.mu.Lock()
					c.byKey[k] = append(c.byKey[k], v)
					c.all = append(c.all, v)
					c.mu.Unlock()
				})
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return c
}

// Get returns the records collected under key so far.
func (c *Collector[T]) Get(key string) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.byKey[key]...)
}

// Count is the number of records collected.
func (c *Collector[T]) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

// CountWhere is the number of records collected that match.
func (c *Collector[T]) CountWhere(match func(T) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.all {
		if match(v) {
			n++
		}
	}
	return n
}

// Keys is the number of distinct keys collected.
func (c *Collector[T]) Keys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// WaitFor polls cond every 20 ms until it holds, failing the test after
// within.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
