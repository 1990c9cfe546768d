package command_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

var t0 = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

func httpSpec() *chimev1.JobSpec {
	return &chimev1.JobSpec{
		Namespace: "acme", Id: "invoice-42",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(t0.Add(time.Hour))}},
		Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "https://example.com/hook"}}},
	}
}

// Every job command a builder makes, once stamped, passes the check every
// publisher runs, survives the wire, and carries what it was given.
func TestJobCommandBuilders(t *testing.T) {
	t.Parallel()

	e := command.Emission{Namespace: "acme", JobID: "invoice-42", FireSeq: 7, EmitSeq: 9}
	failed := &chimev1.CallbackOutcome{EventId: "out-1", StatusCode: 503}
	tests := []struct {
		name string
		cmd  *chimev1.JobCommand
		want *chimev1.JobCommand
		kind string
	}{
		{
			name: "upsert takes namespace and id from the spec",
			cmd:  command.Upsert(httpSpec()),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: httpSpec()}}},
			kind: "upsert",
		},
		{
			name: "cancel",
			cmd:  command.Cancel("acme", "invoice-42", "paid"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "paid"}}},
			kind: "cancel",
		},
		{
			name: "pause",
			cmd:  command.Pause("acme", "invoice-42"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}},
			kind: "pause",
		},
		{
			name: "resume",
			cmd:  command.Resume("acme", "invoice-42"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}},
			kind: "resume",
		},
		{
			name: "trigger",
			cmd:  command.Trigger("acme", "invoice-42"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}},
			kind: "trigger",
		},
		{
			name: "retry carries the failed attempt",
			cmd:  command.Retry(e, 3, t0.Add(time.Minute), "HTTP 503", failed),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
				FireSeq: 7, EmitSeq: 9, Attempt: 3, NotBefore: timestamppb.New(t0.Add(time.Minute)), Reason: "HTTP 503", Outcome: failed}}},
			kind: "retry",
		},
		{
			name: "defer",
			cmd:  command.Defer(e, t0.Add(time.Minute), "breaker open"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
				FireSeq: 7, EmitSeq: 9, NotBefore: timestamppb.New(t0.Add(time.Minute)), Reason: "breaker open"}}},
			kind: "defer",
		},
		{
			name: "ack",
			cmd:  command.Ack(e, 2, chimev1.AckResult_ACK_RESULT_SUCCEEDED, "HTTP 200"),
			want: &chimev1.JobCommand{Namespace: "acme", JobId: "invoice-42", Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{
				FireSeq: 7, EmitSeq: 9, Attempt: 2, Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED, Detail: "HTTP 200"}}},
			kind: "ack",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, proto.Equal(tt.want, tt.cmd), "want %v\ngot  %v", tt.want, tt.cmd)
			require.Empty(t, tt.cmd.GetCommandId(), "builders leave command_id to Stamp")
			require.Nil(t, tt.cmd.GetIssuedAt(), "builders leave issued_at to Stamp")
			require.Equal(t, tt.kind, command.Kind(tt.cmd))

			command.Stamp(tt.cmd, t0)
			require.NoError(t, schema.ValidateCommand(tt.cmd, schema.ValidateOptions{Now: t0}))
			raw, err := proto.Marshal(tt.cmd)
			require.NoError(t, err)
			back := &chimev1.JobCommand{}
			require.NoError(t, proto.Unmarshal(raw, back))
			require.True(t, proto.Equal(tt.cmd, back), "round trip changed %v into %v", tt.cmd, back)
		})
	}
}

func TestKindOfNoCommand(t *testing.T) {
	t.Parallel()
	require.Empty(t, command.Kind(&chimev1.JobCommand{Namespace: "acme", JobId: "a"}))
	require.Empty(t, command.Kind(nil))
}

// A zero time is left unset, so validation says it is missing instead of
// seeing year 1.
func TestZeroNotBeforeIsUnset(t *testing.T) {
	t.Parallel()
	e := command.Emission{Namespace: "acme", JobID: "a", FireSeq: 1, EmitSeq: 1}
	for _, cmd := range []*chimev1.JobCommand{command.Retry(e, 2, time.Time{}, "", nil), command.Defer(e, time.Time{}, "")} {
		require.False(t, proto.Equal(cmd, &chimev1.JobCommand{}))
		require.Nil(t, cmd.GetRetry().GetNotBefore())
		require.Nil(t, cmd.GetDefer().GetNotBefore())
		command.Stamp(cmd, t0)
		err := schema.ValidateCommand(cmd, schema.ValidateOptions{Now: t0})
		require.ErrorContains(t, err, "not_before")
	}
}

func TestEmissionOf(t *testing.T) {
	t.Parallel()
	due := &chimev1.Due{Namespace: "acme", JobId: "a", FireSeq: 4, EmitSeq: 6, Attempt: 2}
	require.Equal(t, command.Emission{Namespace: "acme", JobID: "a", FireSeq: 4, EmitSeq: 6}, command.EmissionOf(due))
}

func TestNamespaceCommandBuilders(t *testing.T) {
	t.Parallel()

	hash := make([]byte, 32)
	hash[0] = 1
	tests := []struct {
		name string
		cmd  *chimev1.NamespaceCommand
		want *chimev1.NamespaceCommand
	}{
		{
			name: "put",
			cmd:  command.PutNamespace("acme", &chimev1.NamespaceConfig{MaxConcurrency: 4}),
			want: &chimev1.NamespaceCommand{Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{MaxConcurrency: 4}}},
		},
		{
			name: "add key",
			cmd:  command.AddKey("acme", hash),
			want: &chimev1.NamespaceCommand{Namespace: "acme", Command: &chimev1.NamespaceCommand_AddKey{AddKey: &chimev1.AddKey{KeyHash: hash}}},
		},
		{
			name: "revoke key",
			cmd:  command.RevokeKey("acme", hash),
			want: &chimev1.NamespaceCommand{Namespace: "acme", Command: &chimev1.NamespaceCommand_RevokeKey{RevokeKey: &chimev1.RevokeKey{KeyHash: hash}}},
		},
		{
			name: "rotate signing secret",
			cmd:  command.RotateSigningSecret("acme", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", durationpb.New(time.Hour)),
			want: &chimev1.NamespaceCommand{Namespace: "acme", Command: &chimev1.NamespaceCommand_RotateSigningSecret{
				RotateSigningSecret: &chimev1.RotateSigningSecret{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Overlap: durationpb.New(time.Hour)}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, proto.Equal(tt.want, tt.cmd), "want %v\ngot  %v", tt.want, tt.cmd)
			command.Stamp(tt.cmd, t0)
			require.Regexp(t, uuidV7, tt.cmd.GetCommandId())
			require.True(t, t0.Equal(tt.cmd.GetIssuedAt().AsTime()))
			require.NoError(t, schema.ValidateNamespaceCommand(tt.cmd))
			raw, err := proto.Marshal(tt.cmd)
			require.NoError(t, err)
			back := &chimev1.NamespaceCommand{}
			require.NoError(t, proto.Unmarshal(raw, back))
			require.True(t, proto.Equal(tt.cmd, back))
		})
	}
}

func TestBreakerCommandBuilders(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		cmd  *chimev1.BreakerCommand
		want *chimev1.BreakerCommand
	}{
		{"force open", command.ForceOpen("acme", "OPS-1"),
			&chimev1.BreakerCommand{Namespace: "acme", Note: "OPS-1", Command: &chimev1.BreakerCommand_ForceOpen{ForceOpen: &chimev1.BreakerForceOpen{}}}},
		{"force closed", command.ForceClosed("acme", ""),
			&chimev1.BreakerCommand{Namespace: "acme", Command: &chimev1.BreakerCommand_ForceClosed{ForceClosed: &chimev1.BreakerForceClosed{}}}},
		{"auto", command.Auto("acme", "done"),
			&chimev1.BreakerCommand{Namespace: "acme", Note: "done", Command: &chimev1.BreakerCommand_Auto{Auto: &chimev1.BreakerAuto{}}}},
		{"reset", command.ResetBreaker("acme", ""),
			&chimev1.BreakerCommand{Namespace: "acme", Command: &chimev1.BreakerCommand_ResetBreaker{ResetBreaker: &chimev1.BreakerReset{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, proto.Equal(tt.want, tt.cmd), "want %v\ngot  %v", tt.want, tt.cmd)
			command.Stamp(tt.cmd, t0)
			require.Regexp(t, uuidV7, tt.cmd.GetCommandId())
			require.True(t, t0.Equal(tt.cmd.GetIssuedAt().AsTime()))
			raw, err := proto.Marshal(tt.cmd)
			require.NoError(t, err)
			back := &chimev1.BreakerCommand{}
			require.NoError(t, proto.Unmarshal(raw, back))
			require.True(t, proto.Equal(tt.cmd, back))
		})
	}
}

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestStamp(t *testing.T) {
	t.Parallel()

	earlier := t0.Add(-time.Hour)
	tests := []struct {
		name       string
		cmd        any
		wantID     string // "" means a fresh UUIDv7
		wantIssued time.Time
	}{
		{"fills a job command", command.Pause("acme", "a"), "", t0},
		{"keeps a caller's id and time", &chimev1.JobCommand{CommandId: "mine", IssuedAt: timestamppb.New(earlier)}, "mine", earlier},
		{"fills a namespace command", command.AddKey("acme", nil), "", t0},
		{"keeps a breaker command's id", &chimev1.BreakerCommand{CommandId: "op-1"}, "op-1", t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			command.Stamp(tt.cmd, t0)
			c := tt.cmd.(interface {
				GetCommandId() string
				GetIssuedAt() *timestamppb.Timestamp
			})
			require.True(t, tt.wantIssued.Equal(c.GetIssuedAt().AsTime()), "issued_at %v", c.GetIssuedAt().AsTime())
			if tt.wantID != "" {
				require.Equal(t, tt.wantID, c.GetCommandId())
				return
			}
			require.Regexp(t, uuidV7, c.GetCommandId())
		})
	}
}

func TestStampLeavesNilAndOthersAlone(t *testing.T) {
	t.Parallel()
	require.NotPanics(t, func() {
		command.Stamp((*chimev1.JobCommand)(nil), t0)
		command.Stamp((*chimev1.NamespaceCommand)(nil), t0)
		command.Stamp((*chimev1.BreakerCommand)(nil), t0)
		command.Stamp(nil, t0)
		command.Stamp(&chimev1.Due{}, t0)
	})
}

// Ids are UUIDv7, unique under any clock, and sort in the order one process
// issued them.
func TestNewID(t *testing.T) {
	t.Parallel()
	prev := ""
	seen := make(map[string]bool)
	for range 10_000 {
		id := command.NewID()
		require.Regexp(t, uuidV7, id)
		require.False(t, seen[id], "duplicate command id %s", id)
		seen[id] = true
		require.Less(t, prev, id, "ids of one process sort by issue")
		prev = id
		u, err := uuid.Parse(id)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), u.Version())
	}
}

// The derived ids are part of the wire: a replay or an arming issued again
// after an upgrade must carry the id it had before.
func TestDerivedIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		// The first 16 bytes of sha256("acme\x00dl-1") (sha256sum agrees), as the API has derived it since replays began.
		{"replay", command.ReplayID("acme", "dl-1"), "replay-8a941045572f1579425db93060ec47a3"},
		{"cool-off", command.CoolOffID("acme", 3, time.UnixMilli(1_790_000_000_123)), "breaker-cooloff/acme/3/1790000000123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.got)
		})
	}
	require.NotEqual(t, command.ReplayID("acme", "dl-1"), command.ReplayID("acme", "dl-2"))
	require.NotEqual(t, command.ReplayID("acme", "dl-1"), command.ReplayID("acme2", "dl-1"))
}

func TestReject(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	small := []byte("not a command")
	huge := make([]byte, schema.MaxRejectedCommand+1)
	tests := []struct {
		name     string
		raw      []byte
		wantCopy int
		wantSize uint32
	}{
		{"small command copied whole", small, len(small), 0},
		{"command at the bound copied whole", huge[:schema.MaxRejectedCommand], schema.MaxRejectedCommand, 0},
		{"larger command cut, its size kept", huge, schema.MaxRejectedCommand, uint32(len(huge))},
		{"nothing read", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rej := command.Reject(command.Refusal{EventID: "e", CommandID: "c", Namespace: "acme", JobID: "j", Field: "spec.url",
				Reason: "why", At: at, Topic: "t", Partition: 3, Offset: 7, Raw: tt.raw})
			require.Equal(t, tt.wantCopy, len(rej.GetCommand()))
			require.Equal(t, tt.wantSize, rej.GetCommandSize())
			rej.Command, rej.CommandSize = nil, 0
			require.True(t, proto.Equal(&chimev1.Rejection{EventId: "e", CommandId: "c", Namespace: "acme", JobId: "j", Field: "spec.url",
				Reason: "why", At: timestamppb.New(at), Topic: "t", Partition: 3, Offset: 7}, rej), "%v", rej)
		})
	}
}

// TestBatches: commands are packed per partition, in order, within the
// count and size bounds, each batch keyed by its first command.
func TestBatches(t *testing.T) {
	t.Parallel()
	var cmds []*chimev1.JobCommand
	for i := range 7 {
		cmds = append(cmds, command.Cancel("ns", fmt.Sprintf("j%d", i), ""))
	}
	part := func(key string) int32 { return int32(key[len(key)-1]-'0') % 2 }
	batches, index := command.Batches(cmds, part, 1<<20)
	require.Len(t, batches, 2)
	require.Equal(t, [][]int{{0, 2, 4, 6}, {1, 3, 5}}, index)
	for _, b := range batches {
		first := b.GetBatch().GetCommands()[0]
		require.Equal(t, first.GetJobId(), b.GetJobId())
		require.NoError(t, schema.ValidateCommand(withID(b), schema.ValidateOptions{}))
	}
	one := proto.Size(cmds[0]) + 8
	batches, index = command.Batches(cmds, part, 2*one)
	require.Equal(t, [][]int{{0, 2}, {1, 3}, {4, 6}, {5}}, index, "split by size")
	require.Len(t, batches, 4)
}

func withID(c *chimev1.JobCommand) *chimev1.JobCommand {
	c.CommandId = "b1"
	for i, s := range c.GetBatch().GetCommands() {
		s.CommandId = fmt.Sprintf("c%d", i)
	}
	return c
}
