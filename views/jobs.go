package views

import (
	"log/slog"
	"sync"

	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobindex"
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
	live := &liveCounts{byPartition: map[int32]*jobindex.Index{}}
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

// LiveJobs returns the namespace's live (not ended) jobs in the table,
// chime's own (the breaker's cool-off timer) left out.
func (j *Jobs) LiveJobs(ns string) int64 { return jobindex.LiveIn(j.live.indexes(), ns) }

// ListJobs returns a page of the namespace's jobs, newest first, and
// whether more follow; chime's own only with q.Internal.
func (j *Jobs) ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool) {
	return jobindex.List(j.live.indexes(), ns, q)
}

// liveCounts keeps a listing index per partition from the writes the
// view's storage sees: the view replays the whole table through Set when
// it starts, so no scan is needed.
type liveCounts struct {
	mu          sync.Mutex
	byPartition map[int32]*jobindex.Index
}

func (c *liveCounts) builder(inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil {
			return nil, err
		}
		idx := jobindex.New()
		c.mu.Lock()
		c.byPartition[partition] = idx // a rebuilt partition starts over
		c.mu.Unlock()
		return &liveStorage{Storage: st, idx: idx}, nil
	}
}

func (c *liveCounts) indexes() []*jobindex.Index {
	c.mu.Lock()
	defer c.mu.Unlock()
	idxs := make([]*jobindex.Index, 0, len(c.byPartition))
	for _, x := range c.byPartition {
		idxs = append(idxs, x)
	}
	return idxs
}

// liveStorage is one partition's storage, indexing rows as they change.
type liveStorage struct {
	storage.Storage
	idx *jobindex.Index
}

func summary(v []byte) *schema.JobSummary {
	if v == nil {
		return nil
	}
	sum, ok := schema.JobStateSummary(v)
	if !ok {
		return nil
	}
	return &sum
}

func (s *liveStorage) change(key string, old, now []byte) {
	if ns, id, ok := schema.SplitJobKey(key); ok {
		s.idx.Change(ns, id, summary(old), summary(now))
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
