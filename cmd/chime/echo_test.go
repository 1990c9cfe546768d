package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEchoPrintsAndVerifies: chime echo answers, prints each request and
// checks its Standard Webhooks signature; --fail 1 answers 500.
func TestEchoPrintsAndVerifies(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		name   string
		fail   string
		sig    string
		status int
		want   string
	}{
		{"signed", "0", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", 200, "signature: ok"},
		{"forged", "0", "v1,AAAA", 200, "signature: invalid"},
		{"failing", "1", "", 500, "→ 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			out := &syncBuffer{}
			done := make(chan error, 1)
			// Port 0, and the address echo prints: a port picked free
			// beforehand was taken by a parallel test once.
			go func() {
				done <- runEcho(ctx, []string{"--addr", "127.0.0.1:0", "--secret", secret, "--fail", tc.fail}, out, out)
			}()
			t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
			var addr string
			require.Eventually(t, func() bool {
				_, rest, ok := strings.Cut(out.String(), "listening on http://")
				addr, _, _ = strings.Cut(rest, "/")
				return ok && addr != ""
			}, 10*time.Second, 10*time.Millisecond)
			var res *http.Response
			require.Eventually(t, func() bool {
				req, _ := http.NewRequest("POST", "http://"+addr+"/hook", strings.NewReader(`{"test": 2432232314}`))
				req.Header.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
				req.Header.Set("webhook-timestamp", strconv.Itoa(1614265330))
				req.Header.Set("webhook-signature", tc.sig)
				var err error
				res, err = http.DefaultClient.Do(req)
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			res.Body.Close()
			require.Equal(t, tc.status, res.StatusCode)
			require.Eventually(t, func() bool { return strings.Contains(out.String(), tc.want) }, 5*time.Second, 10*time.Millisecond, out.String())
			require.Contains(t, out.String(), "POST /hook")
		})
	}
}
