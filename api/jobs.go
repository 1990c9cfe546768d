package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
	"github.com/chime-sched/chime/schema/schedule"
)

// HeaderIdempotencyKey makes a create safe to retry: the same key in the
// same namespace returns the same job and never creates a second one.
const HeaderIdempotencyKey = "Idempotency-Key"

// headerReplayed marks an answer given from the idempotency store.
const headerReplayed = "Idempotent-Replayed"

const maxIdempotencyKeyLen = 255

// jobRequest is the body of POST .../jobs and one item of a batch.
type jobRequest struct {
	ID              string            `json:"id,omitempty"`
	Schedule        *scheduleJSON     `json:"schedule"`
	Callback        *callbackJSON     `json:"callback"`
	Retry           *retryJSON        `json:"retry,omitempty"`
	RelevancyWindow *string           `json:"relevancy_window,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// scheduleJSON: exactly one of at, in, every, cron.
type scheduleJSON struct {
	At       *string `json:"at,omitempty"`
	In       *string `json:"in,omitempty"`
	Every    *string `json:"every,omitempty"`
	Cron     *string `json:"cron,omitempty"`
	Timezone *string `json:"timezone,omitempty"`
	StartAt  *string `json:"start_at,omitempty"`
	EndAt    *string `json:"end_at,omitempty"`
	Jitter   *string `json:"jitter,omitempty"`
}

// callbackJSON.Body is sent as is: a JSON string is sent as its text, any
// other JSON value as its JSON.
type callbackJSON struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Timeout *string           `json:"timeout,omitempty"`
}

type batchRequest struct {
	Jobs []*jobRequest `json:"jobs"`
}

// jobCreated is the 201 answer to a create.
type jobCreated struct {
	ID         string  `json:"id"`
	Namespace  string  `json:"namespace"`
	State      string  `json:"state"`
	NextFireAt *string `json:"next_fire_at"`
}

// jobResponse is GET .../jobs/{id} and the answer to cancel, pause, resume.
type jobResponse struct {
	ID          string            `json:"id"`
	Namespace   string            `json:"namespace"`
	State       string            `json:"state,omitempty"` // unset only in a repeated replay's answer once its job was removed
	NextFireAt  *string           `json:"next_fire_at"`
	Schedule    *scheduleJSON     `json:"schedule,omitempty"`
	Callback    *callbackOut      `json:"callback,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	CreatedAt   *string           `json:"created_at,omitempty"`
	UpdatedAt   *string           `json:"updated_at,omitempty"`
	Fires       uint64            `json:"fires"`
	Skipped     uint64            `json:"skipped"`
	LastFiredAt *string           `json:"last_fired_at,omitempty"`
	LastOutcome *outcomeJSON      `json:"last_outcome,omitempty"`
	// CurrentFires are the fires in progress: sent and waiting for their
	// answer, or waiting for their next attempt.
	CurrentFires []currentFire `json:"current_fires,omitempty"`
	// Pending says the answer comes from the command this API just
	// accepted; the scheduler has not written the row yet.
	Pending bool `json:"pending,omitempty"`
}

// currentFire is one fire in progress, as the jobs table shows it.
type currentFire struct {
	FireSeq     uint64  `json:"fire_seq"`
	ScheduledAt *string `json:"scheduled_at,omitempty"`
	// Attempt is the attempt in flight, or the next one.
	Attempt uint32 `json:"attempt"`
	// State is "in_flight" (sent, no answer yet) or "retry_scheduled"
	// (or "deferred": the receiver asked for later, no attempt charged).
	State         string       `json:"state"`
	NextAttemptAt *string      `json:"next_attempt_at,omitempty"`
	LastError     *historyJSON `json:"last_error,omitempty"`
}

func lastFailure(h []*chimev1.CallbackOutcome) *historyJSON {
	if len(h) == 0 {
		return nil
	}
	out := renderHistory(h[len(h)-1:])
	return &out[0]
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

type callbackOut struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the body as JSON when the callback sends it as JSON
	// (json.RawMessage), else as a string.
	Body    any     `json:"body,omitempty"`
	Timeout *string `json:"timeout,omitempty"`
}

type outcomeJSON struct {
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

// converted is one job request turned into a command.
type converted struct {
	cmd  *chimev1.JobCommand
	next *string
}

// toCommand converts and validates one job request. prefix goes in front
// of every field path ("jobs[3].").
func (s *server) toCommand(ns string, ns_cfg *chimev1.NamespaceConfig, id string, req *jobRequest, now time.Time, prefix string) (*converted, fieldErrs) {
	var fe fieldErrs
	add := func(field, format string, args ...any) { fe.add(prefix+field, format, args...) }
	if req == nil {
		add("", "is null; send a job object")
		return nil, fe
	}
	spec := &chimev1.JobSpec{Namespace: ns, Id: id, Labels: req.Labels}
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
			Timeout:  fe.duration(prefix+"callback.timeout", cb.Timeout),
		}
		spec.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: h}}
	}
	if r := req.Retry; r != nil {
		spec.Retry = r.toProto(&fe, prefix+"retry")
	}
	spec.RelevancyWindow = fe.duration(prefix+"relevancy_window", req.RelevancyWindow)
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
		if w := ns_cfg.GetRelevancyWindow(); w != nil {
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
	if host, ok := hostAllowed(ns_cfg.GetAllowedHosts(), spec.GetTarget().GetHttp().GetUrl()); !ok {
		add("callback.url", "host %q is not in namespace %q's allowed_hosts %q; call an allowed host or add it with PUT /v1/namespaces/%s",
			host, ns, ns_cfg.GetAllowedHosts(), ns)
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
	out := &chimev1.Schedule{Jitter: fe.duration(prefix+"schedule.jitter", sc.Jitter)}
	var kinds []string
	for name, set := range map[string]bool{"at": sc.At != nil, "in": sc.In != nil, "every": sc.Every != nil, "cron": sc.Cron != nil} {
		if set {
			kinds = append(kinds, name)
		}
	}
	if len(kinds) != 1 {
		fe.add(prefix+"schedule", "sets %d of at, in, every, cron; set exactly one", len(kinds))
		return nil, false
	}
	start := fe.timestamp(prefix+"schedule.start_at", sc.StartAt)
	end := fe.timestamp(prefix+"schedule.end_at", sc.EndAt)
	if sc.Timezone != nil && sc.Cron == nil {
		fe.add(prefix+"schedule.timezone", "applies only to cron schedules; remove it")
	}
	if (sc.StartAt != nil || sc.EndAt != nil) && (sc.At != nil || sc.In != nil) {
		fe.add(prefix+"schedule", "start_at and end_at apply only to every and cron schedules; remove them")
	}
	switch {
	case sc.At != nil:
		if at := fe.timestamp(prefix+"schedule.at", sc.At); at != nil {
			out.Kind = &chimev1.Schedule_At{At: at}
		}
	case sc.In != nil:
		if d := fe.duration(prefix+"schedule.in", sc.In); d != nil {
			if d.AsDuration() < 0 {
				fe.add(prefix+"schedule.in", "is %s; it must not be negative", d.AsDuration())
			}
			out.Kind = &chimev1.Schedule_At{At: timestamppb.New(now.Add(d.AsDuration()))}
		}
		return out, true
	case sc.Every != nil:
		if d := fe.duration(prefix+"schedule.every", sc.Every); d != nil {
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
func sendsAsJSON(headers map[string]string, raw json.RawMessage) bool {
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

func callbackBody(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []byte(s)
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

// jobIDFor returns the job's id: the one given, else one derived from the
// idempotency key (so a retry on any API instance names the same job),
// else a random one.
func jobIDFor(ns, given, idemKey string, index int) string {
	switch {
	case given != "":
		return given
	case idemKey != "":
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", ns, idemKey, index))
		return "idem-" + hex.EncodeToString(h[:16])
	}
	// Random (v4), not time-ordered like a command id: it names a job, and
	// nothing sorts jobs by it.
	return uuid.NewString()
}

func (s *server) idempotencyKey(c *fiber.Ctx) (string, error) {
	k := c.Get(HeaderIdempotencyKey)
	if k == "" {
		return "", nil
	}
	if len(k) > maxIdempotencyKeyLen {
		return "", invalidFields(FieldError{Field: HeaderIdempotencyKey, Reason: fmt.Sprintf("is %d bytes long; the limit is %d", len(k), maxIdempotencyKeyLen)})
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", invalidFields(FieldError{Field: HeaderIdempotencyKey, Reason: fmt.Sprintf("has byte %q at %d; use printable ASCII without spaces (a UUID, say)", k[i], i)})
		}
	}
	return k, nil
}

// idempotent runs create under the Idempotency-Key of the request, if any:
// a replay of an answered request gets the same answer, a different body
// under the same key a 422.
func (s *server) idempotent(c *fiber.Ctx, ns, key string, req any, create func() (int, any, error)) error {
	if key == "" {
		status, body, err := create()
		if err != nil {
			return err
		}
		return c.Status(status).JSON(body)
	}
	canon, _ := json.Marshal(req)
	hash := sha256.Sum256(append([]byte(c.Route().Path+"\x00"), canon...))
	storeKey := ns + "\x00" + key
	switch outcome, e := s.idem.begin(storeKey, hash, s.now()); outcome {
	case idemMismatch:
		p := problem(fiber.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key %q was used at %s with a different request; use a new key for a new request", key, e.at.UTC().Format(time.RFC3339))
		p.Errors = []FieldError{{Field: HeaderIdempotencyKey, Reason: "was used with a different request"}}
		return p
	case idemBusy:
		return problem(fiber.StatusConflict, "idempotency-key-in-use", "a request with Idempotency-Key %q is still being processed; retry in a moment", key)
	case idemReplay:
		s.metrics.replays.Inc()
		c.Set(headerReplayed, "true")
		c.Status(e.status).Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(e.response)
	}
	status, body, err := create()
	if err != nil {
		s.idem.abort(storeKey)
		return err
	}
	raw, err := marshalJSON(body)
	if err != nil {
		s.idem.abort(storeKey)
		return err
	}
	s.idem.finish(storeKey, status, raw)
	c.Status(status).Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(raw)
}

func (s *server) namespaceFor(ns string) (*chimev1.NamespaceConfig, error) {
	cfg, err := s.cfg.Namespaces.Get(ns)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, namespaceNotFound(ns)
	}
	return cfg, nil
}

func (s *server) createJob(c *fiber.Ctx) error {
	ns := c.Params("ns")
	var req jobRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.limitJobs(c, 1); err != nil {
		return err
	}
	key, err := s.idempotencyKey(c)
	if err != nil {
		return err
	}
	nsCfg, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	return s.idempotent(c, ns, key, &req, func() (int, any, error) {
		now := s.now()
		id := jobIDFor(ns, req.ID, key, 0)
		if req.ID == "" && key != "" {
			// Another API instance may have answered this key: the
			// derived id names the job it created. Unread, a retry
			// would publish the job again (an "in" schedule would move).
			row, err := s.cfg.JobStates.Get(ns, id)
			if err != nil {
				return 0, nil, err
			}
			if row != nil {
				c.Set(headerReplayed, "true")
				return fiber.StatusCreated, created(ns, id, row), nil
			}
		}
		conv, fe := s.toCommand(ns, nsCfg, id, &req, now, "")
		if err := fe.problem(); err != nil {
			return 0, nil, err
		}
		ctx, cancel := s.publishCtx(c)
		defer cancel()
		if _, err := s.cfg.Jobs.Publish(ctx, conv.cmd); err != nil {
			return 0, nil, unavailable("the job", err)
		}
		s.accepted([]*converted{conv}, now)
		s.metrics.jobsAccepted.Inc()
		c.Location("/v1/namespaces/" + ns + "/jobs/" + id)
		return fiber.StatusCreated, jobCreated{ID: id, Namespace: ns, State: "scheduled", NextFireAt: conv.next}, nil
	})
}

// accepted remembers upserts of one namespace for read-your-writes,
// reading their rows in one call.
func (s *server) accepted(convs []*converted, now time.Time) {
	if len(convs) == 0 {
		return
	}
	ids := make([]string, len(convs))
	for i, conv := range convs {
		ids[i] = conv.cmd.GetJobId()
	}
	// Unread rows only cost memory: each upsert is then remembered.
	rows, err := s.cfg.JobStates.Rows(convs[0].cmd.GetNamespace(), ids)
	if err != nil {
		rows = make([]*chimev1.JobState, len(convs))
	}
	for i, conv := range convs {
		s.remember(conv, rows[i], now)
	}
}

// remember keeps an upsert for read-your-writes, given the job's row as
// the table has it. An upsert that repeats the spec of a live job is not
// remembered: the scheduler ignores it, so the table will never show its
// command and already is the truth.
func (s *server) remember(conv *converted, row *chimev1.JobState, now time.Time) {
	cmd := conv.cmd
	if row != nil && !schema.JobEnded(row.GetStatus()) && proto.Equal(row.GetSpec(), cmd.GetUpsert().GetSpec()) {
		return
	}
	st := &chimev1.JobState{
		Spec:          cmd.GetUpsert().GetSpec(),
		Status:        chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		CreatedAt:     timestamppb.New(now),
		UpdatedAt:     timestamppb.New(now),
		LastCommandId: cmd.GetCommandId(),
	}
	if conv.next != nil {
		t, _ := time.Parse(time.RFC3339Nano, *conv.next)
		st.NextScheduledAt = timestamppb.New(t)
	}
	s.recent.put(schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), cmd.GetCommandId(), row.GetLastCommandId(), st, now)
}

func created(ns, id string, row *chimev1.JobState) jobCreated {
	r := renderJob(ns, id, row, false)
	return jobCreated{ID: id, Namespace: ns, State: r.State, NextFireAt: r.NextFireAt}
}

func (s *server) createJobs(c *fiber.Ctx) error {
	ns := c.Params("ns")
	var req batchRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch n := len(req.Jobs); {
	case n == 0:
		return invalidFields(FieldError{Field: "jobs", Reason: "is empty; send 1 to 1000 jobs"})
	case n > MaxBatch:
		return invalidFields(FieldError{Field: "jobs", Reason: fmt.Sprintf("has %d jobs; the limit is %d per request, split the batch", n, MaxBatch)})
	}
	if err := s.limitJobs(c, len(req.Jobs)); err != nil {
		return err
	}
	key, err := s.idempotencyKey(c)
	if err != nil {
		return err
	}
	nsCfg, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	return s.idempotent(c, ns, key, &req, func() (int, any, error) {
		now := s.now()
		convs := make([]*converted, len(req.Jobs))
		var all fieldErrs
		seen := make(map[string]int, len(req.Jobs))
		for i, jr := range req.Jobs {
			prefix := fmt.Sprintf("jobs[%d].", i)
			given := ""
			if jr != nil {
				given = jr.ID
			}
			id := jobIDFor(ns, given, key, i)
			if j, dup := seen[id]; dup && given != "" {
				all.add(prefix+"id", "%q is also the id of jobs[%d]; ids in a batch must differ", id, j)
				continue
			}
			seen[id] = i
			conv, fe := s.toCommand(ns, nsCfg, id, jr, now, prefix)
			all = append(all, fe...)
			convs[i] = conv
			if len(all) >= 100 {
				all.add("jobs", "stopped after 100 errors")
				break
			}
		}
		if err := all.problem(); err != nil {
			return 0, nil, err
		}
		ctx, cancel := s.publishCtx(c)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, len(convs))
		for i, conv := range convs {
			wg.Add(1)
			s.cfg.Jobs.PublishAsync(ctx, conv.cmd, func(_ producer.Receipt, err error) {
				errs[i] = err
				wg.Done()
			})
		}
		wg.Wait()
		out := make([]jobCreated, len(convs))
		var failed []FieldError
		ok := make([]*converted, 0, len(convs))
		for i, conv := range convs {
			if errs[i] != nil {
				failed = append(failed, FieldError{Field: fmt.Sprintf("jobs[%d]", i), Reason: errs[i].Error()})
				continue
			}
			ok = append(ok, conv)
			out[i] = jobCreated{ID: conv.cmd.GetJobId(), Namespace: ns, State: "scheduled", NextFireAt: conv.next}
		}
		s.accepted(ok, now)
		s.metrics.jobsAccepted.Add(float64(len(convs) - len(failed)))
		if len(failed) > 0 {
			p := unavailable(fmt.Sprintf("%d of %d jobs", len(failed), len(convs)), errors.New("publish failed"))
			p.Errors = failed
			return 0, nil, p
		}
		return fiber.StatusCreated, fiber.Map{"jobs": out}, nil
	})
}

// job returns the job's row as this API knows it: the jobs table's, or the
// command it accepted and the table does not show yet.
func (s *server) job(ns, id string) (*chimev1.JobState, bool, error) {
	if err := schema.ValidateJobID(id); err != nil {
		return nil, false, invalidFields(FieldError{Field: "id", Reason: validationReason(err)})
	}
	row, err := s.cfg.JobStates.Get(ns, id)
	if err != nil {
		return nil, false, err
	}
	if pending := s.recent.get(schema.JobKey(ns, id), row, s.now()); pending != nil {
		return pending, true, nil
	}
	if row == nil {
		return nil, false, problem(fiber.StatusNotFound, "job-not-found", "namespace %q has no job %q (jobs are removed some time after they end)", ns, id)
	}
	return row, false, nil
}

func (s *server) getJob(c *fiber.Ctx) error {
	ns, id := c.Params("ns"), c.Params("id")
	row, pending, err := s.job(ns, id)
	if err != nil {
		return err
	}
	return c.JSON(renderJob(ns, id, row, pending))
}

func (s *server) cancelJob(c *fiber.Ctx) error {
	return s.control(c, chimev1.JobStatus_JOB_STATUS_CANCELLED, func(ns, id string) *chimev1.JobCommand {
		return command.Cancel(ns, id, "cancelled over the API")
	})
}

func (s *server) pauseJob(c *fiber.Ctx) error {
	return s.control(c, chimev1.JobStatus_JOB_STATUS_PAUSED, command.Pause)
}

func (s *server) resumeJob(c *fiber.Ctx) error {
	return s.control(c, chimev1.JobStatus_JOB_STATUS_SCHEDULED, command.Resume)
}

// control publishes a cancel, pause or resume and answers the job as it
// will be. Repeating one is harmless: a job already in the target state
// is answered as it is.
func (s *server) control(c *fiber.Ctx, to chimev1.JobStatus, build func(ns, id string) *chimev1.JobCommand) error {
	ns, id := c.Params("ns"), c.Params("id")
	row, pending, err := s.job(ns, id)
	if err != nil {
		return err
	}
	cur := row.GetStatus()
	if cur == to {
		return c.JSON(renderJob(ns, id, row, pending))
	}
	if schema.JobEnded(cur) {
		verb := map[chimev1.JobStatus]string{
			chimev1.JobStatus_JOB_STATUS_CANCELLED: "cancelled",
			chimev1.JobStatus_JOB_STATUS_PAUSED:    "paused",
			chimev1.JobStatus_JOB_STATUS_SCHEDULED: "resumed",
		}[to]
		return problem(fiber.StatusConflict, "job-ended", "job %q is %s and cannot be %s", id, stateName(cur), verb)
	}
	now := s.now()
	cmd := build(ns, id)
	command.Stamp(cmd, now)
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if _, err := s.cfg.Jobs.Publish(ctx, cmd); err != nil {
		return unavailable("the command", err)
	}
	next := proto.Clone(row).(*chimev1.JobState)
	next.Status, next.UpdatedAt, next.LastCommandId = to, timestamppb.New(now), cmd.GetCommandId()
	if to == chimev1.JobStatus_JOB_STATUS_CANCELLED {
		next.NextScheduledAt, next.TimerAt = nil, nil
	}
	viewRow, _ := s.cfg.JobStates.Get(ns, id)
	s.recent.put(schema.JobKey(ns, id), cmd.GetCommandId(), viewRow.GetLastCommandId(), next, now)
	return c.JSON(renderJob(ns, id, next, true))
}

// triggerJob answers POST .../jobs/{id}/trigger: the job fires once now,
// beside its schedule (schedule unchanged), under its own fire number and
// idempotency key. 202: the scheduler fires it within its lag.
func (s *server) triggerJob(c *fiber.Ctx) error {
	ns, id := c.Params("ns"), c.Params("id")
	row, _, err := s.job(ns, id)
	if err != nil {
		return err
	}
	if st := row.GetStatus(); schema.JobEnded(st) {
		return problem(fiber.StatusConflict, "job-ended", "job %q is %s and cannot be triggered; create it again to fire it", id, stateName(st))
	}
	if n := len(row.GetOpen()); n >= schema.MaxOpenFires {
		// The scheduler refuses it too; answering here says so at once.
		return problem(fiber.StatusConflict, "too-many-open-fires", "job %q has %d fires awaiting their outcome, the most one job may hold; trigger it again when some have finished (see current_fires)", id, n)
	}
	cmd := command.Trigger(ns, id)
	command.Stamp(cmd, s.now())
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if _, err := s.cfg.Jobs.Publish(ctx, cmd); err != nil {
		return unavailable("the trigger", err)
	}
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"id": id, "namespace": ns, "command_id": cmd.GetCommandId(), "state": stateName(row.GetStatus())})
}

func stateName(st chimev1.JobStatus) string {
	if st == chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
		return "unknown"
	}
	return schema.JobStatusName(st)
}

func renderJob(ns, id string, row *chimev1.JobState, pending bool) jobResponse {
	spec := row.GetSpec()
	r := jobResponse{
		ID:           id,
		Namespace:    ns,
		State:        stateName(row.GetStatus()),
		Labels:       spec.GetLabels(),
		CreatedAt:    fmtTime(row.GetCreatedAt()),
		UpdatedAt:    fmtTime(row.GetUpdatedAt()),
		Fires:        row.GetFires(),
		Skipped:      row.GetSkipped(),
		LastFiredAt:  fmtTime(row.GetLastFiredAt()),
		Pending:      pending,
		CurrentFires: currentFires(row),
	}
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
