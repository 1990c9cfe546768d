package main

import (
	"fmt"
	"io"
)

// replayAnswer prints the answer to `replay`: whether this replay created
// the job or an earlier one had (and when), then the job.
func replayAnswer(w io.Writer, v map[string]any) {
	if already, _ := v["already_replayed"].(bool); already {
		fmt.Fprintf(w, "already replayed at %s as job %s; nothing done\n", cell(v["replayed_at"]), cell(v["id"]))
	} else {
		fmt.Fprintf(w, "replayed as job %s\n", cell(v["id"]))
	}
	fieldsTable(w, v)
}

// bulkReplayAnswer prints the answer to `replay-all`: what it did with the
// dead letters not replayed yet it selected, what it skipped, and why it
// did not replay them all.
func bulkReplayAnswer(w io.Writer, v map[string]any) {
	fmt.Fprintf(w, "replayed %s of %s not replayed yet; skipped %s already replayed\n", cell(v["replayed"]), cell(v["matched"]), cell(v["already_replayed"]))
	if n, _ := v["quota_refused"].(float64); n > 0 {
		fmt.Fprintf(w, "not replayed, over the job quotas: %s (%s)\n", cell(n), cell(v["quota_reason"]))
	}
	failed, _ := v["failed"].([]any)
	for _, f := range failed {
		m, _ := f.(map[string]any)
		fmt.Fprintf(w, "failed %s: %s\n", cell(m["id"]), cell(m["reason"]))
	}
	if more, _ := v["more"].(bool); more {
		fmt.Fprintln(w, "more match: run replay-all again for the next ones")
	}
}
