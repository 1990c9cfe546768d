package jobquery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/views/jobquery"
)

// An API process whose query secret the schedulers refuse is told so by
// its probe, which names the scheduler; no scheduler yet is no refusal.
func TestSecretProbe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wrong, err := jobquery.NewRouter(jobquery.RouterConfig{Admin: b.cluster.Admin(t), Group: b.topics.SchedulerGroup(), Topic: b.topics.JobCommands(),
		Partitions: testPartitions, Secret: "another-query-secret-0123", Logger: testLogger(t)})
	require.NoError(t, err)
	refused := jobquery.NewSecretProbe(wrong, 50*time.Millisecond)
	accepted := jobquery.NewSecretProbe(b.router, 50*time.Millisecond)
	lifecycletest.Start(t, refused, accepted)
	require.NoError(t, refused.Ready(), "no scheduler yet: nothing refuses")

	owner := b.startInstance()
	kafkatest.WaitFor(t, time.Minute, "the probe to find the scheduler refusing", func() bool { return refused.Ready() != nil })
	err = refused.Ready()
	require.ErrorContains(t, err, "the scheduler at "+owner.addr+" refuses this API process's query signature")
	require.ErrorContains(t, err, "the signature does not match")
	require.NotContains(t, err.Error(), testSecret)
	require.NoError(t, accepted.Ready(), "the same secret is accepted")
}
