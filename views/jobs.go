package views

import (
	"log/slog"
	"sync"

	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Jobs is a view of the scheduler's job table, for the API's reads. It
// holds every row in memory: its footprint grows with the jobs the table
// keeps (live ones, and ended ones within the scheduler's retention).
type Jobs struct {
	*table[*chimev1.JobState]
	live *liveCounts
}

// NewJobs builds the view; Run must be running for Get to answer.
func NewJobs(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Jobs, error) {
	live := &liveCounts{byPartition: map[int32]map[string]int64{}}
	t, err := newTable[*chimev1.JobState](brokers, topics.SchedulerGroup(), new(schema.JobStateCodec), clientID, replication, logger, false, live.builder)
	if err != nil {
		return nil, err
	}
	return &Jobs{table: t, live: live}, nil
}

// Get returns the job's row, nil if the table has none.
func (j *Jobs) Get(namespace, id string) (*chimev1.JobState, error) {
	st, _, err := j.get(schema.JobKey(namespace, id))
	return st, err
}

// LiveJobs returns the namespace's live (not ended) jobs in the table.
func (j *Jobs) LiveJobs(ns string) int64 { return j.live.of(ns) }

// liveCounts counts live jobs per namespace from the writes the view's
// storage sees: the view replays the whole table through Set when it
// starts, so no scan is needed.
type liveCounts struct {
	mu          sync.Mutex
	byPartition map[int32]map[string]int64
}

func (c *liveCounts) builder(inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil {
			return nil, err
		}
		counts := map[string]int64{}
		c.mu.Lock()
		c.byPartition[partition] = counts // a rebuilt partition starts over
		c.mu.Unlock()
		return &liveStorage{Storage: st, c: c, counts: counts}, nil
	}
}

func (c *liveCounts) of(ns string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, counts := range c.byPartition {
		n += counts[ns]
	}
	return n
}

// liveStorage is one partition's storage, counting as rows change.
type liveStorage struct {
	storage.Storage
	c      *liveCounts
	counts map[string]int64
}

func isLive(v []byte) bool {
	live, ok := schema.JobStateLive(v)
	return ok && live
}

func (s *liveStorage) change(key string, old []byte, now []byte) {
	delta := int64(0)
	if isLive(now) {
		delta++
	}
	if isLive(old) {
		delta--
	}
	ns, _, ok := schema.SplitJobKey(key)
	if delta == 0 || !ok {
		return
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if n := s.counts[ns] + delta; n > 0 {
		s.counts[ns] = n
	} else {
		delete(s.counts, ns)
	}
}

// Set implements storage.Storage.
func (s *liveStorage) Set(key string, value []byte) error {
	old, err := s.Storage.Get(key)
	if err != nil {
		return err
	}
	if err := s.Storage.Set(key, value); err != nil {
		return err
	}
	s.change(key, old, value)
	return nil
}

// Delete implements storage.Storage.
func (s *liveStorage) Delete(key string) error {
	old, err := s.Storage.Get(key)
	if err != nil {
		return err
	}
	if err := s.Storage.Delete(key); err != nil {
		return err
	}
	s.change(key, old, nil)
	return nil
}
