package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEchoPrintsAndVerifies: chime echo answers, prints each request with
// the fire's id, says what it knows of the signature, escapes what a
// terminal would act on; --fail 1 answers 500.
func TestEchoPrintsAndVerifies(t *testing.T) {
	t.Parallel()
	// The Standard Webhooks spec's example.
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	signed := map[string]string{
		"webhook-id":        "msg_p5jXN8AQM9LWM0D4loKWxJek",
		"webhook-timestamp": "1614265330",
		"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	}
	const signedBody = `{"test": 2432232314}`
	for _, tc := range []struct {
		name    string
		args    []string
		headers map[string]string
		body    string
		status  int
		want    []string
		notWant []string
	}{
		{name: "signed", args: []string{"--secret", secret}, headers: signed, body: signedBody, status: 200,
			want: []string{"webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek  signature: ok"}, notWant: []string{"not checked"}},
		{name: "forged", args: []string{"--secret", secret},
			headers: map[string]string{"webhook-id": "msg_1", "webhook-timestamp": "1614265330", "webhook-signature": "v1,AAAA"},
			body:    signedBody, status: 200, want: []string{"signature: invalid"}},
		{name: "failing", args: []string{"--fail", "1"}, status: 500, want: []string{"→ 500"}},
		// What chime sends for a namespace without a signing secret: the
		// id in Idempotency-Key, no webhook-* headers.
		{name: "unsigned", headers: map[string]string{"Idempotency-Key": "acme/tick/3"}, body: `{"hello":"chime"}`, status: 200,
			want: []string{
				"signatures are not checked: pass -secret whsec_... (chime signs the callbacks of a namespace with a signing secret only; chime client rotate-secret NS makes one and prints it)",
				"→ 200  idempotency-key: acme/tick/3  unsigned (the namespace has no signing secret)",
			},
			notWant: []string{"webhook-id: "}},
		{name: "signed, no secret", headers: signed, body: signedBody, status: 200,
			want: []string{"webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek  signature: not checked (pass -secret)"}},
		{name: "unsigned, secret expected", args: []string{"--secret", secret}, headers: map[string]string{"Idempotency-Key": "acme/tick/3"}, status: 200,
			want: []string{"idempotency-key: acme/tick/3  signature: missing (-secret expects one)"}},
		// A body clears the screen, sets the window title, rings, flips
		// the text's direction and forges a line of echo's own; a header
		// carries a C1 CSI. All print escaped, printable UTF-8 as it is.
		{name: "escapes", headers: map[string]string{"Idempotency-Key": "a\u009b31mb", "Content-Type": "text/plain; charset=utf-8"},
			body:   "\x1b[2J\x1b]0;pwned\x07 héllo \u202e\r\n12:00:00.000 POST /hook → 200  signature: ok\xff",
			status: 200,
			want: []string{
				`idempotency-key: a\u009b31mb  unsigned`,
				`  text/plain; charset=utf-8 \x1b[2J\x1b]0;pwned\x07 héllo \u202e\r\n12:00:00.000 POST /hook → 200  signature: ok\xff` + "\n",
			},
			notWant: []string{"\x1b", "\x07", "\u009b", "\u202e", "\r", "\xff", "\n12:00:00.000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			out := &syncBuffer{}
			done := make(chan error, 1)
			// Port 0, and the address echo prints: a port picked free
			// beforehand was taken by a parallel test once.
			go func() {
				done <- runEcho(ctx, append([]string{"--addr", "127.0.0.1:0"}, tc.args...), out, out)
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
				req, _ := http.NewRequest("POST", "http://"+addr+"/hook", strings.NewReader(tc.body))
				for k, v := range tc.headers {
					req.Header.Set(k, v)
				}
				var err error
				res, err = http.DefaultClient.Do(req)
				return err == nil
			}, 10*time.Second, 20*time.Millisecond)
			res.Body.Close()
			require.Equal(t, tc.status, res.StatusCode)
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "POST /hook") }, 5*time.Second, 10*time.Millisecond, out.String())
			for _, w := range tc.want {
				require.Contains(t, out.String(), w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, out.String(), w)
			}
		})
	}
}

// TestEchoRefusesAMalformedSecret: a secret that cannot be the namespace's
// (the dispatcher could not sign with it) stops echo before it listens.
func TestEchoRefusesAMalformedSecret(t *testing.T) {
	t.Parallel()
	for secret, want := range map[string]string{
		"nonsense":          `-secret: signing secret must start with "whsec_"`,
		"whsec_not base64!": "-secret: signing secret: the part after \"whsec_\" is not valid base64",
		"whsec_c2hvcnQ=":    "-secret: signing secret: key must be 24 to 64 bytes, got 5",
	} {
		var out strings.Builder
		err := runEcho(context.Background(), []string{"-addr", "127.0.0.1:0", "-secret", secret}, &out, io.Discard)
		require.ErrorContains(t, err, want, secret)
		require.ErrorContains(t, err, "chime client rotate-secret NS", secret)
		require.Empty(t, out.String(), "%s: echo did not start", secret)
	}
}
