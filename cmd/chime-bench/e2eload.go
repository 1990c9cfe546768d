package main

// Load for chime dev: the bench namespace, and jobs created through the
// API's batch endpoint or published with the producer SDK, each calling
// the receiver with a body that names it.

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
)

// jobBody is the callback body of job i: what the receiver reads.
func jobBody(i int, at time.Time) string {
	return `{"id":` + strconv.Itoa(i) + `,"scheduled_at":"` + at.UTC().Format(time.RFC3339Nano) + `"}`
}

// createNamespace makes the one namespace with max_concurrency 10000.
func (c *chimeProc) createNamespace(ctx context.Context) {
	if st, out := c.call(ctx, "PUT", "/v1/namespaces/"+e2eNamespace, []byte(`{"max_concurrency": 10000}`)); st != 200 && st != 201 {
		fail("namespace: %d %s", st, out)
	}
}

// ingestBatch creates jobs [from, to) through POST .../jobs:batch, 1000 per
// request from 4 clients; at gives each job's time.
func (c *chimeProc) ingestBatch(ctx context.Context, url string, from, to int, at func(int) time.Time) {
	const per, clients = 1000, 4
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				lo := int(next.Add(per)) - per
				if lo >= to {
					return
				}
				hi := min(lo+per, to)
				buf.Reset()
				buf.WriteString(`{"jobs":[`)
				for i := lo; i < hi; i++ {
					if i > lo {
						buf.WriteByte(',')
					}
					t := at(i)
					fmt.Fprintf(&buf, `{"id":"j%d","schedule":{"at":%q},"callback":{"url":%q,"body":%s}}`,
						i, t.UTC().Format(time.RFC3339Nano), url, jobBody(i, t))
				}
				buf.WriteString(`]}`)
				if st, out := c.call(ctx, "POST", "/v1/namespaces/"+e2eNamespace+"/jobs:batch", buf.Bytes()); st != 201 {
					fail("jobs:batch: %d %.300s", st, out)
				}
			}
		}()
	}
	wg.Wait()
}

// ingestProducer publishes jobs [from, to) with the producer SDK, straight
// into Kafka.
func (c *chimeProc) ingestProducer(ctx context.Context, url string, from, to int, at func(int) time.Time, labels ...func(int) map[string]string) {
	p, err := producer.New(producer.Brokers([]string{c.broker}), producer.TopicPrefix(e2ePrefix), producer.KgoOptions(c.credential().Kgo()...))
	if err != nil {
		fail("producer: %v", err)
	}
	defer p.Close()
	var errMu sync.Mutex
	var firstErr error
	for i := from; i < to; i++ {
		t := at(i)
		spec := (&chimeJobSpec{i: i, at: t, url: url}).proto()
		for _, l := range labels {
			spec.Labels = l(i)
		}
		p.ScheduleAsync(ctx, spec, func(_ producer.Receipt, err error) {
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		fail("producer flush: %v", err)
	}
	if firstErr != nil {
		fail("producer: %v", firstErr)
	}
}

type chimeJobSpec struct {
	i   int
	at  time.Time
	url string
	ns  string // default e2eNamespace
}

func (s *chimeJobSpec) proto() *chimev1.JobSpec {
	ns := s.ns
	if ns == "" {
		ns = e2eNamespace
	}
	return &chimev1.JobSpec{
		Namespace: ns,
		Id:        "j" + strconv.Itoa(s.i),
		Schedule:  &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(s.at)}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
			Url: s.url, Body: []byte(jobBody(s.i, s.at)),
		}}},
	}
}
