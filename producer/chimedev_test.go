package producer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// envExampleChild makes TestExampleChimeDevChild run the example.
const envExampleChild = "CHIME_PRODUCER_EXAMPLE_CHILD"

// TestExampleChimeDev runs Example_chimeDev, as it is written, against a
// broker set up as `chime dev` sets up its own: SASL/PLAIN required, its
// address and the credential generated into the state dir, chime's topics
// under the default prefix, the namespace acme in the namespace table. The
// example reads its environment, so it runs in a child process (this test
// binary again) with CHIME_STATE_DIR pointing here; the job must then be
// on job-commands.
func TestExampleChimeDev(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	cred, err := kafkaauth.LoadOrCreate(filepath.Join(stateDir, config.KafkaCredentialFile))
	require.NoError(t, err)
	kafka := kafkatest.New(t, kafkatest.WithSASL(cred))
	topics := schema.NewTopics("")
	kafka.Provision(t, topics, partitions)
	require.NoError(t, os.WriteFile(filepath.Join(stateDir, config.KafkaBrokersFile), []byte(strings.Join(kafka.Brokers(), ",")+"\n"), 0o600))
	createNamespace(t, kafka, topics, "acme")

	kafkatest.StartHelperProcess(t, "TestExampleChimeDevChild", "scheduled acme/hello",
		envExampleChild+"=1", "CHIME_STATE_DIR="+stateDir)

	cl := kafka.Client(t, kgo.ConsumeTopics(topics.JobCommands()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testContext(t)
	var got *kgo.Record
	for got == nil {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "the example's command is not on %s", topics.JobCommands())
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == "acme/hello" {
				got = r
			}
		})
	}
	cmd := new(chimev1.JobCommand)
	require.NoError(t, proto.Unmarshal(got.Value, cmd))
	spec := cmd.GetUpsert().GetSpec()
	require.Equal(t, "http://127.0.0.1:9999/hook", spec.GetTarget().GetHttp().GetUrl())
	require.WithinDuration(t, time.Now().Add(5*time.Second), spec.GetSchedule().GetAt().AsTime(), time.Minute)
}

// TestExampleChimeDevChild is the child process of TestExampleChimeDev.
func TestExampleChimeDevChild(t *testing.T) {
	t.Parallel()
	if os.Getenv(envExampleChild) == "" {
		t.Skip("runs as TestExampleChimeDev's child process")
	}
	Example_chimeDev()
}
