package dispatcher

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// registerMetrics exports the dispatcher's counters (Stats) to reg; nil
// exports nothing. They are read when scraped, so the hot path only adds
// to atomics.
func (d *Dispatcher) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chime_dispatcher_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	cs := []prometheus.Collector{
		counter("dues_consumed_total", "Due events consumed.", &d.stats.consumed),
		counter("dues_completed_total", "Due events whose results Kafka acknowledged.", &d.stats.completed),
		counter("calls_total", "HTTP calls made.", &d.stats.calls),
		counter("duplicates_total", "Replayed due events skipped.", &d.stats.duplicates),
		counter("breaker_held_total", "Due events deferred because their namespace's breaker was open.", &d.stats.held),
		counter("probes_total", "Calls sent as half-open probes.", &d.stats.probes),
		counter("resent_total", "Calls sent again on a new connection because the pooled one was closed before any answer (not charged as attempts).", &d.stats.resent),
		counter("early_total", "Due events that arrived before their fire_at (the scheduler emits up to its fire lead early) and were held until then.", &d.stats.early),
		counter("recalls_total", "Recalls received: due events the scheduler took back because a cancel, pause or update came before their time.", &d.stats.recalls),
		counter("recalled_dropped_total", "Due events dropped because they were recalled before their call.", &d.stats.dropped),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_dispatcher_dues_in_flight",
			Help: "Due events consumed and not yet completed (waiting, calling, or publishing results).",
		}, func() float64 {
			// Completed first: a due is consumed before it completes, so
			// the difference read this way is never negative.
			completed := d.stats.completed.Load()
			return float64(d.stats.consumed.Load() - completed)
		}),
	}
	// One series per class, there from the start (at 0), so a rate over
	// a class that has not happened yet is 0, not absent.
	for class := range d.stats.byClass {
		if chimev1.OutcomeClass(class) == chimev1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED {
			continue
		}
		v := &d.stats.byClass[class]
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "chime_dispatcher_outcomes_total",
			Help:        "Outcomes by class.",
			ConstLabels: prometheus.Labels{"class": schema.OutcomeClassName(chimev1.OutcomeClass(class))},
		}, func() float64 { return float64(v.Load()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("dispatcher metrics: %w", err)
		}
	}
	return nil
}
