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
	"unicode"
	"unicode/utf8"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/schema"
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
	secret := fs.String("secret", "", "the namespace's signing `secret` (whsec_..., from chime client rotate-secret NS): check each request's webhook-signature")
	fail := fs.Float64("fail", 0, "`fraction` of requests (0 to 1) answered 500")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fail < 0 || *fail > 1 {
		return fmt.Errorf("--fail %g must be from 0 to 1", *fail)
	}
	if *secret != "" {
		// Checked as the dispatcher signs with it: a mistyped secret would
		// otherwise mark every callback "signature: invalid".
		if _, err := schema.SigningKey(*secret); err != nil {
			return fmt.Errorf("-secret: %w; pass the namespace's secret as chime client rotate-secret NS printed it", err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	fmt.Fprintf(stdout, "chime echo: listening on http://%s/ (callbacks print here; Ctrl-C stops)\n", ln.Addr())
	if *secret == "" {
		// Echo cannot learn the secret: the API shows it once, when made.
		fmt.Fprintln(stdout, "chime echo: signatures are not checked: pass -secret whsec_... (chime signs the callbacks of a namespace with a signing secret only; chime client rotate-secret NS makes one and prints it)")
	}
	var mu sync.Mutex // one request's lines together
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, echoMaxBody))
		status := http.StatusOK
		if *fail > 0 && rand.Float64() < *fail {
			status = http.StatusInternalServerError
		}
		mu.Lock()
		fmt.Fprint(stdout, echoLines(time.Now(), r, status, body, *secret))
		mu.Unlock()
		w.WriteHeader(status)
	})}
	return serveHTTP(ctx, srv, ln)
}

// echoLines is what echo prints for one request: when, what, the answer,
// the fire's id and the signature, then the content type and body.
// Everything from the request goes through printable, since it comes from
// whoever can reach the port.
func echoLines(now time.Time, r *http.Request, status int, body []byte, secret string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s → %d", now.Format("15:04:05.000"), printable(r.Method), printable(r.RequestURI), status)
	// chime sends the fire's id as Idempotency-Key always, and as
	// webhook-id too when it signs.
	for _, h := range []string{dispatcher.HeaderIdempotencyKey, "webhook-id"} {
		if id := r.Header.Get(h); id != "" {
			fmt.Fprintf(&b, "  %s: %s", strings.ToLower(h), printable(id))
			break
		}
	}
	fmt.Fprintf(&b, "  %s\n", signatureNote(r.Header, body, secret))
	printed := body
	if len(printed) > echoPrintBody {
		cut := echoPrintBody
		for cut > 0 && !utf8.RuneStart(printed[cut]) {
			cut-- // not inside a character
		}
		printed = printed[:cut]
	}
	shown := printable(strings.TrimSpace(string(printed)))
	if len(printed) < len(body) {
		shown += "…"
	}
	if ct := r.Header.Get("Content-Type"); ct != "" || shown != "" {
		fmt.Fprintf(&b, "  %s %s\n", printable(ct), shown)
	}
	return b.String()
}

// signatureNote says what echo knows of a request's Standard Webhooks
// signature.
func signatureNote(h http.Header, body []byte, secret string) string {
	sig := h.Get("webhook-signature")
	switch {
	case sig == "" && secret == "":
		return "unsigned (the namespace has no signing secret)"
	case sig == "":
		return "signature: missing (-secret expects one)"
	case secret == "":
		return "signature: not checked (pass -secret)"
	case dispatcher.VerifySignature(secret, h.Get("webhook-id"), h.Get("webhook-timestamp"), sig, body):
		return "signature: ok"
	}
	return "signature: invalid"
}

// printable escapes what a terminal would act on rather than show:
// control characters (\x1b starts an escape sequence), invalid UTF-8,
// and invisible or direction-changing characters (\u202e). Newlines are
// escaped too, so a body cannot print a line that looks like echo's own.
// Backslashes stay as they are: JSON bodies are full of them.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}
