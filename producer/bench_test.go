package producer_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
)

// BenchmarkScheduleAsync measures commands per second from ScheduleAsync to
// acknowledged by the test cluster (kafkatest: an embedded kfake broker
// persisting to a temp dir, or CHIME_TEST_BROKERS), 8 partitions, the
// broker sharing the machine's cores with the producer.
func BenchmarkScheduleAsync(b *testing.B) {
	tb := setup(b)
	ctx := testContext(b)

	specs := make([]*chimev1.JobSpec, 4096)
	for i := range specs {
		specs[i] = spec(fmt.Sprintf("tenant-%d", i%64), fmt.Sprintf("job-%d", i))
	}
	// Connect and load the topic's metadata before timing.
	_, err := tb.p.Schedule(ctx, specs[0])
	require.NoError(b, err)

	var failed atomic.Int64
	done := func(_ producer.Receipt, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		tb.p.ScheduleAsync(ctx, specs[i%len(specs)], done)
	}
	require.NoError(b, tb.p.Flush(ctx))
	elapsed := time.Since(start)
	b.StopTimer()

	require.Zero(b, failed.Load(), "commands failed")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
}
