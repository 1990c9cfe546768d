package dispatcher

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Integration tests: a real broker (kfake via kafkatest, one per test),
// httptest receivers on 127.0.0.1 (the test guard allows loopback), the
// real dispatcher, and where retries must come back as dues, the real
// scheduler.

type bundle struct {
	t        *testing.T
	cluster  *kafkatest.Cluster
	topics   schema.Topics
	in       *kgo.Client // produces due events
	outcomes *collector[*chimev1.CallbackOutcome]
	commands *collector[*chimev1.JobCommand]
	dead     *collector[*chimev1.DeadLetter]
}

func setup(t *testing.T, partitions int32) *bundle {
	t.Helper()
	c := kafkatest.New(t)
	tp := c.Topics()
	c.Provision(t, tp, partitions)
	b := &bundle{t: t, cluster: c, topics: tp}
	b.in = c.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	b.outcomes = collect[*chimev1.CallbackOutcome](t, c.Brokers(), tp.Outcomes(), func(m *chimev1.CallbackOutcome) string { return m.GetNamespace() + "/" + m.GetJobId() })
	b.commands = collectCommands(t, c.Brokers(), tp.JobCommands())
	b.dead = collect[*chimev1.DeadLetter](t, c.Brokers(), tp.DeadLetters(), func(m *chimev1.DeadLetter) string {
		return m.GetDue().GetNamespace() + "/" + m.GetDue().GetJobId()
	})
	return b
}

func testLogger() *slog.Logger {
	if os.Getenv("CHIME_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (b *bundle) config(mutate ...func(*Config)) Config {
	cfg := Config{
		Brokers:        b.cluster.Brokers(),
		Topics:         b.topics,
		Logger:         testLogger(),
		Guard:          Guard{AllowLoopback: true}, // the receivers are httptest servers on 127.0.0.1
		CommitInterval: 100 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return cfg
}

// start runs a dispatcher until the test ends.
func (b *bundle) start(mutate ...func(*Config)) *Dispatcher {
	b.t.Helper()
	d, err := New(b.config(mutate...))
	require.NoError(b.t, err)
	lifecycletest.Start(b.t, d)
	return d
}

// startScheduler runs the real scheduler, so that Retry commands come back
// as dues.
func (b *bundle) startScheduler() {
	b.t.Helper()
	s, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client: processors.Client{Brokers: b.cluster.Brokers(), Logger: testLogger()},
			Topics: b.topics,
		},
		TickResend: 2 * time.Second,
		PumpIdle:   100 * time.Millisecond,
		Namespaces: kafkatest.EveryNamespace{},
	})
	require.NoError(b.t, err)
	lifecycletest.Start(b.t, s)
}

func (b *bundle) producer() *producer.Producer {
	p, err := producer.New(producer.Brokers(b.cluster.Brokers()), producer.TopicPrefix(b.topics.Prefix))
	require.NoError(b.t, err)
	b.t.Cleanup(p.Close)
	return p
}

// newDue is a due event for ns/job calling url, first attempt.
func newDue(ns, job, url string) *chimev1.Due {
	now := time.Now()
	return &chimev1.Due{
		Namespace: ns, JobId: job, FireSeq: 1, EmitSeq: 1, Attempt: 1,
		ScheduledAt: timestamppb.New(now), FireAt: timestamppb.New(now), EmittedAt: timestamppb.New(now),
		Callback:       &chimev1.HttpCallback{Url: url, Body: []byte(`{"hello":"` + job + `"}`)},
		IdempotencyKey: schema.JobKey(ns, job) + "/1",
	}
}

// produce publishes dues keyed by namespace, as the scheduler does.
func (b *bundle) produce(dues ...*chimev1.Due) {
	b.t.Helper()
	var recs []*kgo.Record
	for _, d := range dues {
		v, err := proto.Marshal(d)
		require.NoError(b.t, err)
		recs = append(recs, &kgo.Record{Topic: b.topics.Due(), Key: []byte(d.GetNamespace()), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(b.t, b.in.ProduceSync(ctx, recs...).FirstErr())
}

// committed is the group's committed offset of due partition p (0 if
// none).
func (b *bundle) committed(p int32) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offsets, err := kadm.NewClient(b.in).FetchOffsets(ctx, b.topics.DispatcherGroup())
	require.NoError(b.t, err)
	c, ok := offsets.Lookup(b.topics.Due(), p)
	if !ok || c.At < 0 {
		return 0
	}
	return c.At
}

// committedAll reports whether the group committed up to the end of every
// due partition.
func (b *bundle) committedAll() bool {
	adm := kadm.NewClient(b.in)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, b.topics.Due())
	if err != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, b.topics.DispatcherGroup())
	if err != nil {
		return false
	}
	all := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if o.Offset > 0 && (!ok || c.At < o.Offset) {
			all = false
		}
	})
	return all
}

// collector consumes a topic from the start and keeps every message by key.
type collector[M proto.Message] struct {
	*kafkatest.Collector[M]
}

func collect[M proto.Message](t *testing.T, brokers []string, topic string, key func(M) string) *collector[M] {
	return &collector[M]{kafkatest.Collect(t, brokers, topic, func(r *kgo.Record) (string, M) {
		var zero M
		m := zero.ProtoReflect().New().Interface().(M)
		if err := proto.Unmarshal(r.Value, m); err != nil {
			t.Errorf("collector %s: %v", topic, err)
		}
		return key(m), m
	})}
}

// collectCommands collects job commands by job, each command of a batch
// on its own (the dispatcher batches its answers).
func collectCommands(t *testing.T, brokers []string, topic string) *collector[*chimev1.JobCommand] {
	return &collector[*chimev1.JobCommand]{kafkatest.CollectEach(t, brokers, topic, func(r *kgo.Record, keep func(string, *chimev1.JobCommand)) {
		m := new(chimev1.JobCommand)
		if err := proto.Unmarshal(r.Value, m); err != nil {
			t.Errorf("collector %s: %v", topic, err)
		}
		cmds := []*chimev1.JobCommand{m}
		if b := m.GetBatch(); b != nil {
			cmds = b.GetCommands()
		}
		for _, c := range cmds {
			keep(c.GetNamespace()+"/"+c.GetJobId(), c)
		}
	})}
}

func (c *collector[M]) get(key string) []M { return c.Get(key) }

func (c *collector[M]) count(match func(M) bool) int {
	if match == nil {
		return c.Count()
	}
	return c.CountWhere(match)
}

var waitFor = kafkatest.WaitFor

// receiver is an httptest server that records requests and answers with
// a scripted sequence of handlers (the last repeats).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	script   []http.HandlerFunc
}

type recorded struct {
	header http.Header
	body   []byte
	method string
	path   string
	at     time.Time
}

func newReceiver(t *testing.T, script ...http.HandlerFunc) *receiver {
	r := &receiver{script: script}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := make([]byte, 0, 64)
		buf := make([]byte, 4096)
		for {
			n, err := req.Body.Read(buf)
			body = append(body, buf[:n]...)
			if err != nil {
				break
			}
		}
		r.mu.Lock()
		i := len(r.requests)
		r.requests = append(r.requests, recorded{header: req.Header.Clone(), body: body, method: req.Method, path: req.URL.Path, at: time.Now()})
		h := r.script[min(i, len(r.script)-1)]
		r.mu.Unlock()
		h(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) calls() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.requests...)
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

func ackOf(cmds []*chimev1.JobCommand) *chimev1.Ack {
	for _, c := range cmds {
		if a := c.GetAck(); a != nil {
			return a
		}
	}
	return nil
}

func retriesOf(cmds []*chimev1.JobCommand) []*chimev1.Retry {
	var out []*chimev1.Retry
	for _, c := range cmds {
		if r := c.GetRetry(); r != nil {
			out = append(out, r)
		}
	}
	return out
}
