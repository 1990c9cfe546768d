// The JSON bodies of the jobs routes, as docs/api.md and openapi.json
// describe them.

package api

import (
	"github.com/go-json-experiment/json/jsontext"
)

// jobRequest is the body of POST .../jobs and one item of a batch.
type jobRequest struct {
	ID              string            `json:"id,omitempty"`
	Schedule        *scheduleJSON     `json:"schedule"`
	Callback        *callbackJSON     `json:"callback"`
	Retry           *retryJSON        `json:"retry,omitempty"`
	RelevancyWindow *string           `json:"relevancy_window,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	// MaxFires ends the job once its schedule has fired this many times.
	MaxFires *uint32 `json:"max_fires,omitempty"`
	// PauseOnFailure pauses a recurring job when a fire dead-letters.
	PauseOnFailure *bool `json:"pause_on_failure,omitempty"`
	// Overlap is the overlap policy: allow_all (default), skip,
	// buffer_one or cancel_other.
	Overlap *string `json:"overlap,omitempty"`
	// Catchup is the catch-up policy: latest (default), none or all;
	// CatchupWindow how late an occurrence may fire under none or all.
	Catchup       *string `json:"catchup,omitempty"`
	CatchupWindow *string `json:"catchup_window,omitempty"`
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
	// Exclude are the times with no occurrence: days, or cron windows.
	Exclude []exclusionJSON `json:"exclude,omitempty"`
}

// exclusionJSON: a date ("2026-12-25"), or a window opening at each
// occurrence of cron and lasting duration; in timezone (default: the
// schedule's cron timezone, else UTC).
type exclusionJSON struct {
	Date     string  `json:"date,omitempty"`
	Cron     string  `json:"cron,omitempty"`
	Duration *string `json:"duration,omitempty"`
	Timezone string  `json:"timezone,omitempty"`
}

// callbackJSON.Body is sent as is: a JSON string is sent as its text, any
// other JSON value as its JSON.
type callbackJSON struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// A jsontext.Value, not a json.RawMessage: JSON v2 (decode.go) reads
	// it natively instead of through the legacy UnmarshalJSON method,
	// which was a quarter of a batch's decode; encoding/json reads both
	// the same way.
	Body    jsontext.Value `json:"body,omitempty"`
	Timeout *string        `json:"timeout,omitempty"`
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
	ID         string  `json:"id"`
	Namespace  string  `json:"namespace"`
	State      string  `json:"state,omitempty"` // unset only in a repeated replay's answer once its job was removed
	NextFireAt *string `json:"next_fire_at"`
	// NextFires are the next few fires as the row stands (JobNextFires),
	// with their jitter; none for a job that has ended.
	NextFires   []fireJSON        `json:"next_fires,omitempty"`
	Schedule    *scheduleJSON     `json:"schedule,omitempty"`
	Callback    *callbackOut      `json:"callback,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	MaxFires    uint32            `json:"max_fires,omitempty"`
	PauseOnFail bool              `json:"pause_on_failure,omitempty"`
	Overlap     string            `json:"overlap,omitempty"`
	Catchup     string            `json:"catchup,omitempty"`
	CatchupWin  *string           `json:"catchup_window,omitempty"`
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
