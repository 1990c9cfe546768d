package jobstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// BenchmarkList reads a page of 51 from a partition of 200,000 jobs: the
// listing, by a label half the jobs carry, and by a rare label (1 %) with
// the common one, in both orders.
func BenchmarkList(b *testing.B) {
	db := open(b, b.TempDir(), func(o *Options) { o.AutoConfirm = true })
	b.Cleanup(func() { _ = db.Close() })
	part := recovered(b, db, 0)
	for i := range 200_000 {
		st := &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(t0.Add(time.Duration(i) * time.Millisecond)),
			TimerAt: timestamppb.New(t0.Add(24 * time.Hour)),
			Spec:    &chimev1.JobSpec{Labels: map[string]string{"team": []string{"billing", "ops"}[i%2], "shard": fmt.Sprint(i % 100)}}}
		v, err := schema.JobStateCodec{}.Encode(st)
		require.NoError(b, err)
		require.NoError(b, part.Set(fmt.Sprintf("ns/j%d", i), v))
		if i%10_000 == 9_999 {
			require.NoError(b, part.flush())
		}
	}
	require.NoError(b, part.flush())
	billing, shard := schema.Label{Key: "team", Value: "billing"}, schema.Label{Key: "shard", Value: "42"}
	for _, q := range []struct {
		name   string
		labels []schema.Label
	}{{"all", nil}, {"common", []schema.Label{billing}}, {"rare+common", []schema.Label{shard, billing}}, {"common+rare", []schema.Label{billing, shard}}} {
		b.Run(q.name, func(b *testing.B) {
			for range b.N {
				n := 0
				require.NoError(b, part.List("ns", q.labels, 0, "", func(Listed) bool { n++; return n < 51 }))
				if n != 51 {
					b.Fatalf("%d listed", n)
				}
			}
		})
	}
}
