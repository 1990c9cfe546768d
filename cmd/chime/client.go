package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const clientUsage = `chime client: call the chime HTTP API.

Usage:
  chime client [--url URL] [--token TOKEN] METHOD PATH [BODY|-]
  chime client [--url URL] [--token TOKEN] SHORTCUT ARGS...

Shortcuts:
  ns-put NS [JSON]          PUT /v1/namespaces/NS (JSON defaults to {})
  ns-get NS                 GET /v1/namespaces/NS
  key NS                    POST /v1/namespaces/NS/keys
  schedule NS JSON          POST /v1/namespaces/NS/jobs
  job NS ID                 GET /v1/namespaces/NS/jobs/ID
  cancel NS ID              DELETE /v1/namespaces/NS/jobs/ID
  pause NS ID | resume NS ID
  breaker NS                GET /v1/namespaces/NS/breaker
  stats NS                  GET /v1/namespaces/NS/stats

URL defaults to $CHIME_API_URL, else http://127.0.0.1:8080. TOKEN defaults
to $CHIME_TOKEN, else $CHIME_ADMIN_TOKEN, else ./.chime/admin-token (what
chime dev wrote). BODY "-" reads standard input. Problems (RFC 9457) are
printed and make the exit status 1.
`

// runClient is `chime client`: a thin HTTP client for the common calls.
func runClient(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	base := getenv("CHIME_API_URL")
	token := getenv("CHIME_TOKEN")
	if token == "" {
		token = getenv("CHIME_ADMIN_TOKEN")
	}
	for len(args) >= 2 && strings.HasPrefix(args[0], "--") {
		switch args[0] {
		case "--url":
			base = args[1]
		case "--token":
			token = args[1]
		default:
			fmt.Fprintf(stderr, "chime client: unknown flag %s\n\n%s", args[0], clientUsage)
			return 2
		}
		args = args[2:]
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	if token == "" {
		if raw, err := os.ReadFile(filepath.Join(".chime", "admin-token")); err == nil {
			token = strings.TrimSpace(string(raw))
		}
	}
	method, path, body, err := clientRequest(args)
	if err != nil {
		fmt.Fprintf(stderr, "chime client: %v\n\n%s", err, clientUsage)
		return 2
	}
	if body == "-" {
		raw, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "chime client: reading standard input:", err)
			return 1
		}
		body = string(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(stderr, "chime client:", err)
		return 2
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "chime client: %s %s: %v (is chime running? set --url or CHIME_API_URL)\n", method, path, err)
		return 1
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		raw = append(pretty.Bytes(), '\n')
	}
	if res.StatusCode >= 400 {
		fmt.Fprintf(stderr, "%s %s: %s\n", method, path, res.Status)
		_, _ = stderr.Write(raw)
		return 1
	}
	_, _ = stdout.Write(raw)
	return 0
}

// clientRequest turns the arguments into a request.
func clientRequest(args []string) (method, path, body string, err error) {
	need := func(n int) error {
		if len(args) < n+1 {
			return fmt.Errorf("%s needs %d argument(s)", args[0], n)
		}
		return nil
	}
	if len(args) == 0 {
		return "", "", "", fmt.Errorf("nothing to call")
	}
	ns := func() string { return "/v1/namespaces/" + args[1] }
	switch args[0] {
	case "ns-put":
		if err := need(1); err != nil {
			return "", "", "", err
		}
		body = "{}"
		if len(args) > 2 {
			body = args[2]
		}
		return "PUT", ns(), body, nil
	case "ns-get", "key", "breaker", "stats":
		if err := need(1); err != nil {
			return "", "", "", err
		}
		switch args[0] {
		case "key":
			return "POST", ns() + "/keys", "", nil
		case "breaker":
			return "GET", ns() + "/breaker", "", nil
		case "stats":
			return "GET", ns() + "/stats", "", nil
		}
		return "GET", ns(), "", nil
	case "schedule":
		if err := need(2); err != nil {
			return "", "", "", err
		}
		return "POST", ns() + "/jobs", args[2], nil
	case "job", "cancel", "pause", "resume":
		if err := need(2); err != nil {
			return "", "", "", err
		}
		p := ns() + "/jobs/" + args[2]
		switch args[0] {
		case "cancel":
			return "DELETE", p, "", nil
		case "pause", "resume":
			return "POST", p + "/" + args[0], "", nil
		}
		return "GET", p, "", nil
	}
	m := strings.ToUpper(args[0])
	switch m {
	case "GET", "POST", "PUT", "DELETE", "PATCH":
	default:
		return "", "", "", fmt.Errorf("unknown shortcut or method %q", args[0])
	}
	if len(args) < 2 || !strings.HasPrefix(args[1], "/") {
		return "", "", "", fmt.Errorf("%s needs a PATH starting with /", m)
	}
	if len(args) > 2 {
		body = args[2]
	}
	return m, args[1], body, nil
}
