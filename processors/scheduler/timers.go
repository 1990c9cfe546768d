package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/processors/memstore"

	"github.com/chime-sched/chime/schema/chimev1"
)

// tickSender delivers ticks to the tick topic's partition p. Delivery is
// best effort: a lost tick is re-sent by the pump after TickResend.
type tickSender interface {
	SendTicks(ctx context.Context, partition int32, items []timerindex.Item, sentAt int64)
}

// timers is what every partition's timerStorage shares: the clock, the
// tick sender and the processor's current assignment.
type timers struct {
	cfg        Config
	now        func() time.Time
	sender     tickSender
	tableTopic string

	// onRecovered hears of each actively owned partition that recovered.
	onRecovered func(p int32)

	mu       sync.Mutex
	assigned map[int32]bool
	storages map[int32]*timerStorage
}

func newTimers(cfg Config, tableTopic string, sender tickSender) *timers {
	return &timers{
		cfg:        cfg,
		now:        cfg.Now,
		sender:     sender,
		tableTopic: tableTopic,
		assigned:   map[int32]bool{},
		storages:   map[int32]*timerStorage{},
	}
}

// rebalanced records the active assignment; goka calls it before it builds
// the storages of the new assignment.
func (t *timers) rebalanced(a goka.Assignment) {
	t.mu.Lock()
	t.assigned = make(map[int32]bool, len(a))
	var sts []*timerStorage
	for p := range a {
		t.assigned[p] = true
		if s := t.storages[p]; s != nil {
			sts = append(sts, s)
		}
	}
	t.mu.Unlock()
	// goka closes every storage on a rebalance, so this matters only when
	// the callback comes after a storage finished recovering.
	for _, s := range sts {
		s.startPump()
	}
}

// forget drops a closed storage from the registry.
func (t *timers) forget(p int32, s *timerStorage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.storages[p] == s {
		delete(t.storages, p)
	}
}

func (t *timers) active(p int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.assigned[p]
}

func (t *timers) indexed(p int32, n int) {
	if t.cfg.Logger != nil {
		t.cfg.Logger.Debug("timer index built", "partition", p, "timers", n)
	}
}

// builder gives the scheduler table's partitions their storage in db.
// goka also calls the builder for lookup tables, joins, hot-standby and
// recover-ahead partitions; the scheduler has none of them, and anything
// but its table would get a plain in-memory storage.
func (t *timers) builder(db *jobstore.DB) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		if topic != t.tableTopic {
			return memstore.Builder()(topic, partition)
		}
		ts := newTimerStorage(db.Partition(partition), partition, t)
		t.mu.Lock()
		t.storages[partition] = ts
		t.mu.Unlock()
		return ts, nil
	}
}

func (t *timers) send(ctx context.Context, p int32, items []timerindex.Item, sentAt int64) {
	t.sender.SendTicks(ctx, p, items, sentAt)
}

// noteTimer points the index of partition p at a row's timer when the row
// is held unwritten (the storage sees no write to take it from).
func (t *timers) noteTimer(p int32, key string, at int64) {
	t.mu.Lock()
	st := t.storages[p]
	t.mu.Unlock()
	if st != nil {
		st.noteTimer(key, at)
	}
}

// storage returns partition p's storage, nil if none is open.
func (t *timers) storage(p int32) *timerStorage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.storages[p]
}

// stored is what partition p's store holds of key's row, if it knows it
// without a read (jobstore.Partition.Stored).
func (t *timers) stored(p int32, key string) (*jobstore.RowIndex, bool) {
	if s := t.storage(p); s != nil {
		return s.Stored(key)
	}
	return nil, false
}

// hint tells partition p's store what it holds of key's row.
func (t *timers) hint(p int32, key string, x *jobstore.RowIndex) {
	if s := t.storage(p); s != nil {
		s.Hint(key, x)
	}
}

func (t *timers) activeStorages() []*timerStorage {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sts []*timerStorage
	for p, s := range t.storages {
		if t.assigned[p] {
			sts = append(sts, s)
		}
	}
	return sts
}

// Pending returns the number of rows with a timer in the partitions this
// instance actively owns (as the store applied them).
func (t *timers) Pending() int {
	n := 0
	for _, s := range t.activeStorages() {
		n += s.pendingTimers()
	}
	return n
}

// InWindow returns the number of timers held in memory (the near window)
// in the partitions this instance actively owns.
func (t *timers) InWindow() int {
	n := 0
	for _, s := range t.activeStorages() {
		n += s.windowTimers()
	}
	return n
}

// kgoTickSender produces ticks with franz-go straight into the partition
// that owns the row (ManualPartitioner), not by key hash: the pump knows
// the partition, and hashing would only agree with goka by construction.
type kgoTickSender struct {
	cl     *kgo.Client
	topic  string
	logger *slog.Logger
}

// SendTicks produces asynchronously; ctx ends with the storage, so a broker
// outage that fills the producer's buffer cannot block Close.
func (k *kgoTickSender) SendTicks(ctx context.Context, p int32, items []timerindex.Item, sentAt int64) {
	sent := timestamppb.New(time.Unix(0, sentAt))
	for _, it := range items {
		v, _ := proto.Marshal(&chimev1.Tick{TimerAt: timestamppb.New(time.Unix(0, it.At)), SentAt: sent})
		k.cl.Produce(ctx, &kgo.Record{
			Topic:     k.topic,
			Partition: p,
			Key:       []byte(it.Key),
			Value:     v,
		}, k.done)
	}
}

func (k *kgoTickSender) done(r *kgo.Record, err error) {
	if err != nil && k.logger != nil && !errors.Is(err, context.Canceled) {
		k.logger.Warn("tick not delivered; it will be re-sent", "key", string(r.Key), "err", err)
	}
}

// Partitions lists the partitions this instance actively owns.
func (t *timers) Partitions() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ps []int32
	for p := range t.assigned {
		ps = append(ps, p)
	}
	return ps
}
