package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/views"
)

// benchAPI measures job creation over HTTP: the API (one process, on the
// embedded broker, with the namespace processor behind it) answering
// POST .../jobs from concurrent keep-alive clients, each job one request
// authenticated by a namespace key; then POST .../jobs:batch with 1000 jobs
// per request. A 201 means Kafka acknowledged the command; the scheduler
// is not running, so this is the API and the produce path alone.
func benchAPI(ctx context.Context, log *slog.Logger, creates int, partitions int32) []result {
	bb := startBroker("api")
	defer bb.close()
	brokers := bb.Brokers
	tp := schema.NewTopics("bench.")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close()
	provision(ctx, cl, tp, partitions)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nsView, err := views.NewNamespaces(processors.Client{Brokers: brokers, ClientID: "bench-api-namespaces", Logger: log}, tp)
	if err != nil {
		fail("%v", err)
	}
	brkView, err := views.NewBreakers(processors.Client{Brokers: brokers, ClientID: "bench-api-breakers", Logger: log}, tp)
	if err != nil {
		fail("%v", err)
	}
	// No scheduler runs: job reads (the pending-jobs quota, read-your-writes)
	// find no owner, and the pending quota is off so creates do not need it.
	be, err := api.NewBackend(api.BackendConfig{Brokers: brokers, Topics: tp, Logger: log, Partitions: partitions, QuerySecret: "bench-query-secret-0123456789",
		Namespaces: nsView, Breakers: brkView})
	if err != nil {
		fail("api backend: %v", err)
	}
	defer be.Close()
	const admin = "bench-admin-token-0123456789"
	cfg := be.Config()
	cfg.AdminToken, cfg.Logger, cfg.ConsistencyWait = admin, log, 60*time.Second
	cfg.Quotas.PendingJobs = -1
	app, err := api.New(cfg)
	if err != nil {
		fail("api: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("%v", err)
	}
	nsp, err := namespaces.New(namespaces.Config{Config: processors.Config{Client: processors.Client{Brokers: brokers, Logger: log}, Topics: tp}})
	if err != nil {
		fail("namespaces: %v", err)
	}
	stop := startParts(ctx, nsp, nsView, brkView, api.Listen(app, ln))
	defer stop()
	base := "http://" + ln.Addr().String() + "/v1/namespaces/bench"
	const clients = 64
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 60 * time.Second}
	call := func(method, url, token string, body []byte) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			fail("%v", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			fail("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out
	}
	if st, out := call("PUT", base, admin, []byte(`{}`)); st >= 300 {
		fail("namespace: %d %s", st, out)
	}
	st, out := call("POST", base+"/keys", admin, nil)
	var key struct{ Key string }
	if st != 201 || json.Unmarshal(out, &key) != nil {
		fail("key: %d %s", st, out)
	}

	job := []byte(`{"schedule": {"in": "1h"}, "callback": {"url": "https://example.com/hook"}}`)
	fmt.Fprintf(os.Stderr, "api: %d single creates from %d clients...\n", creates, clients)
	lat := make([]time.Duration, creates)
	var next atomic.Int64
	start := time.Now()
	var cwg sync.WaitGroup
	for range clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := int(next.Add(1)) - 1; i < creates; i = int(next.Add(1)) - 1 {
				t0 := time.Now()
				if st, out := call("POST", base+"/jobs", key.Key, job); st != 201 {
					fail("create: %d %s", st, out)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	cwg.Wait()
	single := float64(creates) / time.Since(start).Seconds()
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]

	const batchSize, batches, batchClients = 1000, 100, 8
	var buf bytes.Buffer
	buf.WriteString(`{"jobs": [`)
	for i := range batchSize {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(job)
	}
	buf.WriteString(`]}`)
	batch := buf.Bytes()
	fmt.Fprintf(os.Stderr, "api: %d batches of %d from %d clients...\n", batches, batchSize, batchClients)
	next.Store(0)
	start = time.Now()
	for range batchClients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for next.Add(1) <= batches {
				if st, out := call("POST", base+"/jobs:batch", key.Key, batch); st != 201 {
					fail("batch: %d %.300s", st, out)
				}
			}
		}()
	}
	cwg.Wait()
	batched := float64(batches*batchSize) / time.Since(start).Seconds()
	return []result{
		{"API creates/s, single (POST .../jobs, 64 clients)", fmt.Sprintf("%.0f", single), "≥ 5000", verdict(single >= 5000)},
		{"API create latency p50 / p99", fmt.Sprintf("%s / %s", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond)), "—", "—"},
		{"API jobs/s, batched (1000 per request, 8 clients)", fmt.Sprintf("%.0f", batched), "≥ 50000", verdict(batched >= 50000)},
	}
}
