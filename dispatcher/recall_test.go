package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// TestControlsNearAFireHold: a due event leaves the scheduler 2 s before
// its time and waits in the dispatcher; a cancel, pause or update
// published 1.2 s before the fire still stops it (or sends it to the new
// target): the scheduler recalls the early due event and the dispatcher
// drops it.
func TestControlsNearAFireHold(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.startScheduler()
	d := b.start()
	p := b.producer()
	old := newReceiver(t, status(200))
	updated := newReceiver(t, status(200))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	target := func(url string) *chimev1.Target {
		return &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: url}}}
	}
	oneShot := func(id string, at time.Time, url string) *chimev1.JobSpec {
		return &chimev1.JobSpec{Namespace: "near", Id: id, Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(at)}}, Target: target(url + "/" + id)}
	}
	// Three fires at distinct whole seconds at least 5 s away: a cron job
	// every 2 s (its fire at fireAt), and two one-shots.
	fireAt := time.Now().Add(5 * time.Second).Truncate(2 * time.Second).Add(2 * time.Second)
	_, err := p.Schedule(ctx, &chimev1.JobSpec{Namespace: "near", Id: "cron",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "*/2 * * * * *"}}}, Target: target(old.URL + "/cron")})
	require.NoError(t, err)
	_, err = p.Schedule(ctx, oneShot("paused", fireAt.Add(2*time.Second), old.URL))
	require.NoError(t, err)
	_, err = p.Schedule(ctx, oneShot("updated", fireAt.Add(4*time.Second), old.URL))
	require.NoError(t, err)

	at := func(t time.Time) {
		select {
		case <-time.After(time.Until(t)):
		case <-ctx.Done():
		}
	}
	at(fireAt.Add(-1200 * time.Millisecond))
	cancelled := time.Now()
	_, err = p.Cancel(ctx, "near", "cron", "no longer wanted")
	require.NoError(t, err)
	at(fireAt.Add(2*time.Second - 1200*time.Millisecond))
	_, err = p.Pause(ctx, "near", "paused")
	require.NoError(t, err)
	at(fireAt.Add(4*time.Second - 1200*time.Millisecond))
	_, err = p.Schedule(ctx, oneShot("updated", fireAt.Add(4*time.Second), updated.URL))
	require.NoError(t, err)

	waitFor(t, 30*time.Second, "the updated job's call to its new target", func() bool { return len(updated.calls()) == 1 })
	at(fireAt.Add(6 * time.Second)) // every fire's time has passed
	for _, c := range old.calls() {
		switch c.path {
		case "/cron":
			require.True(t, c.at.Before(cancelled), "the cron job was called after its cancel (at %s)", c.at)
		default:
			require.Failf(t, "an old target was called", "%s at %s", c.path, c.at)
		}
	}
	require.Equal(t, "near/updated/1", updated.calls()[0].header.Get("Idempotency-Key"), "the same occurrence")
	require.GreaterOrEqual(t, d.Stats().Dropped, int64(3), "three early due events dropped")
}
