package dispatcher

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/schematest"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// kafkaMaxMessage is Kafka's default message.max.bytes (and kfake's).
const kafkaMaxMessage = 1048588

// Every event chime writes fits in a Kafka message: the largest job the
// validation accepts (every field at its limit) failing every attempt
// makes the largest dead letter, which must stay well under the broker's
// limit (a 999,000-byte header once made one that did not, and the
// dispatcher's commit on that partition stopped).
func TestLargestValidJobFitsEveryEvent(t *testing.T) {
	t.Parallel()
	spec := schematest.LargestSpec(&chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(time.Now())}}, "")
	labels := spec.GetLabels()
	cmd := schematest.Upsert(spec)
	require.NoError(t, schema.ValidateCommand(cmd, schema.ValidateOptions{}), "the job is valid")

	d := &Dispatcher{cfg: Config{ID: strings.Repeat("d", 64), Now: time.Now}}
	longErr := strings.Repeat("e", 4096) // errors quote the URL and more
	attempt := func(n uint32) *chimev1.CallbackOutcome {
		o := d.outcome(&chimev1.Due{Namespace: spec.Namespace, JobId: spec.Id, Attempt: n, Callback: spec.GetTarget().GetHttp()}, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, time.Now(), time.Now())
		o.Error, o.BodySnippet = longErr, make([]byte, 1024)
		return o
	}
	var history []*chimev1.CallbackOutcome
	for i := range uint32(scheduler.MaxAttemptHistory) {
		history = append(history, historyEntry(attempt(i+1)))
	}
	due := &chimev1.Due{
		Namespace: spec.Namespace, JobId: spec.Id, FireSeq: 1, EmitSeq: 1, Attempt: scheduler.MaxAttemptHistory + 1,
		Callback: spec.GetTarget().GetHttp(), Labels: labels, History: history,
		IdempotencyKey: schema.JobKey(spec.Namespace, spec.Id) + "/1",
	}
	res := d.dead(due, result{outcome: attempt(due.Attempt)}, chimev1.AckResult_ACK_RESULT_DEAD, longErr)
	for name, m := range map[string]proto.Message{"due": due, "outcome": res.outcome, "dead letter": res.dead, "upsert": cmd} {
		size := proto.Size(m)
		t.Logf("%s: %d bytes", name, size)
		require.Less(t, size, kafkaMaxMessage/2, "%s must fit a Kafka message with room to spare", name)
	}
}
