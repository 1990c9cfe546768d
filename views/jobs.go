package views

import (
	"log/slog"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Jobs is a view of the scheduler's job table, for the API's reads. It
// holds every row in memory: its footprint grows with the jobs the table
// keeps (live ones, and ended ones within the scheduler's retention).
type Jobs struct {
	*table[*chimev1.JobState]
}

// NewJobs builds the view; Run must be running for Get to answer.
func NewJobs(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Jobs, error) {
	t, err := newTable[*chimev1.JobState](brokers, topics.SchedulerGroup(), new(schema.JobStateCodec), clientID, replication, logger, false)
	if err != nil {
		return nil, err
	}
	return &Jobs{t}, nil
}

// Get returns the job's row, nil if the table has none.
func (j *Jobs) Get(namespace, id string) (*chimev1.JobState, error) {
	st, _, err := j.get(schema.JobKey(namespace, id))
	return st, err
}
