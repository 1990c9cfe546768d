package api

import (
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

type metrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	jobsAccepted prometheus.Counter
	replays      prometheus.Counter
	liveReads    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_api_requests_total",
			Help: "HTTP requests answered by the API, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chime_api_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		jobsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_api_jobs_accepted_total",
			Help: "Job upserts published to Kafka and answered 201 (batches count each job).",
		}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_api_idempotent_replays_total",
			Help: "Requests answered from the Idempotency-Key store instead of publishing again.",
		}),
		liveReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_api_live_count_reads_total",
			Help: "Reads of a namespace's live-job count for the pending-jobs quota, made in the background, by result (ok, failed).",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "failed"} {
		m.liveReads.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.jobsAccepted, m.replays, m.liveReads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// liveCountRead counts a read of the pending-jobs quota's count.
func (m *metrics) liveCountRead(ok bool) {
	if ok {
		m.liveReads.WithLabelValues("ok").Inc()
	} else {
		m.liveReads.WithLabelValues("failed").Inc()
	}
}

// middleware counts every request by its route pattern (not the raw path,
// which would make one series per job).
func (m *metrics) middleware(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		// The error handler has not run yet; predict its status.
		status = fiber.StatusInternalServerError
		switch e := err.(type) {
		case *Problem:
			status = e.Status
		case *fiber.Error:
			status = e.Code
		}
	}
	route := c.Route().Path
	if status == fiber.StatusNotFound && route == "/" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(c.Method(), route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(c.Method(), route).Observe(time.Since(start).Seconds())
	return err
}

// registerState exports what the process holds besides requests.
func (s *server) registerState(reg prometheus.Registerer) error {
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_api_ready",
		Help: "1 while the API is ready (GET /readyz): the namespace and breaker views it reads have caught up with their tables and no scheduler refuses its query secret; else 0.",
	}, func() float64 {
		if s.cfg.Ready != nil && s.cfg.Ready() != nil {
			return 0
		}
		return 1
	})
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_api_idempotency_keys",
		Help: "Idempotency-Keys remembered by this process.",
	}, func() float64 { return float64(s.idem.len()) })
	recent := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chime_api_recent_jobs",
		Help: "Job commands remembered for read-your-writes until the jobs table shows them.",
	}, func() float64 { return float64(s.recent.len()) })
	for _, c := range []prometheus.Collector{ready, keys, recent} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// NamespaceLabel labels the series of one namespace (chime_breaker_state in
// a process that runs the breaker). Namespace names are the admin's to list
// (GET /v1/namespaces), so the API's /metrics serves those series to the
// admin token only; without a token it serves every other series, for a
// Prometheus that holds no credential. --metrics-addr, an operator's port
// like its profiles, serves them all.
const NamespaceLabel = "namespace"

// publicMetrics answers GET /metrics without an Authorization header, leaving
// out the per-namespace series; with one, the request goes on to
// authenticate (only the admin token passes: the route names no namespace)
// and then to the full handler. A token that is not the admin token is
// refused rather than quietly given less, so a misconfigured scraper shows.
func (s *server) publicMetrics() fiber.Handler {
	h := adaptor.HTTPHandler(promhttp.HandlerFor(withoutLabel(s.cfg.Gatherer, NamespaceLabel), promhttp.HandlerOpts{}))
	return func(c *fiber.Ctx) error {
		if c.Get(fiber.HeaderAuthorization) != "" {
			return c.Next()
		}
		return h(c)
	}
}

func (s *server) metricsHandler() fiber.Handler {
	return adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
}

// withoutLabel gathers from g and drops the series that carry label, and
// the families left empty.
func withoutLabel(g prometheus.Gatherer, label string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			kept := mf.Metric[:0]
			for _, m := range mf.Metric {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label }) {
					kept = append(kept, m)
				}
			}
			if mf.Metric = kept; len(kept) > 0 {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
