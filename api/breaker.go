package api

import (
	"context"
	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

type breakerResponse struct {
	Namespace        string            `json:"namespace"`
	State            string            `json:"state"`
	Since            *string           `json:"since"`
	NextCheckAt      *string           `json:"next_check_at"`
	ConsecutiveTrips uint32            `json:"consecutive_trips"`
	Reason           string            `json:"reason,omitempty"`
	Window           breakerWindowJSON `json:"window"`
}

type breakerWindowJSON struct {
	Requests     uint64  `json:"requests"`
	Failures     uint64  `json:"failures"`
	SlowCalls    uint64  `json:"slow_calls"`
	FailureRate  float64 `json:"failure_rate"`
	SlowCallRate float64 `json:"slow_call_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
}

type breakerModeRequest struct {
	Mode string `json:"mode"`
	// Note goes into the transition's reason ("ticket OPS-123").
	Note string `json:"note,omitempty"`
}

type breakerResetRequest struct {
	Note string `json:"note,omitempty"`
}

func breakerStateName(st chimev1.BreakerState) string {
	if st == chimev1.BreakerState_BREAKER_STATE_UNSPECIFIED {
		return "closed"
	}
	return schema.BreakerStateName(st)
}

func renderBreaker(ns string, st *chimev1.BreakerStatus) breakerResponse {
	w := st.GetWindow()
	return breakerResponse{
		Namespace:        ns,
		State:            breakerStateName(st.GetState()),
		Since:            fmtTime(st.GetSince()),
		NextCheckAt:      fmtTime(st.GetNextCheckAt()),
		ConsecutiveTrips: st.GetConsecutiveTrips(),
		Reason:           st.GetReason(),
		Window: breakerWindowJSON{
			Requests:     w.GetRequests(),
			Failures:     w.GetFailures(),
			SlowCalls:    w.GetSlowCalls(),
			FailureRate:  w.GetFailureRate(),
			SlowCallRate: w.GetSlowCallRate(),
			P50Ms:        w.GetP50Ms(),
			P99Ms:        w.GetP99Ms(),
		},
	}
}

func (s *server) getBreaker(c *fiber.Ctx) error {
	ns := c.Params("ns")
	return c.JSON(renderBreaker(ns, s.cfg.Breakers.Get(ns)))
}

func (s *server) putBreaker(c *fiber.Ctx) error {
	var req breakerModeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ns := c.Params("ns")
	var cmd *chimev1.BreakerCommand
	switch req.Mode {
	case "auto":
		cmd = command.Auto(ns, req.Note)
	case "force_open":
		cmd = command.ForceOpen(ns, req.Note)
	case "force_closed":
		cmd = command.ForceClosed(ns, req.Note)
	case "":
		return invalidFields(FieldError{Field: "mode", Reason: `is missing; set "auto", "force_open" or "force_closed"`})
	default:
		return invalidFields(FieldError{Field: "mode", Reason: `"` + req.Mode + `" is not a mode; use "auto", "force_open" or "force_closed"`})
	}
	return s.publishBreaker(c, cmd)
}

func (s *server) resetBreaker(c *fiber.Ctx) error {
	var req breakerResetRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	return s.publishBreaker(c, command.ResetBreaker(c.Params("ns"), req.Note))
}

// publishBreaker sends an operator command; the breaker applies it on its
// own time, so the answer is 202 with the command id and the state now.
func (s *server) publishBreaker(c *fiber.Ctx, cmd *chimev1.BreakerCommand) error {
	ns := cmd.GetNamespace()
	command.Stamp(cmd, s.now())
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if err := s.cfg.Control.PublishBreaker(ctx, cmd); err != nil {
		return unavailable("the breaker command", err)
	}
	// The breaker applies it within its lag: answer the state it led to
	// (200), or, if the table has not shown it within ConsistencyWait, the
	// state now with 202 and where to look again.
	if st, ok := s.waitBreaker(c.UserContext(), ns, cmd.GetCommandId()); ok {
		return c.JSON(fiber.Map{"command_id": cmd.GetCommandId(), "applied": true, "breaker": renderBreaker(ns, st)})
	}
	c.Location("/v1/namespaces/" + ns + "/breaker")
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{
		"command_id": cmd.GetCommandId(),
		"applied":    false,
		"breaker":    renderBreaker(ns, s.cfg.Breakers.Get(ns)),
	})
}

// waitBreaker polls the breaker view until it shows command id applied, or
// ConsistencyWait passes.
func (s *server) waitBreaker(ctx context.Context, ns, commandID string) (*chimev1.BreakerStatus, bool) {
	return pollView(ctx, s.cfg.ConsistencyWait, func() (*chimev1.BreakerStatus, bool) {
		st := s.cfg.Breakers.Get(ns)
		return st, st.GetLastCommandId() == commandID
	})
}
