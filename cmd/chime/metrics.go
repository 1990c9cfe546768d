package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/schema"
)

// newRegistry is the process's metrics registry: every role of the process
// registers into it, and /metrics (the API's, or --metrics-addr) serves it.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves /metrics on addr until ctx is done (roles without
// the API).
func serveMetrics(ctx context.Context, e *env) error {
	if e.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", e.cfg.MetricsAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{}))
	// Profiles of the running process (go tool pprof
	// http://ADDR/debug/pprof/profile?seconds=30): the metrics address is
	// an operator's port, never the public API's.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	e.log.Info("metrics listening", "addr", ln.Addr().String())
	return serveHTTP(ctx, srv, ln)
}

// serveHTTP serves srv on ln until ctx is done, then shuts it down,
// letting requests in flight finish for up to 5 s.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// dispatcherCollector turns a dispatcher's counters into metrics when
// scraped.
type dispatcherCollector struct {
	d                                            *dispatcher.Dispatcher
	consumed, completed, calls, dups, held, prob *prometheus.Desc
	inFlight, outcomes, resent, early            *prometheus.Desc
}

func newDispatcherCollector(d *dispatcher.Dispatcher) *dispatcherCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("chime_dispatcher_"+name, help, labels, nil)
	}
	return &dispatcherCollector{
		d:         d,
		consumed:  desc("dues_consumed_total", "Due events consumed."),
		completed: desc("dues_completed_total", "Due events whose results Kafka acknowledged."),
		calls:     desc("calls_total", "HTTP calls made."),
		dups:      desc("duplicates_total", "Replayed due events skipped."),
		held:      desc("breaker_held_total", "Due events deferred because their namespace's breaker was open."),
		prob:      desc("probes_total", "Calls sent as half-open probes."),
		inFlight:  desc("dues_in_flight", "Due events consumed and not yet completed (waiting, calling, or publishing results)."),
		outcomes:  desc("outcomes_total", "Outcomes by class.", "class"),
		resent:    desc("resent_total", "Calls sent again on a new connection because the pooled one was closed before any answer (not charged as attempts)."),
		early:     desc("early_total", "Due events that arrived before their fire_at (the scheduler emits up to its fire lead early) and were held until then."),
	}
}

func (c *dispatcherCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.consumed, c.completed, c.calls, c.dups, c.held, c.prob, c.inFlight, c.outcomes, c.resent, c.early} {
		ch <- d
	}
}

func (c *dispatcherCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.consumed, s.Consumed)
	counter(c.completed, s.Completed)
	counter(c.calls, s.Calls)
	counter(c.dups, s.Duplicates)
	counter(c.held, s.Held)
	counter(c.prob, s.Probes)
	counter(c.resent, s.Resent)
	counter(c.early, s.Early)
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.Consumed-s.Completed))
	for class, n := range s.ByClass {
		ch <- prometheus.MustNewConstMetric(c.outcomes, prometheus.CounterValue, float64(n), schema.OutcomeClassName(class))
	}
}

// lagCollector reports consumer lag of chime's consumer groups, asked of
// the brokers when scraped.
type lagCollector struct {
	brokers []string
	groups  []string
	desc    *prometheus.Desc
}

func newLagCollector(brokers []string, groups ...string) *lagCollector {
	return &lagCollector{
		brokers: brokers,
		groups:  groups,
		desc: prometheus.NewDesc("chime_consumer_lag_records",
			"Records not yet consumed (and committed) by a consumer group, per topic partition.",
			[]string{"group", "topic", "partition"}, nil),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	cl, err := kgo.NewClient(append(kafkaauth.Current().Kgo(), kgo.SeedBrokers(c.brokers...))...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	lags, err := kadm.NewClient(cl).Lag(ctx, c.groups...)
	if err != nil {
		return
	}
	for group, gl := range lags {
		for topic, parts := range gl.Lag {
			for p, l := range parts {
				if l.Err != nil {
					continue
				}
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(l.Lag), group, topic, strconv.Itoa(int(p)))
			}
		}
	}
}
