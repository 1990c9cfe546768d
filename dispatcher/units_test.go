package dispatcher

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	const (
		ok   = chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		re   = chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE
		perm = chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	)
	for _, tc := range []struct {
		code int
		want chimev1.OutcomeClass
	}{
		{200, ok}, {201, ok}, {204, ok}, {299, ok},
		{301, perm}, {302, perm},
		{400, perm}, {401, perm}, {403, perm}, {404, perm}, {409, perm}, {422, perm},
		{408, re}, {425, re}, {429, re},
		{500, re}, {502, re}, {503, re}, {504, re},
	} {
		require.Equal(t, tc.want, classifyStatus(tc.code), "status %d", tc.code)
	}
}

func TestClassifyError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want chimev1.OutcomeClass
		kind string
	}{
		{"deadline", context.DeadlineExceeded, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, kindTimeout},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid"}, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, kindDNS},
		{"refused conn", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, kindConnection},
		{"ssrf", &net.OpError{Op: "dial", Err: &RefusedError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "x"}}, chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, kindSSRF},
	} {
		c, k := classifyError(tc.err)
		require.Equal(t, tc.want, c, tc.name)
		require.Equal(t, tc.kind, k, tc.name)
	}
}

func TestResolvePolicy(t *testing.T) {
	t.Parallel()
	// The defaults are the namespace defaults' (schema.NamespaceDefaults).
	def := Policy{MaxAttempts: 5, Initial: time.Second, Multiplier: 2, MaxInterval: 5 * time.Minute, Jitter: 0.5, MaxElapsed: 24 * time.Hour}
	require.Equal(t, def, resolvePolicy(nil, nil))
	eff := schema.EffectiveNamespace("x", nil).GetRetry()
	require.Equal(t, Policy{MaxAttempts: eff.GetMaxAttempts(), Initial: eff.GetInitialInterval().AsDuration(), Multiplier: eff.GetMultiplier(),
		MaxInterval: eff.GetMaxInterval().AsDuration(), Jitter: eff.GetJitter(), MaxElapsed: eff.GetMaxElapsed().AsDuration()}, def)
	ns := &chimev1.RetryPolicy{MaxAttempts: 3, InitialInterval: durationpb.New(2 * time.Second), Multiplier: 3}
	job := &chimev1.RetryPolicy{MaxAttempts: 7, MaxInterval: durationpb.New(time.Minute)}
	p := resolvePolicy(job, ns)
	require.EqualValues(t, 7, p.MaxAttempts, "job wins")
	require.Equal(t, 2*time.Second, p.Initial, "namespace fills what the job leaves")
	require.Equal(t, 3.0, p.Multiplier)
	require.Equal(t, time.Minute, p.MaxInterval)
	require.Equal(t, def.Jitter, p.Jitter, "defaults fill the rest")
	require.Equal(t, def.MaxElapsed, p.MaxElapsed)
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	p := Policy{MaxAttempts: 10, Initial: time.Second, Multiplier: 2, MaxInterval: 10 * time.Second, Jitter: 0.5}
	for _, tc := range []struct {
		attempt uint32
		base    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {9, 10 * time.Second}} {
		for range 50 {
			d := backoffDelay(p, tc.attempt)
			require.GreaterOrEqual(t, d, tc.base/2, "attempt %d", tc.attempt)
			require.LessOrEqual(t, d, tc.base*3/2, "attempt %d", tc.attempt)
		}
	}
	p.Jitter = 0
	require.Equal(t, 4*time.Second, backoffDelay(p, 3))
	// retryDelay caps even the randomized delay at the max interval.
	p.Jitter = 0.5
	for range 50 {
		d, fromHeader := retryDelay(p, 9, "", time.Now())
		require.False(t, fromHeader)
		require.LessOrEqual(t, d, 10*time.Second)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	p := Policy{MaxAttempts: 5, Initial: time.Second, Multiplier: 2, MaxInterval: time.Minute, Jitter: 0.5}
	for _, tc := range []struct {
		header string
		want   time.Duration
		valid  bool
	}{
		{"30", 30 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"3600", time.Minute, true}, // capped by max interval
		{now.Add(20 * time.Second).Format(http.TimeFormat), 20 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true}, // in the past: now
		{"soon", 0, false},
		{"-5", 0, false},
	} {
		d, fromHeader := retryDelay(p, 1, tc.header, now)
		require.Equal(t, tc.valid, fromHeader, "header %q", tc.header)
		if tc.valid {
			require.Equal(t, tc.want, d, "header %q", tc.header)
		}
	}
}

// verifyStandardWebhook is an independent implementation of the Standard
// Webhooks verification (as the spec and its reference libraries describe
// it), written without the dispatcher's signer.
func verifyStandardWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp out of tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

func TestSignerMatchesSpec(t *testing.T) {
	t.Parallel()
	// The example from the Standard Webhooks specification.
	s, err := newSigner([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", s.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), body))

	now := time.Now()
	h := http.Header{}
	for k, v := range s.headers("ns/job/1", now, body) {
		h.Set(k, v)
	}
	require.NoError(t, verifyStandardWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, body, now))
	require.Error(t, verifyStandardWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte("tampered"), now))

	_, err = newSigner([]string{"whsec_not base64!"})
	require.ErrorContains(t, err, "base64")
	_, err = newSigner([]string{""})
	require.Error(t, err)
	none, err := newSigner(nil)
	require.NoError(t, err)
	require.Nil(t, none, "no secret: no signature")

	// During a rotation's overlap: two signatures, the new key's first,
	// and a receiver holding either secret verifies the request.
	const old, fresh = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kLXNlY3JldC1rZXktMjQtYnl0ZXM="
	both, err := newSigner([]string{fresh, old})
	require.NoError(t, err)
	h = http.Header{}
	for k, v := range both.headers("ns/job/2", now, body) {
		h.Set(k, v)
	}
	sigs := strings.Split(h.Get("webhook-signature"), " ")
	require.Len(t, sigs, 2)
	require.Equal(t, s.sign("ns/job/2", now, body), sigs[1], "the old key's signature is the one it made alone")
	require.NoError(t, verifyStandardWebhook(old, h, body, now))
	require.NoError(t, verifyStandardWebhook(fresh, h, body, now))
	require.Error(t, verifyStandardWebhook("whsec_b3RoZXItc2VjcmV0LWtleS0yNC1ieXRlcyE=", h, body, now))
}

func TestGuard(t *testing.T) {
	t.Parallel()
	strict := &Guard{}
	dev := &Guard{AllowLoopback: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}}
	for _, tc := range []struct {
		addr            string
		strictOK, devOK bool
	}{
		{"127.0.0.1", false, true},
		{"127.9.9.9", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"10.0.0.1", false, false},
		{"10.1.2.3", false, true},
		{"172.16.5.4", false, false},
		{"192.168.1.1", false, false},
		{"100.64.0.1", false, false},
		{"169.254.169.254", false, false},
		{"169.254.1.1", false, false},
		{"fd00:ec2::254", false, false},
		{"fc00::1", false, false},
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		{"::ffff:10.0.0.1", false, false},
		{"64:ff9b:1::a00:1", false, false},
		{"2002:a00:1::1", false, false},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false},
		{"::a00:1", false, false},
		{"fec0::1", false, false},
		{"192.0.0.8", false, false},
		{"192.0.2.1", false, false},
		{"198.51.100.7", false, false},
		{"203.0.113.9", false, false},
		{"198.18.0.1", false, false},
		{"198.19.255.255", false, false},
		{"198.20.0.1", true, true},
		{"93.184.216.34", true, true},
		{"2606:2800:220:1:248:1893:25c8:1946", true, true},
	} {
		a := netip.MustParseAddr(tc.addr)
		require.Equal(t, tc.strictOK, strict.Check(a) == nil, "strict %s", tc.addr)
		require.Equal(t, tc.devOK, dev.Check(a) == nil, "dev %s", tc.addr)
	}
}

// TestGuardRefusesBeforeConnecting dials blocked addresses through the
// guarded dialer: the refusal comes from Control, before connect(2), so no
// packet leaves for these addresses.
func TestGuardRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	g := &Guard{}
	for _, addr := range []string{"169.254.169.254:80", "10.0.0.1:80", "127.0.0.1:1", "[fd00:ec2::254]:80"} {
		_, err := g.dialer().DialContext(context.Background(), "tcp", addr)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused, addr)
	}
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	require.True(t, hostAllowed(nil, "anything.example"))
	list := []string{"hooks.example.com", "*.acme.io"}
	require.True(t, hostAllowed(list, "hooks.example.com"))
	require.True(t, hostAllowed(list, "HOOKS.example.com."))
	require.True(t, hostAllowed(list, "a.b.acme.io"))
	require.False(t, hostAllowed(list, "acme.io"))
	require.False(t, hostAllowed(list, "evil.com"))
	require.False(t, hostAllowed(list, "hooks.example.com.evil.com"))

	// CIDR entries match hosts that are IP addresses in the range.
	nets := []string{"10.1.2.0/24", "2001:db8::/32", "203.0.113.5"}
	require.True(t, hostAllowed(nets, "10.1.2.9"))
	require.False(t, hostAllowed(nets, "10.1.3.1"))
	require.True(t, hostAllowed(nets, "2001:db8::1"))
	require.True(t, hostAllowed(nets, "[2001:db8::1]"))
	require.True(t, hostAllowed(nets, "203.0.113.5"))
	require.False(t, hostAllowed(nets, "203.0.113.6"))
	require.False(t, hostAllowed(nets, "internal.example"), "a host name is matched by name only")
}

func TestDedup(t *testing.T) {
	t.Parallel()
	d := newDedup(2)
	f, mine, seen := d.begin(emission{"a", 1})
	require.True(t, mine)
	require.False(t, seen)
	// A replay while the first copy is in flight waits for it.
	g, mine2, _ := d.begin(emission{"a", 1})
	require.False(t, mine2)
	require.Same(t, f, g)
	d.finish(emission{"a", 1}, f, true)
	<-g.done
	require.True(t, g.ok)
	_, _, seen = d.begin(emission{"a", 1})
	require.True(t, seen)
	// A failed flight is not remembered.
	f, _, _ = d.begin(emission{"b", 1})
	d.finish(emission{"b", 1}, f, false)
	_, mine, _ = d.begin(emission{"b", 1})
	require.True(t, mine)
	// Bounded: the oldest is forgotten.
	for _, k := range []emission{{"c", 1}, {"d", 1}} {
		f, _, _ := d.begin(k)
		d.finish(k, f, true)
	}
	_, mine, _ = d.begin(emission{"a", 1})
	require.True(t, mine, "a#1 fell out of the LRU")
}

// A dedup of size 0 remembers no completed emission, but still makes a
// replay wait for the copy in flight.
func TestDedupOfSizeZero(t *testing.T) {
	t.Parallel()
	d := newDedup(0)
	f, mine, _ := d.begin(emission{"a", 1})
	require.True(t, mine)
	g, mine, _ := d.begin(emission{"a", 1})
	require.False(t, mine)
	d.finish(emission{"a", 1}, f, true)
	<-g.done
	_, mine, seen := d.begin(emission{"a", 1})
	require.True(t, mine)
	require.False(t, seen)
}

func TestLanesIsolateNamespaces(t *testing.T) {
	t.Parallel()
	l := newLanes(8, 2, 100, 4)
	busy := l.get(nsDue("busy"), nil)
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	a1, _, ok := l.acquire(ctx, busy, "", soon())
	require.True(t, ok)
	_, _, ok = l.acquire(ctx, busy, "", soon())
	require.True(t, ok)
	_, kind, ok := l.acquire(ctx, busy, "", soon())
	require.False(t, ok, "busy's cap of 2 is reached")
	require.Equal(t, kindConcurrency, kind)
	// Another namespace is not held up by busy's full lane.
	other := l.get(nsDue("other"), &chimev1.NamespaceConfig{MaxConcurrency: 4})
	for range 4 {
		_, _, ok := l.acquire(ctx, other, "", soon())
		require.True(t, ok)
	}
	a1.release()
	_, _, ok = l.acquire(ctx, busy, "", soon())
	require.True(t, ok, "a released slot is reused")

	limited := l.get(nsDue("limited"), &chimev1.NamespaceConfig{RateLimit: &chimev1.RateLimit{PerSecond: 1, Burst: 1}})
	a, _, ok := l.acquire(ctx, limited, "", soon())
	require.True(t, ok)
	a.release()
	_, kind, ok = l.acquire(ctx, limited, "", soon())
	require.False(t, ok, "the bucket is empty for the next second")
	require.Equal(t, kindRateLimit, kind)
}

// call assigns chime's headers to the map directly, which is only right
// for names in canonical form.
func TestHeaderNamesAreCanonical(t *testing.T) {
	t.Parallel()
	for _, h := range []string{HeaderIdempotencyKey, HeaderJobID, HeaderNamespace, HeaderAttempt, HeaderScheduledAt, HeaderDeadline, "User-Agent"} {
		require.Equal(t, http.CanonicalHeaderKey(h), h)
	}
}

// A spread namespace's shards get lanes of their own whose limits sum to
// the namespace's.
func TestLanesSplitSpreadNamespace(t *testing.T) {
	t.Parallel()
	l := newLanes(1024, 32, 100, maxConnsPerHost)
	cfg := &chimev1.NamespaceConfig{MaxConcurrency: 10, RateLimit: &chimev1.RateLimit{PerSecond: 100, Burst: 7}}
	var conc, burst int
	var perSec float64
	seen := map[*lane]bool{}
	for shard := range uint32(4) {
		ln := l.get(&chimev1.Due{Namespace: "hot", Shard: shard, Spread: 4}, cfg)
		require.False(t, seen[ln], "shard %d has its own lane", shard)
		seen[ln] = true
		conc += ln.maxConc
		burst += ln.burst
		perSec += ln.perSec
		require.Same(t, ln, l.get(&chimev1.Due{Namespace: "hot", Shard: shard, Spread: 4}, cfg), "the same lane again")
	}
	require.Equal(t, 10, conc)
	require.Equal(t, 7, burst)
	require.InDelta(t, 100, perSec, 1e-9)
	whole := l.get(nsDue("hot"), cfg)
	require.Equal(t, 10, whole.maxConc, "a due of the namespace before it was spread takes the whole lane")
}

// Of a spread namespace only the episode's probe shard sends probes, and
// the next episode moves them on.
func TestGateProbesOneShardPerEpisode(t *testing.T) {
	t.Parallel()
	src := &fakeBreakers{}
	g := newGate(src, 5*time.Second)
	now := time.Now()
	shard := func(i uint32) *chimev1.Due { return &chimev1.Due{Namespace: "hot", Shard: i, Spread: 3} }
	for _, version := range []uint64{7, 8, 9} {
		src.set(&chimev1.BreakerStatus{Namespace: "hot", State: chimev1.BreakerState_BREAKER_STATE_HALF_OPEN,
			Version: version, ProbesGranted: 2, CoolOff: durationpb.New(time.Second)})
		probes := 0
		for i := range uint32(3) {
			for range 3 {
				if v := g.take(shard(i), now); v.allow {
					require.True(t, v.probe)
					require.EqualValues(t, schema.ProbeShard(version, 3), i, "version %d", version)
					probes++
				}
			}
		}
		require.Equal(t, 2, probes, "version %d: the granted probes, in sum", version)
	}
}

// TestSSRFDocListsEveryRange holds docs/dispatcher.md's list of refused
// ranges to the code.
func TestSSRFDocListsEveryRange(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/dispatcher.md")
	require.NoError(t, err)
	for _, p := range blockedRanges {
		require.Contains(t, string(doc), "`"+p.String()+"`", "docs/dispatcher.md lists %s", p)
	}
}

// A host's gate lets as many calls through at a time as the client keeps
// connections to it; the dues beyond wait within the admission wait and
// are then deferred, holding no global slot meanwhile, so other hosts keep
// going; a gate leaves nothing behind once its calls are done.
func TestHostGatesCapCallsToOneHost(t *testing.T) {
	t.Parallel()
	l := newLanes(8, 8, 100, 2)
	ln := l.get(nsDue("ns"), nil)
	ctx := context.Background()
	soon := func() time.Time { return time.Now().Add(50 * time.Millisecond) }
	const a, b = "http://a.example:8080", "https://a.example:8080"

	a1, _, ok := l.acquire(ctx, ln, a, soon())
	require.True(t, ok)
	a2, _, ok := l.acquire(ctx, ln, a, soon())
	require.True(t, ok)
	_, kind, ok := l.acquire(ctx, ln, a, soon())
	require.False(t, ok, "a's gate holds 2")
	require.Equal(t, kindConcurrency, kind)
	require.Len(t, ln.slots, 2, "the refused due gave its namespace slot back")
	require.Len(t, l.global, 2, "and took no global slot")

	// Another host (https is another client in fasthttp) is not held up.
	b1, _, ok := l.acquire(ctx, ln, b, soon())
	require.True(t, ok)
	// No host (a Kafka target) passes no gate.
	k1, _, ok := l.acquire(ctx, ln, "", soon())
	require.True(t, ok)

	// A waiting due goes through as soon as a call to its host ends.
	got := make(chan admission, 1)
	go func() {
		adm, _, ok := l.acquire(ctx, ln, a, time.Now().Add(time.Minute))
		if ok {
			got <- adm
		}
		close(got)
	}()
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.hosts[a].users == 3
	}, 10*time.Second, time.Millisecond, "the third due waits at a's gate")
	a1.release()
	a3, ok := <-got
	require.True(t, ok, "admitted once a slot of a was given back")

	for _, adm := range []admission{a2, a3, b1, k1} {
		adm.release()
	}
	require.Empty(t, l.hosts, "no gate is left once its calls are done")
	require.Empty(t, ln.slots)
	require.Empty(t, l.global)
}
