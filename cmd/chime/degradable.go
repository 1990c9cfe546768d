package main

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chime-sched/chime/internal/lifecycle"
)

// degradable makes the part build makes a degradable part of the process
// (lifecycle.Supervise): analytics, which every other part works without.
// When it fails, the others run on and a new one is built and started
// after a back-off; essential says whether a permanent failure stops the
// process (where the part is what the process is for, `chime sink`). Each
// incarnation is given the process's metrics registry (it replaces the
// metrics of the one before), and the part's readiness and restarts are
// exported as chime_part_ready and chime_part_restarts_total.
// docs/operations.md lists which parts are degradable.
func (e *env) degradable(name string, essential bool, build func(prometheus.Registerer) (lifecycle.Part, error)) lifecycle.Part {
	metrics := &incarnations{reg: e.registry}
	s := lifecycle.Supervise(name, lifecycle.Supervision{
		Build:     func() (lifecycle.Part, error) { return build(metrics.next()) },
		Essential: essential,
		Logger:    e.log,
	})
	part := prometheus.Labels{"part": name}
	e.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "chime_part_ready",
			Help:        "1 while a degradable part of the process (the local ClickHouse, the analytics sink) runs and is ready, else 0: failed and waiting to be restarted, or down for good.",
			ConstLabels: part,
		}, func() float64 {
			if s.Ready() != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "chime_part_restarts_total",
			Help:        "Restarts of a degradable part of the process after it failed.",
			ConstLabels: part,
		}, func() float64 { return float64(s.Restarts()) }),
	)
	return s
}

// incarnations hands each incarnation of a supervised part the process's
// registry, after unregistering what the one before registered there: the
// new one's metrics take the place of the old's (its counters start again
// from 0, which Prometheus reads as a counter reset).
type incarnations struct {
	reg  prometheus.Registerer
	mu   sync.Mutex
	last []prometheus.Collector
}

func (i *incarnations) next() prometheus.Registerer {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, c := range i.last {
		i.reg.Unregister(c)
	}
	i.last = nil
	return incarnation{i}
}

// incarnation is the registry as one incarnation sees it: what it
// registers is remembered for the next.
type incarnation struct{ i *incarnations }

func (r incarnation) Register(c prometheus.Collector) error {
	if err := r.i.reg.Register(c); err != nil {
		return err
	}
	r.i.mu.Lock()
	defer r.i.mu.Unlock()
	r.i.last = append(r.i.last, c)
	return nil
}

func (r incarnation) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r incarnation) Unregister(c prometheus.Collector) bool { return r.i.reg.Unregister(c) }
