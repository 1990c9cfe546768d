package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClientDeadLetterAnswers: replay says whether it was a repeat, and
// when; replay-all what it replayed, skipped and left, and why.
func TestClientDeadLetterAnswers(t *testing.T) {
	t.Parallel()
	list, err := clientRequest([]string{"dead-letters", "acme"})
	require.NoError(t, err)
	tests := []struct {
		name   string
		print  func(io.Writer, map[string]any)
		answer string
		want   []string
		not    []string
	}{
		{"dead-letters, one replayed", list.view,
			`{"dead_letters": [{"id": "dl-2", "job_id": "j", "attempts": 3, "at": "2026-11-23T09:00:00Z", "reason": "HTTP 500", "replayed": false},
			  {"id": "dl-1", "job_id": "j", "attempts": 3, "at": "2026-11-23T08:00:00Z", "reason": "HTTP 500", "replayed": true,
			   "replayed_at": "2026-11-23T10:00:00Z", "replay_job_id": "j.replay-1"}], "next_before": null}`,
			[]string{"REPLAYED", "REPLAY JOB", "HTTP 500  -  ", "HTTP 500  " + cell("2026-11-23T10:00:00Z") + "  j.replay-1\n"}, nil},
		{"replay, new", replayAnswer,
			`{"id": "j.replay-1", "already_replayed": false, "replayed_at": "2026-11-23T10:00:00Z", "state": "scheduled"}`,
			[]string{"replayed as job j.replay-1\n", "state", "scheduled"}, []string{"already replayed at"}},
		{"replay, a repeat", replayAnswer,
			`{"id": "j.replay-1", "already_replayed": true, "replayed_at": "2026-11-23T10:00:00Z"}`,
			[]string{"already replayed at " + cell("2026-11-23T10:00:00Z") + " as job j.replay-1; nothing done\n"}, nil},
		{"replay-all, all of them", bulkReplayAnswer,
			`{"matched": 4, "replayed": 4, "already_replayed": 3, "failed": [], "quota_refused": 0, "jobs": ["a"], "more": false}`,
			[]string{"replayed 4 of 4 not replayed yet; skipped 3 already replayed\n"}, []string{"quota", "failed", "more"}},
		{"replay-all, cut short", bulkReplayAnswer,
			`{"matched": 30, "replayed": 3, "already_replayed": 0, "failed": [{"id": "dl-1", "reason": "host gone"}], "quota_refused": 26,
			  "quota_reason": "namespace shop has 5 jobs that have not ended, and its quota is 5", "jobs": [], "more": true}`,
			[]string{"replayed 3 of 30", "not replayed, over the job quotas: 26 (namespace shop has 5 jobs that have not ended, and its quota is 5)\n",
				"failed dl-1: host gone\n", "more match: run replay-all again"}, nil},
	}
	for _, tt := range tests {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(tt.answer), &v), tt.name)
		var out strings.Builder
		tt.print(&out, v)
		for _, w := range tt.want {
			require.Contains(t, out.String(), w, tt.name)
		}
		for _, n := range tt.not {
			require.NotContains(t, out.String(), n, tt.name)
		}
	}
}
