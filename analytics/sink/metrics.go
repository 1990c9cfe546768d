package sink

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exports the sink's counters (Stats) to reg; nil exports
// nothing. They are read when scraped.
func (s *Sink) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chime_sink_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	for _, c := range []prometheus.Collector{
		counter("rows_total", "Rows inserted into ClickHouse (attempts, breaker transitions, job events, dead letters).", &s.rows),
		counter("batches_total", "Batches stored: each is one insert per table and day, committed to Kafka after it.", &s.batches),
		counter("skipped_total", "Records passed over because ClickHouse already holds them (a batch replayed after a restart or a partition move).", &s.skipped),
		counter("bad_records_total", "Records that did not decode (or make a row) and were passed over; each is logged.", &s.bad),
		counter("retries_total", "ClickHouse calls retried while the server was unavailable (the sink reads nothing more meanwhile).", &s.retries),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("sink metrics: %w", err)
		}
	}
	return nil
}
