package schema

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestJobStateCodecHeader: the header carries timer_at and recover_at so
// the storage can index rows without decoding them, and rows written in
// format 1 (no recover_at) still decode.
func TestJobStateCodecHeader(t *testing.T) {
	t.Parallel()
	timer := time.Date(2026, 11, 23, 10, 0, 0, 5, time.UTC)
	recoverAt := timer.Add(-time.Minute)
	cases := []struct {
		name             string
		st               *chimev1.JobState
		timer, recoverAt int64
	}{
		{"both", &chimev1.JobState{FireSeq: 7, TimerAt: timestamppb.New(timer), RecoverAt: timestamppb.New(recoverAt)}, timer.UnixNano(), recoverAt.UnixNano()},
		{"timer only", &chimev1.JobState{FireSeq: 1, TimerAt: timestamppb.New(timer)}, timer.UnixNano(), 0},
		{"none", &chimev1.JobState{}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := JobStateCodec{}.Encode(c.st)
			require.NoError(t, err)
			at, ok := JobStateTimer(b)
			require.True(t, ok)
			require.Equal(t, c.timer, at)
			require.Equal(t, c.recoverAt, JobStateRecoverAt(b))
			v, err := JobStateCodec{}.Decode(b)
			require.NoError(t, err)
			require.True(t, proto.Equal(c.st, v.(*chimev1.JobState)))
		})
	}

	// Format 1: a 9-byte header, no recover_at.
	st := &chimev1.JobState{FireSeq: 3, TimerAt: timestamppb.New(timer)}
	v1 := make([]byte, 9)
	v1[0] = 1
	binary.BigEndian.PutUint64(v1[1:], uint64(timer.UnixNano()))
	v1, err := proto.MarshalOptions{}.MarshalAppend(v1, st)
	require.NoError(t, err)
	at, ok := JobStateTimer(v1)
	require.True(t, ok)
	require.Equal(t, timer.UnixNano(), at)
	require.Zero(t, JobStateRecoverAt(v1))
	v, err := JobStateCodec{}.Decode(v1)
	require.NoError(t, err)
	require.True(t, proto.Equal(st, v.(*chimev1.JobState)))

	for _, bad := range [][]byte{nil, {2, 0, 0}, {9, 0, 0, 0, 0, 0, 0, 0, 0}} {
		_, ok := JobStateTimer(bad)
		require.False(t, ok)
		_, err := JobStateCodec{}.Decode(bad)
		require.Error(t, err)
	}
}

// TestJobStateSummary reads status and created_at out of encoded rows as
// decoding would.
func TestJobStateSummary(t *testing.T) {
	t.Parallel()
	spec := &chimev1.JobSpec{Namespace: "ns", Id: "j", Labels: map[string]string{"team": strings.Repeat("x", 300)}}
	for s, name := range chimev1.JobStatus_name {
		status := chimev1.JobStatus(s)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			created := time.Date(2026, 11, 24, 10, 0, 0, 123, time.UTC)
			b, err := JobStateCodec{}.Encode(&chimev1.JobState{Spec: spec, Status: status, FireSeq: 9, TimerAt: timestamppb.Now(), CreatedAt: timestamppb.New(created)})
			require.NoError(t, err)
			sum, ok := JobStateSummary(b)
			require.True(t, ok)
			require.Equal(t, JobSummary{Status: status, Created: created.UnixNano()}, sum)
			require.Equal(t, !JobEnded(status), sum.Live())
		})
	}
	_, ok := JobStateSummary([]byte{2, 1})
	require.False(t, ok, "a short header")
	b, err := JobStateCodec{}.Encode(&chimev1.JobState{Spec: spec})
	require.NoError(t, err)
	_, ok = JobStateSummary(b[:len(b)-10])
	require.False(t, ok, "a truncated row")
}

// TestJobStateLabels: a row's labels read from its bytes, sorted by key,
// equal to its spec's; none for a row without a spec or a malformed one.
func TestJobStateLabels(t *testing.T) {
	t.Parallel()
	enc := func(st *chimev1.JobState) []byte {
		b, err := JobStateCodec{}.Encode(st)
		require.NoError(t, err)
		return b
	}
	st := &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, Spec: &chimev1.JobSpec{
		Namespace: "ns", Id: "a", Labels: map[string]string{"team": "billing", "a/b": "x:y", "empty": ""},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1/", Body: []byte("team")}}},
	}}
	for range 20 { // map order varies from one encoding to the next
		require.Equal(t, []Label{{Key: "a/b", Value: "x:y"}, {Key: "empty"}, {Key: "team", Value: "billing"}}, JobStateLabels(enc(st)))
	}
	require.Empty(t, JobStateLabels(enc(&chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})))
	require.Empty(t, JobStateLabels(enc(st)[:30]), "cut short")
	require.Empty(t, JobStateLabels(nil))
}

func TestParseLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Label
		err  string
	}{
		{in: "team:billing", want: Label{Key: "team", Value: "billing"}},
		{in: "url:http://x", want: Label{Key: "url", Value: "http://x"}},
		{in: "empty:", want: Label{Key: "empty"}},
		{in: "team", err: "not key:value"},
		{in: ":billing", err: "key is 0 bytes long"},
		{in: "te am:x", err: "key has ' '"},
	} {
		got, err := ParseLabel(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
		require.Equal(t, tc.in, got.String())
	}
}
