package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// LabelReplayOf is the label a replayed dead letter's job carries: the
// dead letter's id.
const LabelReplayOf = "chime.replay_of"

// DefaultDeadLetterPage is the page size of GET .../dead-letters without
// limit.
const DefaultDeadLetterPage = 100

type deadLetterJSON struct {
	ID             string            `json:"id"`
	Namespace      string            `json:"namespace"`
	JobID          string            `json:"job_id"`
	FireSeq        uint64            `json:"fire_seq"`
	Attempts       uint32            `json:"attempts"`
	Reason         string            `json:"reason"`
	At             time.Time         `json:"at"`
	ScheduledAt    *string           `json:"scheduled_at,omitempty"`
	Callback       callbackOut       `json:"callback"`
	Labels         map[string]string `json:"labels,omitempty"`
	LastStatusCode int32             `json:"last_status_code,omitempty"`
	LastError      string            `json:"last_error,omitempty"`
	// AttemptHistory lists the fire's attempts, oldest first (at most the
	// scheduler's MaxAttemptHistory before the last).
	AttemptHistory []historyJSON `json:"attempt_history"`
	// ReplayJobID is the job a replay creates (or created).
	ReplayJobID string `json:"replay_job_id"`
	// ReplayPath is where to POST the replay (the id percent-encoded).
	ReplayPath string `json:"replay_path"`
}

// historyJSON is one attempt in a dead letter's history.
type historyJSON struct {
	Attempt     uint32  `json:"attempt"`
	Class       string  `json:"class"`
	StatusCode  int32   `json:"status_code,omitempty"`
	LatencyMs   float64 `json:"latency_ms"`
	ErrorKind   string  `json:"error_kind,omitempty"`
	Error       string  `json:"error,omitempty"`
	StartedAt   *string `json:"started_at,omitempty"`
	BodySnippet string  `json:"body_snippet,omitempty"`
}

func renderHistory(h []*chimev1.CallbackOutcome) []historyJSON {
	out := make([]historyJSON, 0, len(h))
	for _, o := range h {
		out = append(out, historyJSON{
			Attempt:     o.GetAttempt(),
			Class:       schema.OutcomeClassName(o.GetClass()),
			StatusCode:  o.GetStatusCode(),
			LatencyMs:   float64(o.GetLatency().AsDuration().Microseconds()) / 1000,
			ErrorKind:   o.GetErrorKind(),
			Error:       o.GetError(),
			StartedAt:   fmtTime(o.GetStartedAt()),
			BodySnippet: strings.ToValidUTF8(string(o.GetBodySnippet()), "\uFFFD"),
		})
	}
	return out
}

type deadLettersResponse struct {
	DeadLetters []deadLetterJSON `json:"dead_letters"`
	// NextBefore is the before of the next page; null on the last one.
	NextBefore *string `json:"next_before"`
}

func renderDeadLetter(d *analytics.DeadLetter) deadLetterJSON {
	h := d.Due.GetCallback()
	method := h.GetMethod()
	if method == "" {
		method = "POST"
	}
	return deadLetterJSON{
		ID:             d.ID,
		Namespace:      d.Namespace,
		JobID:          d.JobID,
		FireSeq:        d.FireSeq,
		Attempts:       d.Attempt,
		Reason:         d.Reason,
		At:             d.At,
		ScheduledAt:    fmtTime(d.Due.GetScheduledAt()),
		Callback:       callbackOut{URL: h.GetUrl(), Method: method, Headers: h.GetHeaders(), Body: string(h.GetBody()), Timeout: fmtDuration(h.GetTimeout())},
		Labels:         d.Due.GetLabels(),
		LastStatusCode: d.StatusCode,
		LastError:      d.Error,
		AttemptHistory: renderHistory(d.Due.GetHistory()),
		ReplayJobID:    replayJobID(d.JobID, d.ID),
		ReplayPath:     "/v1/namespaces/" + d.Namespace + "/dead-letters/" + url.PathEscape(d.ID) + "/replay",
	}
}

// replayJobID names the job that replays a dead letter:
// "<job id>.replay-<12 hex digits of the dead letter id's SHA-256>", the
// job id shortened to keep it within schema.MaxJobIDLen.
func replayJobID(jobID, deadLetterID string) string {
	h := sha256.Sum256([]byte(deadLetterID))
	suffix := ".replay-" + hex.EncodeToString(h[:6])
	if n := schema.MaxJobIDLen - len(suffix); len(jobID) > n {
		jobID = jobID[:n]
	}
	return jobID + suffix
}

// encodeCursor and decodeCursor make the opaque before of a page.
func encodeCursor(d analytics.DeadLetter) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(d.At.UnixMilli(), 10) + ":" + d.ID))
}

func decodeCursor(v string) (analytics.DeadLetterCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return analytics.DeadLetterCursor{}, false
	}
	ms, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return analytics.DeadLetterCursor{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return analytics.DeadLetterCursor{}, false
	}
	return analytics.DeadLetterCursor{At: time.UnixMilli(n).UTC(), ID: id}, true
}

func (s *server) listDeadLetters(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	limit := DefaultDeadLetterPage
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > analytics.MaxDeadLetters {
			return badQuery("limit", "%q is not a whole number from 1 to %d", v, analytics.MaxDeadLetters)
		}
		limit = n
	}
	var before analytics.DeadLetterCursor
	if v := c.Query("before"); v != "" {
		var ok bool
		if before, ok = decodeCursor(v); !ok {
			return badQuery("before", "%q is not a cursor; pass the next_before of the previous page as is", v)
		}
	}
	q := analytics.DeadLetterQuery{Limit: limit, Before: before, JobIDPrefix: c.Query("job_id_prefix")}
	if len(q.JobIDPrefix) > schema.MaxJobIDLen {
		return badQuery("job_id_prefix", "is longer than a job id (%d bytes)", schema.MaxJobIDLen)
	}
	if q.From, _, err = queryTime(c, "from"); err != nil {
		return err
	}
	if q.To, _, err = queryTime(c, "to"); err != nil {
		return err
	}
	ns := c.Params("ns")
	ctx, cancel := s.analyticsCtx(c)
	defer cancel()
	list, err := store.ListDeadLetters(ctx, ns, q)
	if err != nil {
		return analyticsError(err)
	}
	out := deadLettersResponse{DeadLetters: make([]deadLetterJSON, 0, len(list))}
	for i := range list {
		out.DeadLetters = append(out.DeadLetters, renderDeadLetter(&list[i]))
	}
	if len(list) == limit {
		next := encodeCursor(list[len(list)-1])
		out.NextBefore = &next
	}
	return c.JSON(out)
}

// replayDeadLetter schedules the dead letter's callback again as a new
// one-shot job, due now, with the original retry policy and labels plus
// chime.replay_of. The job id and the command id derive from the dead
// letter's id: replaying it again answers the job already created (200),
// and a replay that races another is ignored by the scheduler as the same
// command.
func (s *server) replayDeadLetter(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	ns := c.Params("ns")
	// Dead letter ids hold '/' and '#' ("dl-<ns>/<job>/<fire>#<emit>"):
	// clients percent-encode them, and the router leaves them encoded.
	dlID, err := url.PathUnescape(c.Params("id"))
	if err != nil || dlID == "" {
		return invalidFields(FieldError{Field: "id", Reason: fmt.Sprintf("%q is not a percent-encoded dead letter id; use the replay_path of GET .../dead-letters", c.Params("id"))})
	}
	nsCfg, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	ctx, cancel := s.analyticsCtx(c)
	d, err := store.GetDeadLetter(ctx, ns, dlID)
	cancel()
	if err != nil {
		return analyticsError(err)
	}
	if d == nil {
		return problem(fiber.StatusNotFound, "dead-letter-not-found",
			"namespace %q has no dead letter %q (GET /v1/namespaces/%s/dead-letters lists them; they are kept for the analytics retention)", ns, dlID, ns)
	}
	now := s.now()
	pctx, pcancel := s.publishCtx(c)
	defer pcancel()
	id, st, existed, pending, err := s.replayOne(pctx, ns, nsCfg, d, now, s.jobQuota(c))
	if refusal := (*jobRefusal)(nil); errors.As(err, &refusal) {
		return refusal.problem(c)
	}
	if err != nil {
		return err
	}
	if existed {
		c.Set(headerReplayed, "true")
		return c.JSON(renderJob(ns, id, st, pending))
	}
	c.Location("/v1/namespaces/" + ns + "/jobs/" + id)
	return c.Status(fiber.StatusCreated).JSON(renderJob(ns, id, st, true))
}

// replayOne schedules dead letter d again (see replayDeadLetter): it
// returns the replay job's id and row (pending: as this API accepted it,
// not yet in the table), and existed when an earlier replay already
// created it (nothing is published then). The new job is taken from
// quota, as a create's is, just before it is published; a refusal is a
// *jobRefusal.
func (s *server) replayOne(ctx context.Context, ns string, nsCfg *chimev1.NamespaceConfig, d *analytics.DeadLetter, now time.Time, quota *jobQuota) (id string, st *chimev1.JobState, existed, pending bool, err error) {
	dlID := d.ID
	id = replayJobID(d.JobID, d.ID)
	row, err := s.cfg.JobStates.Get(ns, id)
	if err != nil {
		return id, nil, false, false, err
	}
	if p := s.recent.get(schema.JobKey(ns, id), row, now); p != nil {
		return id, p, true, true, nil
	}
	if row != nil {
		return id, row, true, false, nil
	}
	cb := d.Due.GetCallback()
	if cb.GetUrl() == "" {
		return id, nil, false, false, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable", "dead letter %q holds no HTTP callback to replay", dlID)
	}
	if host, ok := hostAllowed(nsCfg.GetAllowedHosts(), cb.GetUrl()); !ok {
		return id, nil, false, false, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable",
			"dead letter %q calls host %q, which is no longer in namespace %q's allowed_hosts %q; add it with PUT /v1/namespaces/%s to replay it",
			dlID, host, ns, nsCfg.GetAllowedHosts(), ns)
	}
	labels := maps.Clone(d.Due.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelReplayOf] = d.ID
	spec := &chimev1.JobSpec{
		Namespace:       ns,
		Id:              id,
		Schedule:        &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(now)}},
		Target:          &chimev1.Target{Kind: &chimev1.Target_Http{Http: proto.Clone(cb).(*chimev1.HttpCallback)}},
		RelevancyWindow: d.Due.GetRelevancyWindow(),
		Labels:          labels,
	}
	if r := d.Due.GetRetry(); r != nil {
		spec.Retry = proto.Clone(r).(*chimev1.RetryPolicy)
	}
	h := sha256.Sum256([]byte(ns + "\x00" + d.ID))
	cmd := &chimev1.JobCommand{
		CommandId: "replay-" + hex.EncodeToString(h[:16]),
		IssuedAt:  timestamppb.New(now),
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}},
	}
	if err := schema.ValidateCommand(cmd, schema.ValidateOptions{Now: now}); err != nil {
		return id, nil, false, false, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable", "dead letter %q cannot be replayed as job %q: %s", dlID, id, validationReason(err))
	}
	if refusal := quota.take(1); refusal != nil {
		return id, nil, false, false, refusal
	}
	if _, err := s.cfg.Jobs.Publish(ctx, cmd); err != nil {
		return id, nil, false, false, unavailable("the replay", err)
	}
	next := fmtTime(timestamppb.New(now))
	s.accepted(&converted{cmd: cmd, next: next}, now)
	s.metrics.jobsAccepted.Inc()
	st = &chimev1.JobState{
		Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		CreatedAt: timestamppb.New(now), UpdatedAt: timestamppb.New(now),
		NextScheduledAt: timestamppb.New(now), LastCommandId: cmd.GetCommandId(),
	}
	return id, st, false, true, nil
}

// DefaultBulkReplay and MaxBulkReplay bound one bulk replay.
const (
	DefaultBulkReplay = 100
	MaxBulkReplay     = 500
)

type bulkReplayRequest struct {
	From        *string `json:"from"`
	To          *string `json:"to"`
	JobIDPrefix string  `json:"job_id_prefix"`
	Limit       *int    `json:"limit"`
}

type replayFailure struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type bulkReplayResponse struct {
	// Matched is how many dead letters the filter selected (at most
	// the limit); Replayed were scheduled now, AlreadyReplayed had been
	// before (their jobs are listed too), Failed could not be.
	Matched         int             `json:"matched"`
	Replayed        int             `json:"replayed"`
	AlreadyReplayed int             `json:"already_replayed"`
	Failed          []replayFailure `json:"failed"`
	// QuotaRefused were not replayed because the namespace's job quotas
	// had no room left (QuotaReason says which and when to retry): a
	// bulk replay replays what fits, newest first, and leaves the rest
	// for a later one.
	QuotaRefused int      `json:"quota_refused"`
	QuotaReason  string   `json:"quota_reason,omitempty"`
	Jobs         []string `json:"jobs"`
	// More says the limit cut the selection: the same request again
	// replays the next ones (those done are already_replayed).
	More bool `json:"more"`
}

// replayDeadLetters answers POST .../dead-letters:replay: the dead letters
// a filter selects (time range, job id prefix; newest first, at most
// limit) are replayed as replayDeadLetter does one, each once however
// often the request is repeated.
func (s *server) replayDeadLetters(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	ns := c.Params("ns")
	var req bulkReplayRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	var fe fieldErrs
	q := analytics.DeadLetterQuery{Limit: DefaultBulkReplay, JobIDPrefix: req.JobIDPrefix}
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > MaxBulkReplay {
			fe.add("limit", "must be from 1 to %d", MaxBulkReplay)
		}
		q.Limit = *req.Limit
	}
	if len(req.JobIDPrefix) > schema.MaxJobIDLen {
		fe.add("job_id_prefix", "is longer than a job id (%d bytes)", schema.MaxJobIDLen)
	}
	for name, in := range map[string]*string{"from": req.From, "to": req.To} {
		t := fe.timestamp(name, in)
		if t == nil {
			continue
		}
		if err := schedule.InRange(t.AsTime()); err != nil {
			fe.add(name, "%v", err)
			continue
		}
		if name == "from" {
			q.From = t.AsTime()
		} else {
			q.To = t.AsTime()
		}
	}
	if err := fe.problem(); err != nil {
		return err
	}
	nsCfg, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	// One more than the limit says whether more match.
	limit := q.Limit
	q.Limit++
	ctx, cancel := s.analyticsCtx(c)
	list, err := store.ListDeadLetters(ctx, ns, q)
	cancel()
	if err != nil {
		return analyticsError(err)
	}
	more := len(list) > limit
	list = list[:min(len(list), limit)]
	out := bulkReplayResponse{Matched: len(list), Failed: []replayFailure{}, Jobs: []string{}, More: more}
	now := s.now()
	pctx, pcancel := s.publishCtx(c)
	defer pcancel()
	quota := s.jobQuota(c)
	var refusal *jobRefusal
	for i := range list {
		id, _, existed, _, err := s.replayOne(pctx, ns, nsCfg, &list[i], now, quota)
		switch {
		case errors.As(err, &refusal):
			// The quota has no room for this one: none for the rest
			// either (jobs do not end, nor does the rate refill, within
			// a request), so they are not tried.
			out.QuotaRefused = len(list) - i
			out.QuotaReason = refusal.Error()
		case err != nil:
			reason := err.Error()
			if p, ok := err.(*Problem); ok {
				reason = p.Detail
			}
			out.Failed = append(out.Failed, replayFailure{ID: list[i].ID, Reason: reason})
			continue
		case existed:
			out.AlreadyReplayed++
		default:
			out.Replayed++
		}
		if refusal != nil {
			break
		}
		out.Jobs = append(out.Jobs, id)
	}
	if refusal != nil && out.Replayed == 0 {
		// Nothing replayed for the quota: the create's 429, so that a
		// client backs off as it would from a create.
		return tooMany(c, refusal.wait, "the job quotas left no room for the %d dead letters not replayed yet (none was replayed): %s", out.QuotaRefused, refusal.reason)
	}
	return c.JSON(out)
}
