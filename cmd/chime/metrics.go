package main

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/lifecycle"
)

// newRegistry is the process's metrics registry: every role of the process
// is given it as its Config.Registerer and registers its own metrics there,
// and /metrics (the API's, or --metrics-addr) serves it. This file adds
// only what belongs to the process: Go's runtime, the process, and the
// consumer lag of chime's groups.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// newMetricsServer listens on --metrics-addr (roles without the API) and
// returns the part that serves /metrics there; nil when no address is
// set.
func newMetricsServer(e *env) (lifecycle.Part, error) {
	if e.cfg.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", e.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s (--metrics-addr, CHIME_METRICS_ADDR): %w", e.cfg.MetricsAddr, err)
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
	return lifecycle.Func("metrics server", func(ctx context.Context, ready func()) error {
		ready() // ln is open: requests wait in its backlog until Serve takes them
		return serveHTTP(ctx, srv, ln)
	}), nil
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

// lagCollector reports consumer lag of chime's consumer groups, asked of
// the brokers when scraped.
type lagCollector struct {
	brokers []string
	sasl    kafkaauth.Credential
	groups  []string
	desc    *prometheus.Desc
}

func newLagCollector(brokers []string, sasl kafkaauth.Credential, groups ...string) *lagCollector {
	return &lagCollector{
		brokers: brokers,
		sasl:    sasl,
		groups:  groups,
		desc: prometheus.NewDesc("chime_consumer_lag_records",
			"Records not yet consumed (and committed) by a consumer group, per topic partition.",
			[]string{"group", "topic", "partition"}, nil),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	cl, err := kgo.NewClient(append(c.sasl.Kgo(), kgo.SeedBrokers(c.brokers...))...)
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
