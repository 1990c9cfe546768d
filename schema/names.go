package schema

import (
	"strings"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Outside protobuf (API JSON, metric labels, ClickHouse columns) an enum
// value is named by its protobuf name without the type's prefix, in lower
// case: OUTCOME_CLASS_SUCCESS is "success", BREAKER_STATE_HALF_OPEN is
// "half_open".

// OutcomeClassName names an outcome class ("success", "retryable", ...).
func OutcomeClassName(c chimev1.OutcomeClass) string { return enumName(c.String(), "OUTCOME_CLASS_") }

// BreakerStateName names a breaker state ("closed", "half_open", ...).
func BreakerStateName(s chimev1.BreakerState) string { return enumName(s.String(), "BREAKER_STATE_") }

// JobStatusName names a job status ("scheduled", "completed", ...).
func JobStatusName(s chimev1.JobStatus) string { return enumName(s.String(), "JOB_STATUS_") }

// JobEventTypeName names a job event type ("created", "retry_scheduled", ...).
func JobEventTypeName(t chimev1.JobEventType) string { return enumName(t.String(), "JOB_EVENT_TYPE_") }

func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }
