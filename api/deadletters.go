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
	"github.com/chime-sched/chime/schema/command"
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
	// Replayed says whether the dead letter was replayed; ReplayedAt and
	// ReplayJobID, set only then, say when first and as which job.
	Replayed    bool    `json:"replayed"`
	ReplayedAt  *string `json:"replayed_at,omitempty"`
	ReplayJobID string  `json:"replay_job_id,omitempty"`
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
	out := deadLetterJSON{
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
		ReplayPath:     "/v1/namespaces/" + d.Namespace + "/dead-letters/" + url.PathEscape(d.ID) + "/replay",
	}
	if r := d.Replay; r != nil {
		out.Replayed, out.ReplayedAt, out.ReplayJobID = true, fmtTime(timestamppb.New(r.At)), r.JobID
	}
	return out
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
	switch v := c.Query("replayed"); v {
	case "":
	case "true", "false":
		replayed := v == "true"
		q.Replayed = &replayed
	default:
		return badQuery("replayed", "%q is neither true (only those replayed) nor false (only those not replayed yet)", v)
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

// replayAnswer is the answer to POST .../dead-letters/{id}/replay: the
// replay's job, as GET .../jobs/{id} shows it, and the replay.
type replayAnswer struct {
	jobResponse
	DeadLetterID string `json:"dead_letter_id"`
	// AlreadyReplayed says an earlier replay created the job (200; this
	// one published nothing), at ReplayedAt.
	AlreadyReplayed bool    `json:"already_replayed"`
	ReplayedAt      *string `json:"replayed_at"`
}

// replayDeadLetter schedules the dead letter's callback again as a new
// one-shot job, due now, with the original retry policy and labels plus
// chime.replay_of. A dead letter is replayed once: a repeat answers 200
// with the job the first replay created (see replayOne).
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
	quota := s.jobQuota(c)
	pctx, pcancel := s.publishCtx(c)
	res, err := s.replayOne(pctx, jobScope{ns: ns, nsCfg: nsCfg, now: s.now()}, d, quota)
	pcancel()
	if refusal := (*jobRefusal)(nil); errors.As(err, &refusal) {
		return refusal.problem(c)
	}
	if err != nil {
		return err
	}
	if res.record {
		if err := s.recordReplays(c, store, []*analytics.DeadLetter{d}); err != nil {
			return err
		}
	}
	out := replayAnswer{jobResponse: jobResponse{ID: res.jobID, Namespace: ns}, DeadLetterID: d.ID,
		AlreadyReplayed: res.already, ReplayedAt: fmtTime(timestamppb.New(d.Replay.At))}
	if res.row != nil {
		out.jobResponse = renderJob(ns, res.jobID, res.row, res.pending)
	}
	if res.already {
		c.Set(headerReplayed, "true")
		return c.JSON(out)
	}
	c.Location("/v1/namespaces/" + ns + "/jobs/" + res.jobID)
	return c.Status(fiber.StatusCreated).JSON(out)
}

// replayResult is what replayOne did with a dead letter.
type replayResult struct {
	jobID string
	// row is the replay's job as this process knows it: the table's row,
	// or (pending) the command it accepted and the table does not show
	// yet; nil once the table removed the ended job.
	row     *chimev1.JobState
	pending bool
	// already: an earlier replay created the job; nothing was published.
	already bool
	// record: the dead letter's Replay is not stored yet; the caller
	// stores it (recordReplays).
	record bool
}

// replayOne replays dead letter d, at most once however often it is
// asked, on whichever API process, and sets d.Replay.
//
// Where the replay state lives: ClickHouse's dead_letter_replays, beside
// the dead letters, recorded by the API after Kafka confirmed the job and
// joined into every dead-letter query (d.Replay). It survives restarts, is
// shared by every API process, and each process reads it at once (no
// topic and no sink in between). Recording is idempotent: the job id and
// the command id derive from the dead letter, and the table keeps the
// first replay of each dead letter. Before a record exists the job itself
// says a replay happened: this process's memory of what it accepted, or
// the jobs table (a replay by an older chime, or one whose record failed):
// such a replay is recorded now, as of the job's creation. Two replays
// racing on two processes may both publish: the same command id, which
// the scheduler applies once.
//
// A new job is taken from quota just before it is published, as a
// create's is; a refusal is a *jobRefusal.
func (s *server) replayOne(ctx context.Context, js jobScope, d *analytics.DeadLetter, quota *jobQuota) (replayResult, error) {
	ns, nsCfg, now := js.ns, js.nsCfg, js.now
	if r := d.Replay; r != nil {
		row, pending, err := s.knownJob(ns, r.JobID, now)
		return replayResult{jobID: r.JobID, row: row, pending: pending, already: true}, err
	}
	dlID := d.ID
	id := replayJobID(d.JobID, d.ID)
	row, pending, err := s.knownJob(ns, id, now)
	if err != nil {
		return replayResult{}, err
	}
	if row != nil {
		at := now
		if row.GetCreatedAt().IsValid() {
			at = row.GetCreatedAt().AsTime()
		}
		d.Replay = newReplay(id, at)
		return replayResult{jobID: id, row: row, pending: pending, already: true, record: true}, nil
	}
	cb := d.Due.GetCallback()
	if cb.GetUrl() == "" {
		return replayResult{}, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable", "dead letter %q holds no HTTP callback to replay", dlID)
	}
	if host, ok := hostAllowed(nsCfg.GetAllowedHosts(), cb.GetUrl()); !ok {
		return replayResult{}, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable",
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
	cmd := command.Upsert(spec)
	// Derived from the dead letter: a replay repeated on any API instance
	// is the same command, which the scheduler applies once.
	cmd.CommandId = command.ReplayID(ns, d.ID)
	command.Stamp(cmd, now)
	if err := schema.ValidateCommand(cmd, schema.ValidateOptions{Now: now}); err != nil {
		return replayResult{}, problem(fiber.StatusUnprocessableEntity, "dead-letter-not-replayable", "dead letter %q cannot be replayed as job %q: %s", dlID, id, validationReason(err))
	}
	if refusal := quota.take(1); refusal != nil {
		return replayResult{}, refusal
	}
	at, err := s.cfg.Jobs.Publish(ctx, cmd)
	if err != nil {
		return replayResult{}, unavailable("the replay", err)
	}
	s.remember(&converted{cmd: cmd, next: fmtTime(timestamppb.New(now))}, at, now)
	s.metrics.jobsAccepted.Inc()
	st := &chimev1.JobState{
		Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		CreatedAt: timestamppb.New(now), UpdatedAt: timestamppb.New(now),
		NextScheduledAt: timestamppb.New(now), LastCommandId: cmd.GetCommandId(),
	}
	d.Replay = newReplay(id, now)
	return replayResult{jobID: id, row: st, pending: true, record: true}, nil
}

// newReplay is a replay at, to the millisecond as ClickHouse keeps it: the
// answer says what every later listing says.
func newReplay(jobID string, at time.Time) *analytics.Replay {
	return &analytics.Replay{JobID: jobID, At: time.UnixMilli(at.UnixMilli()).UTC()}
}

// knownJob is job id as this process knows it: what it accepted and the
// table does not show yet (pending), else the table's row; nil if neither.
func (s *server) knownJob(ns, id string, now time.Time) (row *chimev1.JobState, pending bool, err error) {
	row, reached, err := s.cfg.JobStates.Get(ns, id)
	if err != nil {
		return nil, false, err
	}
	if p := s.recent.get(schema.JobKey(ns, id), row, reached, now); p != nil {
		return p, true, nil
	}
	return row, false, nil
}

// recordReplays stores the Replay of each of ds, whose jobs Kafka has
// confirmed. A failure leaves them listed as not replayed: replaying them
// again finds their jobs and records them then, without a second job.
func (s *server) recordReplays(c *fiber.Ctx, store AnalyticsStore, ds []*analytics.DeadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	ctx, cancel := s.analyticsCtx(c)
	defer cancel()
	err := store.RecordReplays(ctx, ds)
	if err == nil {
		return nil
	}
	what := fmt.Sprintf("dead letter %q was replayed as job %q", ds[0].ID, ds[0].Replay.JobID)
	if len(ds) > 1 {
		what = fmt.Sprintf("%d dead letters were replayed", len(ds))
	}
	return problem(fiber.StatusServiceUnavailable, "analytics-unavailable",
		"%s, but ClickHouse did not record it (%v): until it does, GET .../dead-letters lists them as not replayed; repeat the request to record it (no job is created twice)", what, err)
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
	// Matched is how many dead letters not replayed yet the filter
	// selected (newest first, at most the limit); Replayed were scheduled
	// now, Failed could not be. AlreadyReplayed counts those the filter
	// selects that were replayed before: skipped, and not counted in
	// Matched, unless found replayed only while this request ran (a
	// racing replay; one by a chime that did not record replays).
	Matched         int             `json:"matched"`
	Replayed        int             `json:"replayed"`
	AlreadyReplayed int             `json:"already_replayed"`
	Failed          []replayFailure `json:"failed"`
	// QuotaRefused were not replayed because the namespace's job quotas
	// had no room left (QuotaReason says which and when to retry): a
	// bulk replay replays what fits, newest first, and leaves the rest
	// for a later one.
	QuotaRefused int    `json:"quota_refused"`
	QuotaReason  string `json:"quota_reason,omitempty"`
	// Jobs are the jobs this request created.
	Jobs []string `json:"jobs"`
	// More says the limit cut the selection: the same request again
	// replays the next ones.
	More bool `json:"more"`
}

// replayDeadLetters answers POST .../dead-letters:replay: the dead letters
// not replayed yet that a filter selects (time range, job id prefix;
// newest first, at most limit) are replayed as replayDeadLetter does one.
// Those replayed before are skipped and counted, so repeating the request
// walks through the rest and never replays one twice.
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
		t := fe.timestamp("", name, in)
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
	replayed, notReplayed := true, false
	q.Replayed = &notReplayed
	done := q
	done.Replayed = &replayed
	ctx, cancel := s.analyticsCtx(c)
	list, err := store.ListDeadLetters(ctx, ns, q)
	var skipped int
	if err == nil {
		skipped, err = store.CountDeadLetters(ctx, ns, done)
	}
	cancel()
	if err != nil {
		return analyticsError(err)
	}
	more := len(list) > limit
	list = list[:min(len(list), limit)]
	out := bulkReplayResponse{Matched: len(list), AlreadyReplayed: skipped, Failed: []replayFailure{}, Jobs: []string{}, More: more}
	now := s.now()
	quota := s.jobQuota(c)
	pctx, pcancel := s.publishCtx(c)
	defer pcancel()
	var (
		refusal *jobRefusal
		record  []*analytics.DeadLetter
	)
	for i := range list {
		res, err := s.replayOne(pctx, jobScope{ns: ns, nsCfg: nsCfg, now: now}, &list[i], quota)
		if res.record {
			record = append(record, &list[i])
		}
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
		case res.already:
			out.AlreadyReplayed++
		default:
			out.Replayed++
			out.Jobs = append(out.Jobs, res.jobID)
		}
		if refusal != nil {
			break
		}
	}
	if err := s.recordReplays(c, store, record); err != nil {
		return err
	}
	if refusal != nil && out.Replayed == 0 {
		// Nothing replayed for the quota: the create's 429, so that a
		// client backs off as it would from a create.
		return tooMany(c, refusal.wait, "the job quotas left no room for the %d dead letters not replayed yet (none was replayed): %s", out.QuotaRefused, refusal.reason)
	}
	return c.JSON(out)
}
