// The jobs routes: create one or a batch, read one, cancel, pause, resume
// and trigger. A request becomes a command in job_convert.go, a row
// becomes an answer in job_render.go, and the bodies of both are in
// job_wire.go; Idempotency-Key is handled in idempotency.go, and the
// answers read-your-writes gives in recent.go.

package api

import (
	"errors"
	"fmt"
	"sync"

	"github.com/chime-sched/chime/schema/schedule"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

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
			row, _, err := s.cfg.JobStates.Get(ns, id)
			if err != nil {
				return 0, nil, err
			}
			if row != nil {
				c.Set(headerReplayed, "true")
				return fiber.StatusCreated, created(ns, id, row), nil
			}
		}
		conv, fe := jobScope{ns: ns, nsCfg: nsCfg, now: now}.toCommand(id, &req, "")
		if err := fe.problem(); err != nil {
			return 0, nil, err
		}
		ctx, cancel := s.publishCtx(c)
		defer cancel()
		at, err := s.cfg.Jobs.Publish(ctx, conv.cmd)
		if err != nil {
			return 0, nil, unavailable("the job", err)
		}
		s.remember(conv, at, now)
		s.metrics.jobsAccepted.Inc()
		c.Location("/v1/namespaces/" + ns + "/jobs/" + id)
		return fiber.StatusCreated, jobCreated{ID: id, Namespace: ns, State: "scheduled", NextFireAt: conv.next}, nil
	})
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
		scope := jobScope{ns: ns, nsCfg: nsCfg, now: now}
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
			conv, fe := scope.toCommand(id, jr, prefix)
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
		ats, errs := s.publishAll(c, convs)
		out := make([]jobCreated, len(convs))
		var failed []FieldError
		for i, conv := range convs {
			if errs[i] != nil {
				failed = append(failed, FieldError{Field: fmt.Sprintf("jobs[%d]", i), Reason: errs[i].Error()})
				continue
			}
			s.remember(conv, ats[i], now)
			out[i] = jobCreated{ID: conv.cmd.GetJobId(), Namespace: ns, State: "scheduled", NextFireAt: conv.next}
		}
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
	row, pending, err := s.knownJob(ns, id, s.now())
	if err != nil || pending {
		return row, pending, err
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
	at, err := s.cfg.Jobs.Publish(ctx, cmd)
	if err != nil {
		return unavailable("the command", err)
	}
	next := proto.Clone(row).(*chimev1.JobState)
	next.Status, next.UpdatedAt, next.LastCommandId = to, timestamppb.New(now), cmd.GetCommandId()
	if to == chimev1.JobStatus_JOB_STATUS_CANCELLED {
		next.NextScheduledAt, next.TimerAt = nil, nil
	}
	s.recent.put(cmd, at, next, now)
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

// backfillRequest is the body of POST .../jobs/{id}/backfill.
type backfillRequest struct {
	From *string `json:"from"`
	To   *string `json:"to"`
}

// backfillJob fires now the occurrences of the job's schedule in [from,
// to): checked here against the row (a recurring job, a past range, at
// most schema.MaxBackfill occurrences) so the client hears of a
// refusal at once; the scheduler checks again.
func (s *server) backfillJob(c *fiber.Ctx) error {
	ns, id := c.Params("ns"), c.Params("id")
	var req backfillRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrs
	if req.From == nil {
		fe.add("from", "is missing; a backfill covers [from, to)")
	}
	if req.To == nil {
		fe.add("to", "is missing; a backfill covers [from, to)")
	}
	from, to := fe.timestamp("", "from", req.From), fe.timestamp("", "to", req.To)
	if err := fe.problem(); err != nil {
		return err
	}
	now := s.now()
	switch {
	case !from.AsTime().Before(to.AsTime()):
		return invalidFields(FieldError{Field: "to", Reason: "is not after from; a backfill covers [from, to)"})
	case to.AsTime().After(now):
		return invalidFields(FieldError{Field: "to", Reason: fmt.Sprintf("%s is after now; a backfill fires past occurrences, the schedule fires those to come", *req.To)})
	}
	row, _, err := s.job(ns, id)
	if err != nil {
		return err
	}
	if st := row.GetStatus(); schema.JobEnded(st) {
		return problem(fiber.StatusConflict, "job-ended", "job %q is %s and cannot be backfilled; create it again", id, stateName(st))
	}
	plan, err := schedule.ForRow(row)
	if err != nil || !plan.Recurring() {
		return problem(fiber.StatusConflict, "not-recurring", "job %q is a one-shot; backfill fires the occurrences of a recurring schedule (trigger fires a one-shot now)", id)
	}
	occ := plan.Between(from.AsTime(), to.AsTime(), schema.MaxBackfill+1)
	switch {
	case len(occ) == 0:
		return invalidFields(FieldError{Field: "from", Reason: fmt.Sprintf("the job has no occurrence from %s to %s", *req.From, *req.To)})
	case len(occ) > schema.MaxBackfill:
		return invalidFields(FieldError{Field: "to", Reason: fmt.Sprintf("the range holds more than %d occurrences; backfill a shorter range at a time", schema.MaxBackfill)})
	}
	cmd := command.Backfill(ns, id, from.AsTime(), to.AsTime())
	command.Stamp(cmd, now)
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if _, err := s.cfg.Jobs.Publish(ctx, cmd); err != nil {
		return unavailable("the backfill", err)
	}
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"id": id, "namespace": ns, "command_id": cmd.GetCommandId(), "count": len(occ),
		"first": *fmtTime(timestamppb.New(occ[0])), "last": *fmtTime(timestamppb.New(occ[len(occ)-1]))})
}

// publishAll publishes the jobs of a batch create, a record per partition
// they fall on (command.Batches) when the partition count is known, and
// says each one's outcome: where Kafka acknowledged it, or why not.
func (s *server) publishAll(c *fiber.Ctx, convs []*converted) ([]producer.Receipt, []error) {
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	cmds := make([]*chimev1.JobCommand, len(convs))
	for i, conv := range convs {
		cmds[i] = conv.cmd
	}
	var (
		records []*chimev1.JobCommand
		index   [][]int
	)
	if n := s.cfg.Partitions; n > 0 {
		records, index = command.Batches(cmds, func(key string) int32 { return schema.PartitionOf(key, n) }, schema.MaxRecordBytes/2)
	} else {
		records, index = cmds, make([][]int, len(cmds))
		for i := range cmds {
			index[i] = []int{i}
		}
	}
	var wg sync.WaitGroup
	ats := make([]producer.Receipt, len(convs))
	errs := make([]error, len(convs))
	for r, rec := range records {
		wg.Add(1)
		s.cfg.Jobs.PublishAsync(ctx, rec, func(at producer.Receipt, err error) {
			for _, i := range index[r] {
				ats[i], errs[i] = at, err
			}
			wg.Done()
		})
	}
	wg.Wait()
	return ats, errs
}
