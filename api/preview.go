package api

import (
	"errors"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// Limits of a preview's length.
const (
	DefaultPreviewCount = 10
	MaxPreviewCount     = 100
	// JobNextFires is how many upcoming fires GET .../jobs/{id} shows.
	JobNextFires = 5
)

// previewRequest is the body of POST /v1/schedules:preview.
type previewRequest struct {
	Schedule *scheduleJSON `json:"schedule"`
	// Count is how many fires to show (DefaultPreviewCount).
	Count *int `json:"count,omitempty"`
	// Namespace and ID name the job: each fire's jitter depends on them.
	Namespace string `json:"namespace,omitempty"`
	ID        string `json:"id,omitempty"`
	// From is when the job would be created (now): an every-schedule
	// without start_at counts from it, a cron one fires after it.
	From *string `json:"from,omitempty"`
	// MaxFires is the job's max_fires: the preview stops at it.
	MaxFires *uint32 `json:"max_fires,omitempty"`
}

// fireJSON is one upcoming fire.
type fireJSON struct {
	FireSeq     uint64 `json:"fire_seq"`
	ScheduledAt string `json:"scheduled_at"`
	// FireAt is when the call goes out: scheduled_at plus the job's jitter.
	FireAt string `json:"fire_at"`
}

type previewResponse struct {
	Fires []fireJSON `json:"fires"`
}

// previewSchedule answers the fires a schedule would make, without
// creating anything: the scheduler's own steps (schedule.Upcoming), so
// the times shown are the times fired while chime runs on time.
func (s *server) previewSchedule(c *fiber.Ctx) error {
	var req previewRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var fe fieldErrs
	from := s.now()
	if t := fe.timestamp("", "from", req.From); t != nil {
		from = t.AsTime()
	}
	count := DefaultPreviewCount
	if n := req.Count; n != nil {
		if *n < 1 || *n > MaxPreviewCount {
			fe.add("count", "is %d; ask for 1 to %d fires", *n, MaxPreviewCount)
		}
		count = *n
	}
	if req.Namespace != "" {
		if err := schema.ValidateNamespace(req.Namespace); err != nil {
			fe.add("namespace", "%s", validationReason(err))
		}
	}
	if req.ID != "" {
		if err := schema.ValidateJobID(req.ID); err != nil {
			fe.add("id", "%s", validationReason(err))
		}
	}
	if req.Schedule == nil {
		fe.add("schedule", "is missing; set exactly one of at, in, every, cron")
		return fe.problem()
	}
	sc, usedIn := scheduleToProto(&fe, "", req.Schedule, from)
	if len(fe) > 0 {
		return fe.problem()
	}
	plan, err := schedule.Compile(sc)
	if err != nil {
		field := "upsert.spec.schedule"
		var se *schedule.Error
		if errors.As(err, &se) && se.Field != "" {
			field += "." + se.Field
		}
		fe.add(jsonField(field, usedIn), "%s", scheduleReason(err))
		return fe.problem()
	}
	if plan.MaxJitter() > 0 && (req.Namespace == "" || req.ID == "") {
		fe.add("id", "the schedule has jitter, and each fire's jitter depends on its job: give namespace and id")
		return fe.problem()
	}
	if m := deref(req.MaxFires); m > 0 {
		count = min(count, int(m))
	}
	fires := plan.WithAnchor(from).Preview(schema.JobKey(req.Namespace, req.ID), from, count)
	return c.JSON(previewResponse{Fires: firesJSON(fires)})
}

func scheduleReason(err error) string {
	var se *schedule.Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return err.Error()
}

func firesJSON(fires []schedule.Fire) []fireJSON {
	out := make([]fireJSON, len(fires))
	for i, f := range fires {
		out[i] = fireJSON{FireSeq: f.Seq, ScheduledAt: *fmtTime(timestamppb.New(f.ScheduledAt)), FireAt: *fmtTime(timestamppb.New(f.FireAt))}
	}
	return out
}

// nextFires is a job's upcoming fires as its row stands: from its next
// occurrence, numbered after its last fire. Nil for a job that has ended
// or has no occurrence left.
func nextFires(key string, row *chimev1.JobState) []fireJSON {
	next := row.GetNextScheduledAt()
	if next == nil || schema.JobEnded(row.GetStatus()) {
		return nil
	}
	plan, err := schedule.ForRow(row)
	if err != nil {
		return nil
	}
	n := uint64(JobNextFires)
	if m := uint64(row.GetSpec().GetMaxFires()); m > 0 {
		n = min(n, m-min(m, row.GetScheduledFires()))
	}
	return firesJSON(plan.Upcoming(key, next.AsTime(), row.GetFireSeq(), int(n)))
}
