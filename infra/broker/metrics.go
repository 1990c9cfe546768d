package broker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics exports what the cleaner did to reg; nil exports
// nothing. Both say whether the broker keeps its memory and disk bounded
// (see Stream and DirtyRatio).
func (b *Broker) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chime_broker_trimmed_records_total",
			Help: "Records of the streams the embedded broker deleted once every reader had committed past them, or past their retention.",
		}, func() float64 { return float64(b.trimmed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chime_broker_compactions_total",
			Help: "Compaction passes over the table topics by the embedded broker (each a partition at a time).",
		}, func() float64 { return float64(b.compactions.Load()) }),
		b.holds,
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("broker metrics: %w", err)
		}
	}
	return nil
}
