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

// OverlapPolicyName names an overlap policy ("skip", "buffer_one", ...);
// the unset value is the default, "allow_all".
func OverlapPolicyName(o chimev1.OverlapPolicy) string {
	if o == chimev1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED {
		o = chimev1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	}
	return enumName(o.String(), "OVERLAP_POLICY_")
}

// CatchupPolicyName names a catch-up policy ("none", "all", ...); the
// unset value is the default, "latest".
func CatchupPolicyName(c chimev1.CatchupPolicy) string {
	if c == chimev1.CatchupPolicy_CATCHUP_POLICY_UNSPECIFIED {
		c = chimev1.CatchupPolicy_CATCHUP_POLICY_LATEST
	}
	return enumName(c.String(), "CATCHUP_POLICY_")
}

// EnumValue is the value named name (as the functions above name them)
// among an enum's protobuf names (its _value map), prefix its type's
// prefix; false for an unknown name and for the unset value.
func EnumValue(values map[string]int32, prefix, name string) (int32, bool) {
	if name != strings.ToLower(name) || name == "unspecified" {
		return 0, false
	}
	v, ok := values[prefix+strings.ToUpper(name)]
	return v, ok
}

func enumName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }
