package dispatcher

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestCallbacks runs one dispatcher against one broker and checks a table
// of single-attempt behaviours; each case has its own namespace and
// receiver. What follows an attempt is asserted on what the dispatcher
// published: the outcome, the command back to the scheduler, the dead
// letter.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)

	type tc struct {
		name    string
		script  []http.HandlerFunc
		ns      *chimev1.NamespaceConfig
		url     string // overrides the receiver's URL
		mutate  func(*chimev1.Due)
		calls   int // calls the receiver must see
		class   chimev1.OutcomeClass
		ack     chimev1.AckResult // 0: no ack expected
		retry   bool
		dead    bool
		check   func(t *testing.T, r *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand)
		rcv     *receiver
		dueSent *chimev1.Due
	}
	bigBody := bytes.Repeat([]byte("x"), 3000)
	cases := []*tc{
		{
			name: "success", calls: 1,
			script: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201); _, _ = w.Write(bigBody) }},
			mutate: func(d *chimev1.Due) {
				d.Callback.Method = http.MethodPut
				d.Callback.Headers = map[string]string{"X-Custom": "yes", "Idempotency-Key": "spoofed"}
				d.Attempt = 2
			},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, ack: chimev1.AckResult_ACK_RESULT_SUCCEEDED,
			check: func(t *testing.T, r *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand) {
				c := r.calls()[0]
				require.Equal(t, http.MethodPut, c.method)
				require.Equal(t, `{"hello":"success"}`, string(c.body))
				require.Equal(t, "yes", c.header.Get("X-Custom"))
				require.Equal(t, "success/success/1", c.header.Get("Idempotency-Key"), "chime's headers win over the job's")
				require.Equal(t, "success", c.header.Get("X-Chime-Job-Id"))
				require.Equal(t, "success", c.header.Get("X-Chime-Namespace"))
				require.Equal(t, "2", c.header.Get("X-Chime-Attempt"))
				sched, err := time.Parse(time.RFC3339Nano, c.header.Get("X-Chime-Scheduled-At"))
				require.NoError(t, err)
				dl, err := time.Parse(time.RFC3339Nano, c.header.Get("X-Chime-Deadline"))
				require.NoError(t, err)
				require.WithinDuration(t, time.Now().Add(10*time.Second), dl, 5*time.Second, "deadline = start + default timeout")
				require.True(t, dl.After(sched))
				require.Empty(t, c.header.Get("webhook-signature"), "no secret, no signature")
				require.EqualValues(t, 201, o.StatusCode)
				require.Len(t, o.BodySnippet, 1024)
				require.EqualValues(t, 2, o.Attempt)
				require.Equal(t, "out-success/success/1#1", o.EventId)
				require.NotEmpty(t, o.DispatcherId)
				require.Equal(t, http.MethodPut, o.Method)
				require.NotNil(t, o.Latency)
			},
		},
		{
			name: "json-body", calls: 1, script: []http.HandlerFunc{status(200)},
			mutate: func(d *chimev1.Due) { d.Callback.JsonBody = true },
			class:  chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, ack: chimev1.AckResult_ACK_RESULT_SUCCEEDED,
			check: func(t *testing.T, r *receiver, _ *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				require.Equal(t, "application/json", r.calls()[0].header.Get("Content-Type"), "a JSON body is sent as JSON")
			},
		},
		{
			name: "json-body-own-type", calls: 1, script: []http.HandlerFunc{status(200)},
			mutate: func(d *chimev1.Due) {
				d.Callback.JsonBody = true
				d.Callback.Headers = map[string]string{"content-type": "application/vnd.shop+json"}
			},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, ack: chimev1.AckResult_ACK_RESULT_SUCCEEDED,
			check: func(t *testing.T, r *receiver, _ *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				require.Equal(t, []string{"application/vnd.shop+json"}, r.calls()[0].header.Values("Content-Type"), "the job's own type wins")
			},
		},
		{
			name: "bad-request", calls: 1, script: []http.HandlerFunc{status(400)},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, ack: chimev1.AckResult_ACK_RESULT_FAILED, dead: true,
		},
		{
			name: "server-error", calls: 1, script: []http.HandlerFunc{status(503)},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, retry: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand) {
				r := retriesOf(cmds)[0]
				require.EqualValues(t, 2, r.Attempt)
				require.EqualValues(t, 1, r.FireSeq)
				require.EqualValues(t, 1, r.EmitSeq)
				d := r.NotBefore.AsTime().Sub(o.FinishedAt.AsTime())
				require.True(t, d >= 500*time.Millisecond && d <= 1500*time.Millisecond, "first backoff is 1s ± 50%%, got %s", d)
				require.True(t, o.WillRetry)
			},
		},
		{
			name: "retry-after-seconds", calls: 1,
			script: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
			}},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, retry: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand) {
				r := retriesOf(cmds)[0]
				require.Equal(t, 30*time.Second, r.NotBefore.AsTime().Sub(o.FinishedAt.AsTime()), "Retry-After replaces the backoff")
				require.Contains(t, r.Reason, "Retry-After 30")
			},
		},
		{
			name: "retry-after-date-capped", calls: 1,
			ns: &chimev1.NamespaceConfig{Retry: &chimev1.RetryPolicy{MaxInterval: durationpb.New(time.Minute)}},
			script: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
			}},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, retry: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand) {
				r := retriesOf(cmds)[0]
				require.Equal(t, time.Minute, r.NotBefore.AsTime().Sub(o.FinishedAt.AsTime()), "capped by the namespace's max interval")
			},
		},
		{
			name: "timeout", calls: 1,
			script: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
			mutate: func(d *chimev1.Due) { d.Callback.Timeout = durationpb.New(300 * time.Millisecond) },
			class:  chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, retry: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, cmds []*chimev1.JobCommand) {
				require.Equal(t, kindTimeout, o.ErrorKind)
				require.EqualValues(t, 2, retriesOf(cmds)[0].Attempt)
			},
		},
		{
			name: "last-attempt", calls: 1, script: []http.HandlerFunc{status(500)},
			mutate: func(d *chimev1.Due) {
				d.Attempt = 3
				d.Retry = &chimev1.RetryPolicy{MaxAttempts: 3}
			},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, ack: chimev1.AckResult_ACK_RESULT_DEAD, dead: true,
		},
		{
			name: "max-elapsed", calls: 1, script: []http.HandlerFunc{status(500)},
			mutate: func(d *chimev1.Due) {
				d.ScheduledAt = timestamppb.New(time.Now().Add(-time.Hour))
				d.Retry = &chimev1.RetryPolicy{MaxElapsed: durationpb.New(time.Hour)}
			},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, ack: chimev1.AckResult_ACK_RESULT_DEAD, dead: true,
		},
		{
			name: "signed", calls: 1, script: []http.HandlerFunc{status(200)},
			ns:    &chimev1.NamespaceConfig{SigningSecret: testSecret},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, ack: chimev1.AckResult_ACK_RESULT_SUCCEEDED,
			check: func(t *testing.T, r *receiver, _ *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				c := r.calls()[0]
				require.Equal(t, "signed/signed/1", c.header.Get("webhook-id"))
				require.NoError(t, verifyStandardWebhook(testSecret, c.header, c.body, time.Now()))
				require.Error(t, verifyStandardWebhook("whsec_"+strings.Repeat("A", 32), c.header, c.body, time.Now()), "another key does not verify")
			},
		},
		{
			name: "ssrf-metadata", url: "http://169.254.169.254/latest/meta-data/",
			class: chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, ack: chimev1.AckResult_ACK_RESULT_FAILED, dead: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				require.Equal(t, kindSSRF, o.ErrorKind)
				require.Contains(t, o.Error, "169.254.169.254")
			},
		},
		{
			name: "ssrf-private", url: "http://10.0.0.1:8080/hook",
			class: chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, ack: chimev1.AckResult_ACK_RESULT_FAILED, dead: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				require.Equal(t, kindSSRF, o.ErrorKind)
			},
		},
		{
			name: "host-not-allowed", script: []http.HandlerFunc{status(200)},
			ns:    &chimev1.NamespaceConfig{AllowedHosts: []string{"hooks.example.com"}},
			class: chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, ack: chimev1.AckResult_ACK_RESULT_FAILED, dead: true,
			check: func(t *testing.T, _ *receiver, o *chimev1.CallbackOutcome, _ []*chimev1.JobCommand) {
				require.Equal(t, kindHostNotAllowed, o.ErrorKind)
			},
		},
		{
			name: "namespace-window", script: []http.HandlerFunc{status(200)},
			ns:     &chimev1.NamespaceConfig{RelevancyWindow: durationpb.New(time.Minute)},
			mutate: func(d *chimev1.Due) { d.ScheduledAt = timestamppb.New(time.Now().Add(-2 * time.Minute)) },
			class:  chimev1.OutcomeClass_OUTCOME_CLASS_EXPIRED, ack: chimev1.AckResult_ACK_RESULT_EXPIRED, dead: true,
		},
		{
			name: "expired", script: []http.HandlerFunc{status(200)},
			mutate: func(d *chimev1.Due) { d.Deadline = timestamppb.New(time.Now().Add(-time.Second)) },
			class:  chimev1.OutcomeClass_OUTCOME_CLASS_EXPIRED, ack: chimev1.AckResult_ACK_RESULT_EXPIRED, dead: true,
		},
	}
	nss := StaticNamespaces{}
	for _, c := range cases {
		if c.ns != nil {
			nss[c.name] = c.ns
		}
		if c.script != nil {
			c.rcv = newReceiver(t, c.script...)
		}
	}
	reg := prometheus.NewRegistry()
	d := b.start(func(cfg *Config) { cfg.Namespaces = nss; cfg.Registerer = reg })
	for _, c := range cases {
		url := c.url
		if url == "" {
			url = c.rcv.URL + "/hook"
		}
		c.dueSent = newDue(c.name, c.name, url)
		if c.mutate != nil {
			c.mutate(c.dueSent)
		}
		b.produce(c.dueSent)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.name + "/" + c.name
			waitFor(t, 30*time.Second, "outcome and command", func() bool {
				return len(b.outcomes.get(key)) >= 1 && len(b.commands.get(key)) >= 1
			})
			o := b.outcomes.get(key)[0]
			cmds := b.commands.get(key)
			require.Equal(t, c.class, o.Class, "outcome %v", o)
			if c.rcv != nil {
				require.Len(t, c.rcv.calls(), c.calls)
			}
			if c.ack != 0 {
				a := ackOf(cmds)
				require.NotNil(t, a, "ack in %v", cmds)
				require.Equal(t, c.ack, a.Result)
				require.Empty(t, retriesOf(cmds))
			}
			if c.retry {
				require.Len(t, retriesOf(cmds), 1)
				require.Nil(t, ackOf(cmds))
			}
			if c.dead {
				waitFor(t, 10*time.Second, "dead letter", func() bool { return len(b.dead.get(key)) == 1 })
				dl := b.dead.get(key)[0]
				require.Equal(t, c.dueSent.IdempotencyKey, dl.Due.IdempotencyKey)
				require.Len(t, dl.Attempts, 1)
				require.Equal(t, o.EventId, dl.Attempts[0].EventId)
				require.NotEmpty(t, dl.Reason)
			} else {
				require.Empty(t, b.dead.get(key))
			}
			if c.check != nil {
				c.check(t, c.rcv, o, cmds)
			}
		})
	}
	waitFor(t, 10*time.Second, "offsets committed", b.committedAll)
	require.EqualValues(t, len(cases), d.Stats().Completed)
	requireMetricsFollowStats(t, reg, d.Stats())
}

// TestDuplicateDueIsNotCalledAgain: a due replayed (as after a rebalance)
// is recognised and not called twice.
func TestDuplicateDueIsNotCalledAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	r := newReceiver(t, status(200))
	d := b.start()
	due := newDue("ns", "dup", r.URL)
	b.produce(due)
	waitFor(t, 30*time.Second, "first outcome", func() bool { return len(b.outcomes.get("ns/dup")) == 1 })
	b.produce(due)
	waitFor(t, 30*time.Second, "replay recognised", func() bool { return d.Stats().Duplicates == 1 })
	require.Len(t, r.calls(), 1)
	require.Len(t, b.outcomes.get("ns/dup"), 1)
}

// TestOffsetWaitsForItsAnswers: a due's offset is committed only once its
// answer to the scheduler is in Kafka, though the goroutine that made the
// call moved on when it handed the answer to the producer. The answers
// linger for an hour here, so only a full batch of them is sent: every
// committed offset is checked against the answers on the commands topic,
// and the dues whose answers still linger keep the offset back.
func TestOffsetWaitsForItsAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	r := newReceiver(t, status(200))
	b.start(func(c *Config) { c.AnswerLinger = time.Hour })
	const n = answerBatchMax + 20
	dues := make([]*chimev1.Due, n)
	for i := range dues {
		dues[i] = newDue("ns", fmt.Sprintf("j%04d", i), r.URL)
	}
	b.produce(dues...) // one partition: due i is at offset i

	waitFor(t, 60*time.Second, "every outcome", func() bool { return b.outcomes.count(nil) == n })
	waitFor(t, 30*time.Second, "the full batch of answers", func() bool { return b.commands.count(nil) >= answerBatchMax })
	answered := func(upTo int64) bool {
		for i := range upTo {
			if len(b.commands.get(fmt.Sprintf("ns/j%04d", i))) == 0 {
				return false
			}
		}
		return true
	}
	// Commits run every 100 ms; watch a dozen of them.
	for deadline := time.Now().Add(1200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		at := b.committed(0)
		require.True(t, answered(at), "offset %d is committed before the answers of every due below it are in Kafka", at)
	}
	require.Less(t, b.committed(0), int64(n), "20 answers linger: their dues stay uncommitted")
	require.Equal(t, answerBatchMax, b.commands.count(nil), "only the full batch was sent")
}

// TestRateLimitDefers: beyond its token bucket and the admission wait, a
// namespace's dues are deferred back to the scheduler, not charged an
// attempt, and each still gets an outcome.
func TestRateLimitDefers(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	r := newReceiver(t, status(200))
	b.start(func(c *Config) {
		c.AdmissionWait = 200 * time.Millisecond
		c.Namespaces = StaticNamespaces{"limited": {RateLimit: &chimev1.RateLimit{PerSecond: 1, Burst: 2}}}
	})
	const n = 10
	for i := range n {
		b.produce(newDue("limited", "j"+string(rune('a'+i)), r.URL))
	}
	waitFor(t, 30*time.Second, "an outcome per due", func() bool { return b.outcomes.count(nil) == n })
	deferred := b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
		return o.Class == chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED
	})
	calls := len(r.calls())
	require.Equal(t, n, calls+deferred)
	require.LessOrEqual(t, calls, 3, "burst 2, plus at most one token in the 200ms wait")
	require.GreaterOrEqual(t, deferred, n-3)
	waitFor(t, 10*time.Second, "commands", func() bool { return b.commands.count(nil) == n })
	defers := b.commands.count(func(c *chimev1.JobCommand) bool { return c.GetDefer() != nil })
	require.Equal(t, deferred, defers)
	b.commands.count(func(c *chimev1.JobCommand) bool {
		if df := c.GetDefer(); df != nil {
			require.True(t, df.NotBefore.AsTime().After(time.Now().Add(-time.Minute)))
			require.Contains(t, df.Reason, "rate limit")
		}
		return false
	})
}

// TestEarlyDueIsCalledAtItsTime: the scheduler emits a due up to its
// FireLead before its time; the dispatcher holds it and calls at fire_at,
// never before. A due whose time has come is called at once.
func TestEarlyDueIsCalledAtItsTime(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	r := newReceiver(t, status(200))
	d := b.start()
	// The dispatcher is consuming before the early due is made: on Apache
	// Kafka joining the group alone can take longer than the due's lead,
	// and a due that arrives after its time is not early.
	b.produce(newDue("ns", "warm", r.URL))
	waitFor(t, 30*time.Second, "the dispatcher consuming", func() bool { return len(r.calls()) == 1 })
	fireAt := time.Now().Add(1500 * time.Millisecond)
	early := newDue("ns", "early", r.URL)
	early.FireAt = timestamppb.New(fireAt)
	now := newDue("ns", "now", r.URL)
	now.FireAt = timestamppb.New(time.Now().Add(-time.Second))
	b.produce(early, now)
	waitFor(t, 30*time.Second, "both called", func() bool { return len(r.calls()) == 3 })
	calls := r.calls()[1:]
	var earlyAt time.Time
	for _, c := range calls {
		if c.header.Get("Idempotency-Key") == early.IdempotencyKey {
			earlyAt = c.at
		}
	}
	require.False(t, earlyAt.Before(fireAt), "called at %s, before its time %s", earlyAt, fireAt)
	require.EqualValues(t, 1, d.Stats().Early)
	require.True(t, calls[0].header.Get("Idempotency-Key") == now.IdempotencyKey, "the due whose time had come went first")
}

// TestBatchRecordCallsEachDue: a record holding the scheduler's batch of
// due events is handled as its dues one by one (a recall in it takes back
// the early due before it), counted per due, and committed once all of
// them completed.
func TestBatchRecordCallsEachDue(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	r := newReceiver(t, status(200))
	d := b.start()
	a, c := newDue("ns", "a", r.URL), newDue("ns", "c", r.URL)
	early := newDue("ns", "early", r.URL)
	early.FireAt = timestamppb.New(time.Now().Add(time.Minute))
	recall := &chimev1.Due{Namespace: "ns", JobId: "early", FireSeq: 1, EmitSeq: 1, Recall: true,
		IdempotencyKey: early.IdempotencyKey, FireAt: early.FireAt}
	b.produce(&chimev1.Due{Batch: []*chimev1.Due{a, early, recall, c}})
	waitFor(t, 30*time.Second, "both called", func() bool { return len(r.calls()) == 2 })
	waitFor(t, 30*time.Second, "the record committed", b.committedAll)
	st := d.Stats()
	require.EqualValues(t, 4, st.Consumed, "counted per due")
	require.EqualValues(t, 4, st.Completed)
	require.EqualValues(t, 1, st.Dropped, "the recalled due")
	time.Sleep(200 * time.Millisecond)
	require.Len(t, r.calls(), 2, "the recalled due is not called")
}

// TestFetchBeyondMaxBufferedWaitsItsTurn: one record can hold far more
// dues than MaxBuffered (the scheduler batches them, and a fetch returns
// whole batches). Only MaxBuffered of them wait for admission at a time;
// the rest wait their turn in the consumer, so a backlog that is only
// queued is called, not deferred for outlasting AdmissionWait.
func TestFetchBeyondMaxBufferedWaitsItsTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	slow := func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(200)
	}
	r := newReceiver(t, slow)
	// 4 dues at a time, one call at a time: each waits at most ~80 ms for
	// its slot. All 60 at once would wait up to 1.2 s, past the 400 ms.
	d := b.start(func(c *Config) { c.MaxInFlight, c.MaxBuffered, c.AdmissionWait = 1, 4, 400*time.Millisecond })
	const n = 60
	batch := make([]*chimev1.Due, n)
	for i := range batch {
		batch[i] = newDue("ns", fmt.Sprintf("j%d", i), r.URL)
	}
	b.produce(&chimev1.Due{Batch: batch})
	waitFor(t, 60*time.Second, "every due completed", func() bool { return d.Stats().Completed == n })
	waitFor(t, 30*time.Second, "the record committed", b.committedAll)
	waitFor(t, 30*time.Second, "an answer for every due", func() bool { return b.commands.count(nil) >= n })
	require.Zero(t, b.commands.count(func(c *chimev1.JobCommand) bool { return c.GetDefer() != nil }), "nothing deferred")
	require.Len(t, r.calls(), n)
	require.EqualValues(t, n, d.Stats().Calls)
}
