package schema_test

import (
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/commands.json from ValidateCommand")

// commandVector is one case of testdata/commands.json: a job command (in
// protobuf's JSON form) and the field ValidateCommand names for it ("" if
// it is valid). The SDKs' publishers (sdk/python, sdk/typescript) port the
// validation; their tests hold them to these answers.
type commandVector struct {
	Name    string          `json:"name"`
	Command json.RawMessage `json:"command"`
	Field   string          `json:"field"`
}

func vectorCommands() map[string]*chimev1.JobCommand {
	at := timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	job := func(mutate func(*chimev1.JobCommand, *chimev1.JobSpec, *chimev1.HttpCallback)) *chimev1.JobCommand {
		h := &chimev1.HttpCallback{Url: "https://example.com/hook", Method: "POST", Body: []byte(`{"a":1}`), Headers: map[string]string{"Content-Type": "application/json"}}
		spec := &chimev1.JobSpec{Namespace: "acme", Id: "job-1", Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: at}},
			Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: h}}, Labels: map[string]string{"team": "billing"}}
		cmd := &chimev1.JobCommand{CommandId: "c1", IssuedAt: at, Namespace: "acme", JobId: "job-1", Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}}}
		if mutate != nil {
			mutate(cmd, spec, h)
		}
		return cmd
	}
	simple := func(c *chimev1.JobCommand) *chimev1.JobCommand {
		c.CommandId, c.Namespace, c.JobId = "c1", "acme", "job-1"
		return c
	}
	return map[string]*chimev1.JobCommand{
		"valid upsert": job(nil),
		"valid cron": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Schedule.Kind = &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "*/5 * * * *", Timezone: "Europe/Berlin"}}
		}),
		"valid every": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Schedule.Kind = &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Minute)}}
		}),
		"valid cancel":            simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "done"}}}),
		"valid pause":             simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}),
		"valid trigger":           simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}}),
		"no command id":           job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.CommandId = "" }),
		"empty namespace":         job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.Namespace = "" }),
		"namespace upper case":    job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.Namespace = "Acme" }),
		"namespace starts with -": job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.Namespace = "-acme" }),
		"namespace too long": job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			c.Namespace = strings.Repeat("a", 64)
		}),
		"job id with slash": job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.JobId = "a/b" }),
		"job id reserved":   job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) { c.JobId = "_chime.breaker" }),
		"job id too long": job(func(c *chimev1.JobCommand, _ *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			c.JobId = strings.Repeat("j", 129)
		}),
		"no command":             simple(&chimev1.JobCommand{}),
		"no spec":                simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{}}}),
		"spec namespace differs": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Namespace = "other" }),
		"spec id differs":        job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Id = "other" }),
		"no schedule":            job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Schedule = nil }),
		"no target":              job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Target = nil }),
		"empty url":              job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) { h.Url = "" }),
		"ftp url": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Url = "ftp://example.com/x"
		}),
		"url with space": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Url = "https://example.com/a b"
		}),
		"url with credentials": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Url = "https://u:p@example.com/"
		}),
		"url without host":  job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) { h.Url = "https:///path" }),
		"lower-case method": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) { h.Method = "post" }),
		"reserved header": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Headers["Idempotency-Key"] = "x"
		}),
		"header with newline": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Headers["X-Note"] = "a\r\nb"
		}),
		"header name not a token": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) { h.Headers["X Note"] = "a" }),
		"body too large": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Body = make([]byte, schema.MaxHTTPBody+1)
		}),
		"timeout too long": job(func(_ *chimev1.JobCommand, _ *chimev1.JobSpec, h *chimev1.HttpCallback) {
			h.Timeout = durationpb.New(61 * time.Second)
		}),
		"kafka topic bad": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Target.Kind = &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: "a topic"}}
		}),
		"kafka valid": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Target.Kind = &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: "orders.due", Value: []byte("x")}}
		}),
		"retry too many attempts": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Retry = &chimev1.RetryPolicy{MaxAttempts: 101}
		}),
		"retry max below initial": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Retry = &chimev1.RetryPolicy{InitialInterval: durationpb.New(time.Minute), MaxInterval: durationpb.New(time.Second)}
		}),
		"retry multiplier": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Retry = &chimev1.RetryPolicy{Multiplier: 0.5}
		}),
		"retry jitter": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Retry = &chimev1.RetryPolicy{Jitter: 1.5}
		}),
		"window negative": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.RelevancyWindow = durationpb.New(-time.Second)
		}),
		"window too long": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.RelevancyWindow = durationpb.New(31 * 24 * time.Hour)
		}),
		"unknown catchup policy": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Catchup = 7 }),
		"catchup window negative": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.CatchupWindow = durationpb.New(-time.Minute)
		}),
		"catchup all in a window": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Catchup, s.CatchupWindow = chimev1.CatchupPolicy_CATCHUP_POLICY_ALL, durationpb.New(time.Hour)
		}),
		"unknown overlap policy": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) { s.Overlap = 9 }),
		"overlap buffer_one": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Overlap = chimev1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE
		}),
		"max_fires and pause": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.MaxFires, s.PauseOnFailure = 12, true
		}),
		"label key bad": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Labels["team billing"] = "x"
		}),
		"label value too long": job(func(_ *chimev1.JobCommand, s *chimev1.JobSpec, _ *chimev1.HttpCallback) {
			s.Labels["team"] = strings.Repeat("é", 257)
		}),
		"valid backfill":           simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Backfill{Backfill: &chimev1.Backfill{From: at, To: timestamppb.New(at.AsTime().Add(time.Hour))}}}),
		"backfill to before from":  simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Backfill{Backfill: &chimev1.Backfill{From: at, To: at}}}),
		"backfill without from":    simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Backfill{Backfill: &chimev1.Backfill{To: at}}}),
		"empty batch":              simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Batch{Batch: &chimev1.Batch{}}}),
		"ack without result":       simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: 1}}}),
		"retry attempt 1":          simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, Attempt: 1, NotBefore: at}}}),
		"defer without not_before": simple(&chimev1.JobCommand{Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{FireSeq: 1}}}),
	}
}

// TestCommandVectors: testdata/commands.json is what ValidateCommand
// answers; -update-vectors rewrites it.
func TestCommandVectors(t *testing.T) {
	t.Parallel()
	const path = "testdata/commands.json"
	if *updateVectors {
		cmds := vectorCommands()
		var vs []commandVector
		for _, name := range sortedNames(cmds) {
			raw, err := protojson.Marshal(cmds[name])
			require.NoError(t, err)
			field := ""
			if err := schema.ValidateCommand(cmds[name], schema.ValidateOptions{}); err != nil {
				field = err.(*schema.ValidationError).Field
			}
			vs = append(vs, commandVector{Name: name, Command: raw, Field: field})
		}
		out, err := json.MarshalIndent(vs, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(out, '\n'), 0o644))
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./schema -run TestCommandVectors -update-vectors")
	var vs []commandVector
	require.NoError(t, json.Unmarshal(raw, &vs))
	require.Len(t, vs, len(vectorCommands()), "run with -update-vectors after changing the cases")
	for _, v := range vs {
		cmd := new(chimev1.JobCommand)
		require.NoError(t, protojson.Unmarshal(v.Command, cmd), v.Name)
		field := ""
		if err := schema.ValidateCommand(cmd, schema.ValidateOptions{}); err != nil {
			field = err.(*schema.ValidationError).Field
		}
		require.Equal(t, v.Field, field, v.Name)
	}
}

func sortedNames(m map[string]*chimev1.JobCommand) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
