package dispatcher

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// requireMetricsFollowStats checks that what the dispatcher registered in
// reg says what s says, series by series.
func requireMetricsFollowStats(t *testing.T, reg *prometheus.Registry, s Stats) {
	t.Helper()
	want := map[string]float64{
		"chime_dispatcher_dues_consumed_total":    float64(s.Consumed),
		"chime_dispatcher_dues_completed_total":   float64(s.Completed),
		"chime_dispatcher_dues_in_flight":         float64(s.Consumed - s.Completed),
		"chime_dispatcher_calls_total":            float64(s.Calls),
		"chime_dispatcher_duplicates_total":       float64(s.Duplicates),
		"chime_dispatcher_breaker_held_total":     float64(s.Held),
		"chime_dispatcher_probes_total":           float64(s.Probes),
		"chime_dispatcher_resent_total":           float64(s.Resent),
		"chime_dispatcher_early_total":            float64(s.Early),
		"chime_dispatcher_recalls_total":          float64(s.Recalls),
		"chime_dispatcher_recalled_dropped_total": float64(s.Dropped),
	}
	for c := range chimev1.OutcomeClass_name {
		if class := chimev1.OutcomeClass(c); class != chimev1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED {
			want["chime_dispatcher_outcomes_total{class="+schema.OutcomeClassName(class)+"}"] = float64(s.ByClass[class])
		}
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	require.Equal(t, want, got)
}
