package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// ProblemTypeBase prefixes every problem type URI; the suffix names the
// kind of problem, documented in docs/api.md.
const ProblemTypeBase = "https://chime.dev/problems/"

// Problem is an RFC 9457 problem details object: every error the API
// answers is one, with Content-Type application/problem+json.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
	// retryAfter, if set, goes out as Retry-After (whole seconds).
	retryAfter time.Duration
}

// FieldError says which field of the request is wrong: a JSON path into
// the body ("schedule.cron", "jobs[3].callback.url") or, for path and
// header parameters, their name.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Detail
	}
	return p.Title
}

// problem builds a Problem of the given kind; kind is the suffix of its type
// URI ("validation", "unauthorized").
func problem(status int, kind, format string, args ...any) *Problem {
	return &Problem{
		Type:   ProblemTypeBase + kind,
		Title:  http.StatusText(status),
		Status: status,
		Detail: fmt.Sprintf(format, args...),
	}
}

// invalidFields is a 422 naming the offending fields.
func invalidFields(errs ...FieldError) *Problem {
	p := problem(fiber.StatusUnprocessableEntity, "validation", "%s", describe(errs))
	p.Title = "Request is invalid"
	p.Errors = errs
	return p
}

// badRequest is a 400 for a body that is not the expected JSON.
func badRequest(field, format string, args ...any) *Problem {
	p := problem(fiber.StatusBadRequest, "malformed-request", format, args...)
	p.Title = "Request body is malformed"
	if field != "" {
		p.Errors = []FieldError{{Field: field, Reason: p.Detail}}
	}
	return p
}

func describe(errs []FieldError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Field == "" {
			parts = append(parts, e.Reason)
			continue
		}
		parts = append(parts, e.Field+": "+e.Reason)
	}
	return strings.Join(parts, "; ")
}

// errorHandler turns every error a handler or middleware returns, and the
// ones fasthttp raises before routing (body too large), into a problem.
func (s *server) errorHandler(c *fiber.Ctx, err error) error {
	var p *Problem
	var fe *fiber.Error
	switch {
	case errors.As(err, &p):
	case errors.As(err, &fe):
		p = fiberProblem(fe)
	default:
		s.log.Error("api: request failed", "method", c.Method(), "path", c.Path(), "err", err)
		p = problem(fiber.StatusInternalServerError, "internal", "the request failed on chime's side; it is safe to retry")
	}
	out := *p
	if out.Instance == "" {
		out.Instance = c.OriginalURL()
	}
	c.Status(out.Status)
	if out.retryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(out.retryAfter)))
	}
	c.Set(fiber.HeaderContentType, "application/problem+json")
	return c.JSON(&out, "application/problem+json")
}

func fiberProblem(fe *fiber.Error) *Problem {
	switch fe.Code {
	case fiber.StatusRequestEntityTooLarge:
		return problem(fe.Code, "body-too-large", "the request body is larger than the limit of %d bytes; send fewer jobs per batch or smaller callback bodies", MaxBodyBytes)
	case fiber.StatusNotFound:
		return problem(fe.Code, "not-found", "no route matches this method and path; GET /openapi.json lists them")
	case fiber.StatusMethodNotAllowed:
		return problem(fe.Code, "method-not-allowed", "this path does not support the method; GET /openapi.json lists what it does")
	}
	kind := strings.ToLower(strings.ReplaceAll(http.StatusText(fe.Code), " ", "-"))
	if kind == "" {
		kind = "error"
	}
	return problem(fe.Code, kind, "%s", fe.Message)
}
