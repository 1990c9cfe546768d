package producer

import (
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

func TestCommandBuilders(t *testing.T) {
	t.Parallel()

	notBefore := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	spec := &chimev1.JobSpec{Namespace: "acme", Id: "invoice-42"}

	tests := []struct {
		name string
		got  *chimev1.JobCommand
		want *chimev1.JobCommand
		kind string
	}{
		{
			name: "upsert takes namespace and id from the spec",
			got:  upsertCommand(spec),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}}},
			kind: "upsert",
		},
		{
			name: "upsert of a nil spec is left to validation",
			got:  upsertCommand(nil),
			want: &chimev1.JobCommand{Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{}}},
			kind: "upsert",
		},
		{
			name: "cancel",
			got:  cancelCommand("acme", "invoice-42", "paid"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "paid"}}},
			kind: "cancel",
		},
		{
			name: "pause",
			got:  pauseCommand("acme", "invoice-42"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}},
			kind: "pause",
		},
		{
			name: "resume",
			got:  resumeCommand("acme", "invoice-42"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}},
			kind: "resume",
		},
		{
			name: "retry",
			got:  retryCommand("acme", "invoice-42", 7, 9, 3, notBefore, "HTTP 503"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
					FireSeq: 7, EmitSeq: 9, Attempt: 3, NotBefore: timestamppb.New(notBefore), Reason: "HTTP 503"}}},
			kind: "retry",
		},
		{
			name: "retry with a zero not_before leaves it unset",
			got:  retryCommand("acme", "invoice-42", 7, 9, 3, time.Time{}, ""),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 7, EmitSeq: 9, Attempt: 3}}},
			kind: "retry",
		},
		{
			name: "defer",
			got:  deferCommand("acme", "invoice-42", 7, 9, notBefore, "breaker open"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
					FireSeq: 7, EmitSeq: 9, NotBefore: timestamppb.New(notBefore), Reason: "breaker open"}}},
			kind: "defer",
		},
		{
			name: "ack",
			got:  ackCommand("acme", "invoice-42", 7, 9, 2, chimev1.AckResult_ACK_RESULT_SUCCEEDED, "HTTP 200"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42",
				Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{
					FireSeq: 7, EmitSeq: 9, Attempt: 2, Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED, Detail: "HTTP 200"}}},
			kind: "ack",
		},
		{
			name: "no command",
			got:  &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42"},
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42"},
			kind: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, proto.Equal(tt.want, tt.got), "want %v\ngot  %v", tt.want, tt.got)
			require.Empty(t, tt.got.GetCommandId(), "builders leave command_id to Publish")
			require.Nil(t, tt.got.GetIssuedAt(), "builders leave issued_at to Publish")
			require.Equal(t, tt.kind, commandKind(tt.got))
		})
	}
}

func TestStamp(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 3, 10, 0, 0, 123_000_000, time.UTC)
	earlier := now.Add(-time.Hour)

	tests := []struct {
		name       string
		cmd        *chimev1.JobCommand
		wantID     string // "" means a fresh one
		wantIssued time.Time
	}{
		{
			name:       "fills both",
			cmd:        pauseCommand("acme", "a"),
			wantIssued: now,
		},
		{
			name:       "keeps a caller's id and time",
			cmd:        &chimev1.JobCommand{CommandId: "mine", IssuedAt: timestamppb.New(earlier)},
			wantID:     "mine",
			wantIssued: earlier,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stamp(tt.cmd, now)
			require.True(t, tt.wantIssued.Equal(tt.cmd.GetIssuedAt().AsTime()), "issued_at %v", tt.cmd.GetIssuedAt().AsTime())
			if tt.wantID != "" {
				require.Equal(t, tt.wantID, tt.cmd.GetCommandId())
				return
			}
			require.Regexp(t, uuidV7, tt.cmd.GetCommandId())
		})
	}
}

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewCommandID(t *testing.T) {
	t.Parallel()

	// A frozen clock, as in tests: the random bits alone keep IDs unique.
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	seen := make(map[string]bool)
	for range 10_000 {
		id := newCommandID(now)
		require.Regexp(t, uuidV7, id)
		require.False(t, seen[id], "duplicate command ID %s", id)
		seen[id] = true

		// The first 48 bits are the Unix milliseconds, so IDs sort by time.
		raw, err := hex.DecodeString(strings.ReplaceAll(id, "-", "")[:12])
		require.NoError(t, err)
		var ms int64
		for _, b := range raw {
			ms = ms<<8 | int64(b)
		}
		require.Equal(t, now.UnixMilli(), ms)
	}
	require.Less(t, newCommandID(now), newCommandID(now.Add(time.Millisecond)))
}

// gokaPartition is where goka v1.1.17 puts key among n partitions: its
// producer (builders.go) uses sarama.NewCustomHashPartitioner(hasher) with
// goka.DefaultHasher, FNV-1a 32. goka's View.hash computes abs before the
// modulo, which differs only for a hash of math.MinInt32, where it is not
// usable either.
func gokaPartition(t testing.TB, key string, n int32) int32 {
	t.Helper()
	part := sarama.NewCustomHashPartitioner(goka.DefaultHasher())("chime.job-commands")
	p, err := part.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
	require.NoError(t, err)
	return p
}

// The hasher the producer configures must put every key where goka does,
// including keys whose FNV-1a hash is negative as an int32.
func TestPartitionerMatchesGoka(t *testing.T) {
	t.Parallel()

	hasher := kgo.SaramaCompatHasher(fnv32a)
	for _, n := range []int32{1, 3, 8, 12, 64} {
		negatives := 0
		for i := range 20_000 {
			key := "ns" + string(rune('a'+i%26)) + "/job-" + hex.EncodeToString([]byte{byte(i), byte(i >> 8)})
			if int32(fnv32a([]byte(key))) < 0 {
				negatives++
			}
			require.Equal(t, gokaPartition(t, key, n), int32(hasher([]byte(key), int(n))), "key %q, %d partitions", key, n)
		}
		require.Positive(t, negatives, "the keys must exercise negative hashes")
	}
}
