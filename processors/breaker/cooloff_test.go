package breaker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestCoolOffCommandIsAValidSchedulerCommand(t *testing.T) {
	t.Parallel()
	topics := schema.NewTopics("")
	tm := &chimev1.BreakerTimer{Namespace: "acme", Version: 7, FireAt: timestamppb.New(t0.Add(10 * time.Second))}
	raw, err := CoolOffCommand(topics, tm, t0)
	require.NoError(t, err)
	cmd := new(chimev1.JobCommand)
	require.NoError(t, proto.Unmarshal(raw, cmd))
	require.NoError(t, schema.ValidateCommand(cmd, schema.ValidateOptions{Now: t0, AllowReserved: true}))
	spec := cmd.GetUpsert().GetSpec()
	require.Equal(t, t0.Add(10*time.Second), spec.GetSchedule().GetAt().AsTime())
	k := spec.GetTarget().GetKafka()
	require.Equal(t, topics.BreakerTimers(), k.Topic)
	require.Equal(t, "acme", string(k.Key))
	got := new(chimev1.BreakerTimer)
	require.NoError(t, proto.Unmarshal(k.Value, got))
	require.True(t, proto.Equal(tm, got))
	require.Equal(t, fmt.Sprintf("breaker-cooloff/acme/7/%d", t0.Add(10*time.Second).UnixMilli()), cmd.CommandId)
}
