package dispatcher

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The helper endpoint answers after endpointWork and closes connections
// idle for endpointIdle: a little shorter than what is left of the
// one-second fire interval, so the connections the dispatcher pooled after
// one fire have been closed by the endpoint when the next fire takes them
// (Node's keepAliveTimeout against a job firing every few seconds, scaled
// down).
const (
	endpointWork = 50 * time.Millisecond
	endpointIdle = 850 * time.Millisecond
)

// TestEndpointProcessHelper is not a test: it is the callback endpoint
// that TestEndpointClosingIdleConnectionsLosesNoFire restarts. It serves
// on the listening socket it inherits as descriptor 3, closes connections
// idle for endpointIdle, and on SIGTERM shuts down as a deploy does: it
// stops accepting, closes its idle connections at once and finishes the
// calls in flight.
func TestEndpointProcessHelper(t *testing.T) {
	if os.Getenv("CHIME_ENDPOINT_HELPER") != "1" {
		t.Skip("helper process for TestEndpointClosingIdleConnectionsLosesNoFire")
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	require.NoError(t, err)
	srv := &http.Server{
		IdleTimeout:       endpointIdle,
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			time.Sleep(endpointWork) // so a restart finds calls in flight
			w.WriteHeader(http.StatusNoContent)
		}),
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Println("endpoint-ready")
	select {
	case <-term:
	case err := <-served:
		t.Fatalf("endpoint stopped serving: %v", err)
	case <-time.After(5 * time.Minute):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
}

// TestEndpointClosingIdleConnectionsLosesNoFire: eight jobs fire every
// second with a single attempt each (retry.max_attempts 1, so any fire
// charged with a failure is lost) at an endpoint in another process that
// closes connections idle for 850 ms, and that endpoint is redeployed
// three times under load. Every fire succeeds: a call on a connection the
// endpoint had closed before answering is sent again on a new one, and no
// outcome, dead letter or breaker sees it.
func TestEndpointClosingIdleConnectionsLosesNoFire(t *testing.T) {
	t.Parallel()
	const (
		jobs     = 8
		restarts = 3
		between  = 2 * jobs // fires answered between two restarts, and after the last
	)
	b := setup(t, 2)
	b.startScheduler()
	d := b.start()
	p := b.producer()

	// The test holds the listening socket; each generation of the
	// endpoint accepts on it, so a restart closes connections but never
	// refuses one (the next generation is up before the old one stops,
	// as in a rolling deploy).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	lf, err := ln.(*net.TCPListener).File()
	require.NoError(t, err)
	t.Cleanup(func() { _ = lf.Close() })
	startEndpoint := func() *exec.Cmd {
		return kafkatest.StartHelperProcessFiles(t, "TestEndpointProcessHelper", "endpoint-ready",
			[]*os.File{lf}, "CHIME_ENDPOINT_HELPER=1")
	}
	endpoint := startEndpoint()

	for i := range jobs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Schedule(ctx, &chimev1.JobSpec{
			Namespace: "keepalive", Id: fmt.Sprintf("j%d", i),
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "* * * * * *"}}},
			Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
				Url: fmt.Sprintf("http://%s/j%d", ln.Addr(), i), Body: []byte(`{}`),
				Timeout: durationpb.New(10 * time.Second),
			}}},
			Retry: &chimev1.RetryPolicy{MaxAttempts: 1},
		})
		cancel()
		require.NoError(t, err)
	}

	answered := func() int { return b.outcomes.count(nil) }
	next := between
	for range restarts {
		waitFor(t, 60*time.Second, fmt.Sprintf("%d fires answered", next), func() bool { return answered() >= next })
		old := endpoint
		endpoint = startEndpoint()
		// Stopped under load: while a fire's calls are out, so requests
		// arrive on connections the old endpoint is closing.
		waitFor(t, 10*time.Second, "calls in flight", func() bool { s := d.Stats(); return s.Calls > s.Completed })
		require.NoError(t, old.Process.Signal(syscall.SIGTERM))
		require.NoError(t, old.Wait(), "the old endpoint shut down cleanly")
		next = answered() + between
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("%d fires answered", next), func() bool { return answered() >= next })

	failed := func(o *chimev1.CallbackOutcome) bool { return o.Class != chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS }
	var first *chimev1.CallbackOutcome
	total, lost := b.outcomes.count(nil), b.outcomes.count(func(o *chimev1.CallbackOutcome) bool {
		if failed(o) && first == nil {
			first = o
		}
		return failed(o)
	})
	s := d.Stats()
	t.Logf("fires: %d, lost: %d, calls sent again after a closed connection: %d", total, lost, s.Resent)
	if first != nil {
		t.Logf("first lost: %s %s: %s", first.Class, first.ErrorKind, first.Error)
	}
	require.Zero(t, lost, "fires charged with a connection the endpoint had closed")
	require.Zero(t, b.dead.count(nil), "dead letters")
	require.Positive(t, s.Resent, "calls met connections the endpoint had closed (or the test tests nothing)")
}
