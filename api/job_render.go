// A job's row becomes the JSON answer: its state, next fire, schedule and
// callback as they were given, and the fires in progress.

package api

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func renderJob(ns, id string, row *chimev1.JobState, pending bool) jobResponse {
	spec := row.GetSpec()
	r := jobResponse{
		ID:           id,
		Namespace:    ns,
		State:        stateName(row.GetStatus()),
		Labels:       spec.GetLabels(),
		MaxFires:     spec.GetMaxFires(),
		PauseOnFail:  spec.GetPauseOnFailure(),
		Overlap:      nonDefault(spec.GetOverlap() != chimev1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED, schema.OverlapPolicyName(spec.GetOverlap())),
		Catchup:      nonDefault(spec.GetCatchup() != chimev1.CatchupPolicy_CATCHUP_POLICY_UNSPECIFIED, schema.CatchupPolicyName(spec.GetCatchup())),
		CatchupWin:   fmtDuration(spec.GetCatchupWindow()),
		CreatedAt:    fmtTime(row.GetCreatedAt()),
		UpdatedAt:    fmtTime(row.GetUpdatedAt()),
		Fires:        row.GetFires(),
		Skipped:      row.GetSkipped(),
		LastFiredAt:  fmtTime(row.GetLastFiredAt()),
		Pending:      pending,
		CurrentFires: currentFires(row),
	}
	r.NextFires = nextFires(schema.JobKey(ns, id), row)
	if !schema.JobEnded(row.GetStatus()) {
		r.NextFireAt = fmtTime(row.GetTimerAt())
		if r.NextFireAt == nil || row.GetStatus() == chimev1.JobStatus_JOB_STATUS_PAUSED {
			r.NextFireAt = fmtTime(row.GetNextScheduledAt())
		}
	}
	if res := row.GetLastResult(); res != chimev1.AckResult_ACK_RESULT_UNSPECIFIED {
		r.LastOutcome = &outcomeJSON{Result: strings.ToLower(strings.TrimPrefix(res.String(), "ACK_RESULT_")), Detail: row.GetLastDetail()}
	}
	if sc := spec.GetSchedule(); sc != nil {
		out := &scheduleJSON{Jitter: fmtDuration(sc.GetJitter())}
		for _, x := range sc.GetExclude() {
			out.Exclude = append(out.Exclude, exclusionJSON{Date: x.GetDate(), Cron: x.GetCron(), Duration: fmtDuration(x.GetDuration()), Timezone: x.GetTimezone()})
		}
		switch {
		case sc.GetAt() != nil:
			out.At = fmtTime(sc.GetAt())
		case sc.GetEvery() != nil:
			e := sc.GetEvery()
			out.Every, out.StartAt, out.EndAt = fmtDuration(e.GetInterval()), fmtTime(e.GetStartAt()), fmtTime(e.GetEndAt())
		case sc.GetCron() != nil:
			cr := sc.GetCron()
			expr := cr.GetExpr()
			out.Cron, out.Timezone, out.StartAt, out.EndAt = &expr, nonZero(cr.GetTimezone()), fmtTime(cr.GetStartAt()), fmtTime(cr.GetEndAt())
		}
		r.Schedule = out
	}
	if h := spec.GetTarget().GetHttp(); h != nil {
		method := h.GetMethod()
		if method == "" {
			method = "POST"
		}
		headers := sentHeaders(h)
		r.Callback = &callbackOut{URL: h.GetUrl(), Method: method, Headers: headers, Timeout: fmtDuration(h.GetTimeout())}
		switch b := h.GetBody(); {
		case len(b) == 0:
		case isJSONBody(headers, b):
			r.Callback.Body = json.RawMessage(b)
		default:
			r.Callback.Body = string(b)
		}
	}
	return r
}

func stateName(st chimev1.JobStatus) string {
	if st == chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
		return "unknown"
	}
	return schema.JobStatusName(st)
}

// currentFires lists a row's fires in progress: open emissions first
// (unless re-armed, which pending then shows), then those waiting.
func currentFires(row *chimev1.JobState) []currentFire {
	var out []currentFire
	waiting := map[uint64]bool{}
	for _, p := range row.GetPending() {
		waiting[p.GetFireSeq()] = true
	}
	for _, em := range row.GetOpen() {
		if waiting[em.GetFireSeq()] {
			continue
		}
		out = append(out, currentFire{FireSeq: em.GetFireSeq(), ScheduledAt: fmtTime(em.GetScheduledAt()), Attempt: em.GetAttempt(),
			State: "in_flight", LastError: lastFailure(em.GetHistory())})
	}
	for _, p := range row.GetPending() {
		state := "retry_scheduled"
		if p.GetAttempt() <= 1 && p.GetDeferrals() > 0 {
			state = "deferred"
		}
		out = append(out, currentFire{FireSeq: p.GetFireSeq(), ScheduledAt: fmtTime(p.GetScheduledAt()), Attempt: p.GetAttempt(),
			State: state, NextAttemptAt: fmtTime(p.GetNotBefore()), LastError: lastFailure(p.GetHistory())})
	}
	return out
}

func lastFailure(h []*chimev1.CallbackOutcome) *historyJSON {
	if len(h) == 0 {
		return nil
	}
	out := renderHistory(h[len(h)-1:])
	return &out[0]
}

// isJSONBody says a stored callback body is shown as JSON: the callback
// says it is JSON, and it is.
func isJSONBody(headers map[string]string, body []byte) bool {
	v, ok := contentType(headers)
	mt, _, _ := strings.Cut(v, ";")
	return ok && strings.EqualFold(strings.TrimSpace(mt), fiber.MIMEApplicationJSON) && json.Valid(body)
}

// sentHeaders are the headers the callback is sent with, chime's own aside:
// the job's, and the content type its JSON body adds.
func sentHeaders(h *chimev1.HttpCallback) map[string]string {
	if !h.GetJsonBody() {
		return h.GetHeaders()
	}
	out := make(map[string]string, len(h.GetHeaders())+1)
	maps.Copy(out, h.GetHeaders())
	out[fiber.HeaderContentType] = fiber.MIMEApplicationJSON
	return out
}

func created(ns, id string, row *chimev1.JobState) jobCreated {
	r := renderJob(ns, id, row, false)
	return jobCreated{ID: id, Namespace: ns, State: r.State, NextFireAt: r.NextFireAt}
}

// nonDefault is name when the job set it, "" (left out) for the default.
func nonDefault(set bool, name string) string {
	if !set {
		return ""
	}
	return name
}
