package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Labels of the processes that are not chime roles, in a capSnap.
const (
	labelKafka = "Kafka broker"
	// labelKafkaWarm is the broker without the CPU of its JIT compiler
	// threads: what a broker that has run for a while costs. The phase
	// starts a broker for each partition count, and on these 2 cores the
	// new JVM was still compiling its hot paths through the measured
	// windows: in a perf profile of the broker at 2,000/s (1 December)
	// the C2 compiler thread took 41 % of its samples, the request
	// handlers 28 %. A production broker compiled them long ago.
	labelKafkaWarm  = "Kafka broker, its JIT compiler threads aside"
	labelClickHouse = "ClickHouse"
	labelReceiver   = "receiver"
	labelBench      = "chime-bench" // this process: the load and the reads
)

type procSample struct {
	cpu float64 // seconds of CPU (user + system) so far
	rss int64
}

// capSnap is everything the capacity phase reads at one instant; a
// window's figures are the differences between two of them.
type capSnap struct {
	at    time.Time
	procs map[string]procSample // by label: "scheduler 1", ..., labelKafka
	// work is what each scheduler, dispatcher and sink process has done
	// so far: fires emitted, HTTP calls made, records committed.
	work     map[string]float64
	stateDir map[string]int64 // schedulers' state dirs
	calls    int64            // callbacks the receiver got
	records  map[string]int64 // per topic: sum of end offsets
	size     map[string]int64 // per topic: bytes in the broker's log dirs
	// brokerJIT is the CPU seconds the broker's JIT compiler threads have
	// used so far (part of procs[labelKafka]).
	brokerJIT float64
	// busy and total are the machine's CPU jiffies (/proc/stat): what
	// the machine did beside this phase's processes shows other load.
	busy, total int64
}

func sample(pid int) procSample {
	rss, _ := procMem(pid)
	return procSample{cpu: max(0, procCPU(pid)), rss: rss}
}

func (d *capDeploy) snap(ctx context.Context) capSnap {
	// CPU first, all together, so that every process's window is the
	// same; the Kafka and HTTP reads after it take a few milliseconds.
	s := capSnap{at: time.Now(), procs: map[string]procSample{}, work: map[string]float64{}, stateDir: map[string]int64{}}
	for _, p := range d.procs {
		s.procs[p.label] = sample(p.pid())
	}
	s.procs[labelKafka] = sample(d.c.brokerPID)
	s.brokerJIT = jvmJITCPU(d.c.brokerPID)
	s.procs[labelClickHouse] = sample(d.c.chPID)
	s.procs[labelReceiver] = sample(d.c.rcv.pid())
	s.procs[labelBench] = sample(os.Getpid())
	s.busy, s.total = machineCPU()
	s.calls = d.c.rcv.calls()
	var sinks map[string]int64
	for _, p := range d.procs {
		switch p.role {
		case "scheduler":
			s.work[p.label] = p.scrape(ctx).sum("chime_scheduler_fires_total")
			s.stateDir[p.label] = dirSize(p.stateDir())
		case "dispatcher":
			s.work[p.label] = p.scrape(ctx).sum("chime_dispatcher_calls_total")
		case "sink":
			if sinks == nil {
				sinks = memberCommitted(ctx, d.c.adm, d.groupOf("sink"))
			}
			s.work[p.label] = float64(sinks[p.instanceID()])
		}
	}
	s.records, s.size = topicStats(ctx, d.c.adm, d.prefix)
	return s
}

// capWindow is the span between two snapshots.
type capWindow struct{ s0, s1 capSnap }

func (w capWindow) secs() float64 { return w.s1.at.Sub(w.s0.at).Seconds() }

// fired is the callbacks the receiver got in the window.
func (w capWindow) fired() int64 { return w.s1.calls - w.s0.calls }

// matches says whether label is kind: a role's name matches all of its
// processes ("scheduler" matches "scheduler 1" and "scheduler 2"); other
// kinds match their label.
func matches(label, kind string) bool {
	return label == kind || strings.HasPrefix(label, kind+" ")
}

// cpu is the CPU seconds kind used in the window.
func (w capWindow) cpu(kind string) float64 {
	if kind == labelKafkaWarm {
		return w.cpu(labelKafka) - (w.s1.brokerJIT - w.s0.brokerJIT)
	}
	t := 0.0
	for label, p := range w.s1.procs {
		if matches(label, kind) {
			t += p.cpu - w.s0.procs[label].cpu
		}
	}
	return t
}

// cores is kind's average share of one core in the window.
func (w capWindow) cores(kind string) float64 { return w.cpu(kind) / w.secs() }

// machine returns the share of the machine's CPU time that was busy in
// the window, and the share this phase's processes used.
func (w capWindow) machine() (busy, ours float64) {
	total := float64(w.s1.total - w.s0.total)
	if total <= 0 {
		return 0, 0
	}
	var cpu float64
	for label, p := range w.s1.procs {
		cpu += p.cpu - w.s0.procs[label].cpu
	}
	return float64(w.s1.busy-w.s0.busy) / total, cpu * clockTicks / total
}

// rss is kind's resident memory at the window's end.
func (w capWindow) rss(kind string) int64 {
	var t int64
	for label, p := range w.s1.procs {
		if matches(label, kind) {
			t += p.rss
		}
	}
	return t
}

// capLoad is one steady run: n jobs created and fired at rate, the
// measured window inside it, and the receiver's figures for all n.
type capLoad struct {
	capWindow
	n, rate int
	stats   deliveryStats
}

// firedRate is the callbacks per second in the window.
func (l capLoad) firedRate() float64 { return float64(l.fired()) / l.secs() }

// idle measures the deployment with nothing due.
func (d *capDeploy) idle(ctx context.Context) capWindow {
	fmt.Fprintf(os.Stderr, "capacity %s: idle for %s...\n", d.label(), d.c.o.idle)
	s0 := d.snap(ctx)
	sleepCtx(ctx, d.c.o.idle)
	return capWindow{s0, d.snap(ctx)}
}

func (d *capDeploy) label() string {
	var per []string
	for _, role := range capRoles {
		if n := d.count(role); n > 1 {
			per = append(per, fmt.Sprintf("%d %ss", n, role))
		}
	}
	l := fmt.Sprintf("%d partitions", d.partitions)
	if len(per) > 0 {
		l += ", " + strings.Join(per, ", ")
	}
	return l
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		fail("interrupted")
	case <-time.After(d):
	}
}

// capTick is how often the load creates the next slice of jobs: small
// enough that jobs:batch requests stay small (rate/5 jobs a tick), large
// enough that each namespace's jobs go in one request.
const capTick = 200 * time.Millisecond

// steady creates rate jobs a second through the API, each due o.lead
// after it is created, from o.lead+o.warm+o.window ahead of the window's
// end: during the window jobs are created and fired at the same rate, as
// in any steady state, so CPU over the window divided by the jobs fired in
// it is the cost of one job's whole life (create, fire, call, outcome,
// breaker, analytics). Half of the jobs go to the hot namespace, half
// round-robin to the cold ones. The window opens after o.warm of firing.
func (d *capDeploy) steady(ctx context.Context, run string, rate int) capLoad {
	o := d.c.o
	rcv := d.c.rcv
	span := o.lead + o.warm + o.window
	n := int(span.Seconds() * float64(rate))
	perTick := max(1, rate*int(capTick/time.Millisecond)/1000)
	start := time.Now().Add(time.Second)
	at := func(i int) time.Time {
		return start.Add(o.lead + time.Duration(float64(i)*float64(time.Second)/float64(rate)))
	}
	rcv.reset(n)
	api := d.apiClient()
	url := rcv.url()
	fmt.Fprintf(os.Stderr, "capacity %s: %d jobs at %d/s through the API, due %s after creation...\n", d.label(), n, rate, o.lead)

	// At most 16 ticks' requests in flight: if the API falls behind, the
	// load slows down (and the window's rate shows it) instead of piling
	// up goroutines.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	created := make(chan struct{})
	go func() {
		defer close(created)
		for k := 0; k*perTick < n; k++ {
			time.Sleep(time.Until(start.Add(time.Duration(k) * capTick)))
			if ctx.Err() != nil {
				return
			}
			lo, hi := k*perTick, min(n, (k+1)*perTick)
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				d.createSlice(ctx, api, jobSlice{run: run, url: url, lo: lo, hi: hi, at: at})
			}()
		}
		wg.Wait()
	}()

	sleepCtx(ctx, time.Until(start.Add(o.lead+o.warm)))
	s0 := d.snap(ctx)
	profiled := d.profile(run)
	sleepCtx(ctx, time.Until(start.Add(o.lead+o.warm+o.window)))
	s1 := d.snap(ctx)
	profiled()
	<-created
	if !rcv.waitCalls(ctx, int64(n), 2*time.Minute) {
		fmt.Fprintf(os.Stderr, "capacity %s: only %d of %d calls arrived\n", d.label(), rcv.calls(), n)
	}
	return capLoad{capWindow: capWindow{s0, s1}, n: n, rate: rate, stats: summarize(rcv.results(n), at)}
}

// profile takes a CPU profile of every role process for the window, when
// asked (-e2e-profile-dir); wait for them with the returned function.
func (d *capDeploy) profile(run string) func() {
	dir := d.c.o.profileDir
	if dir == "" {
		return func() {}
	}
	var waits []func()
	for _, p := range d.procs {
		name := fmt.Sprintf("capacity-p%d-%s-%s.pprof", d.partitions, run, strings.ReplaceAll(p.label, " ", ""))
		waits = append(waits, p.metrics.profile(filepath.Join(dir, name), d.c.o.window))
	}
	fmt.Fprintf(os.Stderr, "capacity %s: CPU profiles of the window into %s\n", d.label(), dir)
	return func() {
		for _, w := range waits {
			w()
		}
	}
}

// jobSlice is jobs [lo, hi) of a run: job i is "<run>-<i>", due at at(i),
// calling url.
type jobSlice struct {
	run, url string
	lo, hi   int
	at       func(int) time.Time
}

// createSlice creates a slice of jobs: one jobs:batch request per
// namespace (split at the API's limit of 1000).
func (d *capDeploy) createSlice(ctx context.Context, api *chimeProc, s jobSlice) {
	run, url, lo, hi, at := s.run, s.url, s.lo, s.hi, s.at
	byNS := map[string][]int{}
	for i := lo; i < hi; i++ {
		ns := capHot
		if i%2 == 1 {
			ns = capCold((i / 2) % capColdNamespaces)
		}
		byNS[ns] = append(byNS[ns], i)
	}
	var buf bytes.Buffer
	for ns, ids := range byNS {
		for len(ids) > 0 {
			part := ids[:min(len(ids), 1000)]
			ids = ids[len(part):]
			buf.Reset()
			buf.WriteString(`{"jobs":[`)
			for j, i := range part {
				if j > 0 {
					buf.WriteByte(',')
				}
				t := at(i)
				fmt.Fprintf(&buf, `{"id":"%s-%d","schedule":{"at":%q},"callback":{"url":%q,"body":%s}}`,
					run, i, t.UTC().Format(time.RFC3339Nano), url, jobBody(i, t))
			}
			buf.WriteString(`]}`)
			if st, out := api.call(ctx, "POST", "/v1/namespaces/"+ns+"/jobs:batch", buf.Bytes()); st != http.StatusCreated {
				if ctx.Err() != nil {
					return
				}
				fail("capacity: jobs:batch: HTTP %d %.300s", st, out)
			}
		}
	}
}
