package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chime-sched/chime/dispatcher"
)

// DefaultEchoAddr is where `chime echo` listens unless told otherwise: the
// callback URL of the README's first job.
const DefaultEchoAddr = "127.0.0.1:9999"

// echoMaxBody bounds the body echo reads and prints.
const (
	echoMaxBody   = 1 << 20
	echoPrintBody = 512
)

// runEcho is `chime echo`: a callback receiver for trying chime out. It
// prints each request it gets, checks its Standard Webhooks signature when
// given the namespace's signing secret, and answers 200 (or, with --fail,
// some requests 500, to watch retries and the breaker).
func runEcho(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chime echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", DefaultEchoAddr, "`host:port` to listen on")
	secret := fs.String("secret", "", "the namespace's signing `secret` (whsec_...): check each request's webhook-signature")
	fail := fs.Float64("fail", 0, "`fraction` of requests (0 to 1) answered 500")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fail < 0 || *fail > 1 {
		return fmt.Errorf("--fail %g must be from 0 to 1", *fail)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	fmt.Fprintf(stdout, "chime echo: listening on http://%s/ (callbacks print here; Ctrl-C stops)\n", ln.Addr())
	var mu sync.Mutex // one request's lines together
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, echoMaxBody))
		status := http.StatusOK
		if *fail > 0 && rand.Float64() < *fail {
			status = http.StatusInternalServerError
		}
		sig := ""
		if *secret != "" {
			sig = "  signature: invalid"
			if dispatcher.VerifySignature(*secret, r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body) {
				sig = "  signature: ok"
			}
		}
		printed := string(body)
		if len(printed) > echoPrintBody {
			printed = printed[:echoPrintBody] + "…"
		}
		mu.Lock()
		fmt.Fprintf(stdout, "%s %s %s → %d  webhook-id: %s%s\n", time.Now().Format("15:04:05.000"), r.Method, r.URL.RequestURI(), status, r.Header.Get("webhook-id"), sig)
		if ct := r.Header.Get("Content-Type"); ct != "" || printed != "" {
			fmt.Fprintf(stdout, "  %s %s\n", ct, strings.TrimSpace(printed))
		}
		mu.Unlock()
		w.WriteHeader(status)
	})}
	return serveHTTP(ctx, srv, ln)
}
