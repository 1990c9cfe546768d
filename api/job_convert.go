// A job request becomes a validated Upsert: JSON fields to the protobuf
// spec, schema validation with its field paths mapped back to the
// request's, then what only the API checks (the namespace's relevancy
// window and allowed hosts).

package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
	"github.com/chime-sched/chime/schema/schedule"
)

// converted is one job request turned into a command.
type converted struct {
	cmd  *chimev1.JobCommand
	next *string
}

// jobScope is what every job of one request is converted against.
type jobScope struct {
	ns    string
	nsCfg *chimev1.NamespaceConfig // the namespace's config, defaults filled in
	now   time.Time                // the request's
}

// toCommand converts and validates one job request. prefix goes in front
// of every field path ("jobs[3].").
func (js jobScope) toCommand(id string, req *jobRequest, prefix string) (*converted, fieldErrs) {
	ns, nsCfg, now := js.ns, js.nsCfg, js.now
	var fe fieldErrs
	add := func(field, format string, args ...any) { fe.add(prefix+field, format, args...) }
	if req == nil {
		add("", "is null; send a job object")
		return nil, fe
	}
	spec := &chimev1.JobSpec{Namespace: ns, Id: id, Labels: req.Labels, MaxFires: deref(req.MaxFires), PauseOnFailure: deref(req.PauseOnFailure)}
	usedIn := false
	if sc := req.Schedule; sc == nil {
		add("schedule", "is missing; set exactly one of at, in, every, cron")
	} else {
		spec.Schedule, usedIn = scheduleToProto(&fe, prefix, sc, now)
	}
	if cb := req.Callback; cb == nil {
		add("callback", "is missing; give at least callback.url")
	} else {
		h := &chimev1.HttpCallback{
			Url:      cb.URL,
			Method:   cb.Method,
			Headers:  cb.Headers,
			Body:     callbackBody(cb.Body),
			JsonBody: sendsAsJSON(cb.Headers, cb.Body),
			Timeout:  fe.duration(prefix, "callback.timeout", cb.Timeout),
		}
		spec.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: h}}
	}
	if r := req.Retry; r != nil {
		spec.Retry = r.toProto(&fe, prefix+"retry")
	}
	spec.RelevancyWindow = fe.duration(prefix, "relevancy_window", req.RelevancyWindow)
	// policy reads an enum field by its lower-case name (absent: 0).
	policy := func(field string, values map[string]int32, enumPrefix string, given *string, what string) int32 {
		if given == nil {
			return 0
		}
		v, ok := schema.EnumValue(values, enumPrefix, *given)
		if !ok {
			add(field, "%q is not %s", *given, what)
		}
		return v
	}
	spec.Catchup = chimev1.CatchupPolicy(policy("catchup", chimev1.CatchupPolicy_value, "CATCHUP_POLICY_", req.Catchup,
		"a catch-up policy; use latest, none or all"))
	spec.CatchupWindow = fe.duration(prefix, "catchup_window", req.CatchupWindow)
	spec.Overlap = chimev1.OverlapPolicy(policy("overlap", chimev1.OverlapPolicy_value, "OVERLAP_POLICY_", req.Overlap,
		"an overlap policy; use allow_all, skip, buffer_one or cancel_other"))
	if len(fe) > 0 {
		return nil, fe
	}
	cmd := command.Upsert(spec)
	command.Stamp(cmd, now)
	if err := schema.ValidateCommand(cmd, schema.ValidateOptions{Now: now}); err != nil {
		add(jsonField(fieldOf(err), usedIn), "%s", validationReason(err))
		return nil, fe
	}
	// The command check knows only the job's own window; the namespace's
	// applies too when the job sets none.
	if at := spec.GetSchedule().GetAt(); at != nil && spec.GetRelevancyWindow() == nil {
		if w := nsCfg.GetRelevancyWindow(); w != nil {
			if deadline := at.AsTime().Add(w.AsDuration()); deadline.Before(now) {
				field := "schedule.at"
				if usedIn {
					field = "schedule.in"
				}
				add(field, "%s is already past namespace %q's relevancy window (%s, ended %s, now %s); schedule it later or set a wider relevancy_window on the job",
					at.AsTime().Format(time.RFC3339), ns, w.AsDuration(), deadline.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
				return nil, fe
			}
		}
	}
	if host, ok := hostAllowed(nsCfg.GetAllowedHosts(), spec.GetTarget().GetHttp().GetUrl()); !ok {
		add("callback.url", "host %q is not in namespace %q's allowed_hosts %q; call an allowed host or add it with PUT /v1/namespaces/%s",
			host, ns, nsCfg.GetAllowedHosts(), ns)
		return nil, fe
	}
	c := &converted{cmd: cmd}
	if plan, err := schedule.Compile(spec.GetSchedule()); err == nil {
		if t, ok := plan.WithAnchor(now).First(now); ok {
			c.next = fmtTime(timestamppb.New(t))
		}
	}
	return c, nil
}

func scheduleToProto(fe *fieldErrs, prefix string, sc *scheduleJSON, now time.Time) (*chimev1.Schedule, bool) {
	out := &chimev1.Schedule{Jitter: fe.duration(prefix, "schedule.jitter", sc.Jitter)}
	for i, x := range sc.Exclude {
		out.Exclude = append(out.Exclude, &chimev1.Exclusion{Date: x.Date, Cron: x.Cron, Timezone: x.Timezone,
			Duration: fe.duration(prefix, fmt.Sprintf("schedule.exclude[%d].duration", i), x.Duration)})
	}
	kinds := 0
	for _, set := range [...]bool{sc.At != nil, sc.In != nil, sc.Every != nil, sc.Cron != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		fe.add(prefix+"schedule", "sets %d of at, in, every, cron; set exactly one", kinds)
		return nil, false
	}
	start := fe.timestamp(prefix, "schedule.start_at", sc.StartAt)
	end := fe.timestamp(prefix, "schedule.end_at", sc.EndAt)
	if sc.Timezone != nil && sc.Cron == nil {
		fe.add(prefix+"schedule.timezone", "applies only to cron schedules; remove it")
	}
	if (sc.StartAt != nil || sc.EndAt != nil) && (sc.At != nil || sc.In != nil) {
		fe.add(prefix+"schedule", "start_at and end_at apply only to every and cron schedules; remove them")
	}
	switch {
	case sc.At != nil:
		if at := fe.timestamp(prefix, "schedule.at", sc.At); at != nil {
			out.Kind = &chimev1.Schedule_At{At: at}
		}
	case sc.In != nil:
		if d := fe.duration(prefix, "schedule.in", sc.In); d != nil {
			if d.AsDuration() < 0 {
				fe.add(prefix+"schedule.in", "is %s; it must not be negative", d.AsDuration())
			}
			out.Kind = &chimev1.Schedule_At{At: timestamppb.New(now.Add(d.AsDuration()))}
		}
		return out, true
	case sc.Every != nil:
		if d := fe.duration(prefix, "schedule.every", sc.Every); d != nil {
			out.Kind = &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: d, StartAt: start, EndAt: end}}
		}
	case sc.Cron != nil:
		out.Kind = &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: *sc.Cron, Timezone: deref(sc.Timezone), StartAt: start, EndAt: end}}
	}
	return out, false
}

// sendsAsJSON says a callback is sent with Content-Type: application/json:
// its body is given as a JSON value other than a string (an object, an
// array...) and the job sets no content type of its own, so the receiver's
// framework parses it, as it would a webhook from Svix or Stripe. The job
// keeps a flag (json_body) the dispatcher reads, not a header in its map.
func sendsAsJSON(headers map[string]string, raw []byte) bool {
	body := bytes.TrimSpace(raw)
	if len(body) == 0 || body[0] == '"' || string(body) == "null" {
		return false
	}
	_, own := contentType(headers)
	return !own
}

// contentType is the job's own Content-Type header, if it sets one.
func contentType(headers map[string]string) (string, bool) {
	for k, v := range headers {
		if strings.EqualFold(k, fiber.HeaderContentType) {
			return v, true
		}
	}
	return "", false
}

// callbackBody is the bytes a job's callback sends: a JSON string's
// contents as they are, any other JSON value compacted.
func callbackBody(raw []byte) []byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	// Only a string is decoded as one: trying it on an object first cost
	// a failed decode, and its error, for every job with a JSON body.
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return []byte(s)
		}
	}
	// Without a whitespace byte it is compact already (the decoder
	// checked it is JSON, and the value is the request's own copy).
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return raw
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// jsonField maps a schema.ValidateCommand field path to the request's JSON
// path.
func jsonField(field string, usedIn bool) string {
	f := strings.TrimPrefix(field, "upsert.spec.")
	switch {
	case f == "job_id" || f == "id":
		return "id"
	case f == "schedule.at" && usedIn:
		return "schedule.in"
	case f == "schedule.every.interval":
		return "schedule.every"
	case f == "schedule.cron.expr":
		return "schedule.cron"
	case strings.HasPrefix(f, "schedule.every.") || strings.HasPrefix(f, "schedule.cron."):
		_, rest, _ := strings.Cut(strings.TrimPrefix(f, "schedule."), ".")
		return "schedule." + rest
	case f == "target.http" || f == "target":
		return "callback"
	case strings.HasPrefix(f, "target.http."):
		return "callback." + strings.TrimPrefix(f, "target.http.")
	}
	return f
}
