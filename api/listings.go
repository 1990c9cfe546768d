package api

import (
	"encoding/base64"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Page sizes of the listings.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// pageSize reads ?limit=.
func pageSize(c *fiber.Ctx) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, invalidFields(FieldError{Field: "limit", Reason: "must be a whole number from 1 to " + strconv.Itoa(MaxPageSize)})
	}
	return n, nil
}

func badCursor() error {
	return invalidFields(FieldError{Field: "cursor", Reason: "is not a next_cursor this API returned; start again without it"})
}

// jobStates maps ?state= names to statuses.
var jobStates = func() map[string]chimev1.JobStatus {
	m := map[string]chimev1.JobStatus{}
	for v := range chimev1.JobStatus_name {
		if st := chimev1.JobStatus(v); st != chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
			m[schema.JobStatusName(st)] = st
		}
	}
	return m
}()

type jobList struct {
	Jobs       []jobResponse `json:"jobs"`
	NextCursor string        `json:"next_cursor"`
}

// listJobs answers GET /v1/namespaces/{ns}/jobs: the namespace's jobs
// from the jobs table's listing index, newest first, optionally only those
// in the given states (comma-separated) and only those with every
// ?label=key:value given (the store's label index), showing every job command this
// process published for the namespace. chime's own jobs in the namespace
// (the breaker's cool-off timer) are listed only with ?internal=true, for
// the admin token: they are not the client's, and it could only stare at
// them (their ids are refused on every other route).
func (s *server) listJobs(c *fiber.Ctx) error {
	ns := c.Params("ns")
	limit, err := pageSize(c)
	if err != nil {
		return err
	}
	q := jobindex.Query{Limit: limit}
	if q.After, err = jobindex.ParseCursor(c.Query("cursor")); err != nil {
		return badCursor()
	}
	if v := c.Query("state"); v != "" {
		for _, name := range strings.Split(v, ",") {
			st, ok := jobStates[strings.TrimSpace(name)]
			if !ok {
				names := slices.Sorted(maps.Keys(jobStates))
				return invalidFields(FieldError{Field: "state", Reason: "has " + strconv.Quote(name) + "; the states are " + strings.Join(names, ", ")})
			}
			q.Statuses = append(q.Statuses, st)
		}
	}
	if q.Labels, err = labelParams(c); err != nil {
		return err
	}
	if q.Internal, err = internalParam(c); err != nil {
		return err
	}
	jobs, more, err := s.cfg.JobStates.ListJobs(ns, q, s.published.offsets(ns))
	if err != nil {
		return err
	}
	out := jobList{Jobs: make([]jobResponse, 0, len(jobs))}
	for _, j := range jobs {
		if j.Row == nil {
			continue // removed since the index was read
		}
		out.Jobs = append(out.Jobs, renderJob(ns, j.ID, j.Row, false))
	}
	if more && len(jobs) > 0 {
		out.NextCursor = jobindex.CursorAt(jobs[len(jobs)-1].Entry).String()
	}
	return c.JSON(out)
}

// labelParams reads ?label=key:value, repeated: a job is listed when it
// has every one.
func labelParams(c *fiber.Ctx) ([]schema.Label, error) {
	raw := c.Context().QueryArgs().PeekMulti("label")
	if len(raw) > schema.MaxLabels {
		return nil, invalidFields(FieldError{Field: "label", Reason: "is given " + strconv.Itoa(len(raw)) + " times; a job has at most " + strconv.Itoa(schema.MaxLabels) + " labels"})
	}
	var out []schema.Label
	for _, b := range raw {
		l, err := schema.ParseLabel(string(b))
		if err != nil {
			return nil, invalidFields(FieldError{Field: "label", Reason: err.Error() + "; give key:value, e.g. label=team:billing"})
		}
		out = append(out, l)
	}
	return out, nil
}

// internalParam reads ?internal=: whether to list chime's own jobs too,
// which only the admin token may.
func internalParam(c *fiber.Ctx) (bool, error) {
	v := c.Query("internal")
	if v == "" {
		return false, nil
	}
	internal, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalidFields(FieldError{Field: "internal", Reason: "has " + strconv.Quote(v) + "; it is true or false"})
	}
	if p, _ := c.Locals(principalKey).(principal); internal && !p.admin {
		return false, problem(fiber.StatusForbidden, "forbidden", "internal=true lists chime's own jobs (ids starting with %q), which needs the admin token; namespace keys see the namespace's jobs without it", schema.ReservedJobIDPrefix)
	}
	return internal, nil
}

type namespaceItem struct {
	namespaceResponse
	BreakerState string `json:"breaker_state"`
}

type namespaceList struct {
	Namespaces []namespaceItem `json:"namespaces"`
	NextCursor string          `json:"next_cursor"`
}

// listNamespaces answers GET /v1/namespaces (admin): the namespaces by
// name (a namespace carries no creation time to order by), each with its
// configuration and its breaker's state.
func (s *server) listNamespaces(c *fiber.Ctx) error {
	limit, err := pageSize(c)
	if err != nil {
		return err
	}
	after := ""
	if v := c.Query("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || schema.ValidateNamespace(string(b)) != nil {
			return badCursor()
		}
		after = string(b)
	}
	names, err := s.cfg.Namespaces.Names()
	if err != nil {
		return viewUnavailable("namespace", err)
	}
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	out := namespaceList{Namespaces: []namespaceItem{}}
	for ; i < len(names) && len(out.Namespaces) < limit; i++ {
		cfg, err := s.cfg.Namespaces.Get(names[i])
		if err != nil {
			return err
		}
		if cfg == nil {
			continue
		}
		out.Namespaces = append(out.Namespaces, namespaceItem{namespaceResponse: renderNamespace(names[i], cfg), BreakerState: breakerStateName(s.cfg.Breakers.Get(names[i]).GetState())})
	}
	if i < len(names) && len(out.Namespaces) > 0 {
		out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(out.Namespaces[len(out.Namespaces)-1].Namespace))
	}
	return c.JSON(out)
}
