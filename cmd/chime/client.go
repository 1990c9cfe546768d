package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chime-sched/chime/infra/config"
)

const clientUsage = `chime client: call the chime HTTP API.

Usage:
  chime client [--url URL] [--token TOKEN] [--state-dir DIR] [-o table|json] COMMAND ARGS...
  chime client [flags] METHOD PATH [BODY|-]          any route (GET, POST, PUT, DELETE)

Namespaces (admin token):
  namespaces                          list, with breaker states
  ns NS | ns-put NS [JSON]            show | create or replace (JSON defaults to {})
  keys NS | key NS | revoke-key NS ID list keys | create one (shown once) | revoke one
  rotate-secret NS [--overlap 24h]    new signing secret; the old one signs beside it meanwhile
Jobs:
  jobs NS [--state S] [--limit N] [--cursor C]   list, newest first
  job NS ID                           show, with fires in progress
  schedule NS JSON|-                  create
  trigger|pause|resume|cancel NS ID
Dead letters:
  dead-letters NS [--limit N] [--job-prefix P] [--from T] [--to T] [--replayed true|false]
  replay NS ID                        replay one (once: a repeat says when it was)
  replay-all NS [--job-prefix P] [--from T] [--to T] [--limit N]   those not replayed yet
Breaker and stats:
  breaker NS | history NS [--from T] [--to T]
  force NS open|closed|auto | reset NS (admin token)
  stats NS [--from T] [--to T] [--step D]

URL defaults to $CHIME_API_URL, else http://127.0.0.1:8080. The token is
--token, else $CHIME_TOKEN, else $CHIME_ADMIN_TOKEN, else the admin-token file
in --state-dir ($CHIME_STATE_DIR, else ./.chime: what chime dev wrote). Output
is a table (-o json for the API's JSON). BODY "-" reads standard input.
Problems (RFC 9457) are printed and make the exit status 1.
`

// clientCall is one API request the CLI makes, and how to print its answer.
type clientCall struct {
	method, path, body string
	// table prints the answer; nil prints the JSON.
	table func(w io.Writer, v map[string]any)
}

// clientCommand builds a call from positional arguments and flags.
type clientCommand struct {
	args  int      // positional arguments needed
	flags []string // the flags it takes (each takes a value)
	build func(pos []string, flags map[string]string) (clientCall, error)
}

func nsPath(ns string, rest ...string) string {
	return "/v1/namespaces/" + url.PathEscape(ns) + strings.Join(rest, "")
}

func query(flags map[string]string, names ...string) string {
	q := url.Values{}
	for _, n := range names {
		if v := flags[n]; v != "" {
			q.Set(strings.ReplaceAll(n, "-", "_"), v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func jsonBody(fields map[string]string) string {
	m := map[string]any{}
	for k, v := range fields {
		if v != "" {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

var clientCommands = map[string]clientCommand{
	"namespaces": {0, []string{"limit", "cursor"}, func(_ []string, f map[string]string) (clientCall, error) {
		return clientCall{"GET", "/v1/namespaces" + query(f, "limit", "cursor"), "", tableOf("namespaces",
			col("NAMESPACE", "namespace"), col("BREAKER", "breaker_state"), col("KEYS", "keys"), col("VERSION", "version"), col("UPDATED", "updated_at"))}, nil
	}},
	"ns":     {1, nil, get(func(p []string) string { return nsPath(p[0]) }, nil)},
	"ns-get": {1, nil, get(func(p []string) string { return nsPath(p[0]) }, nil)},
	"ns-put": {1, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"PUT", nsPath(p[0]), "{}", nil}, nil
	}},
	"keys": {1, nil, get(func(p []string) string { return nsPath(p[0], "/keys") }, tableOf("keys", col("ID", "id"), col("CREATED", "created_at")))},
	"key": {1, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/keys"), "", nil}, nil
	}},
	"revoke-key": {2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"DELETE", nsPath(p[0], "/keys/", url.PathEscape(p[1])), "", nil}, nil
	}},
	"rotate-secret": {1, []string{"overlap"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/signing-secret:rotate"), jsonBody(map[string]string{"overlap": f["overlap"]}), nil}, nil
	}},
	"jobs": {1, []string{"state", "limit", "cursor"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"GET", nsPath(p[0], "/jobs") + query(f, "state", "limit", "cursor"), "", tableOf("jobs",
			col("ID", "id"), col("STATE", "state"), col("NEXT FIRE", "next_fire_at"), col("FIRES", "fires"), col("LAST OUTCOME", "last_outcome.result"), col("CREATED", "created_at"))}, nil
	}},
	"job": {2, nil, get(func(p []string) string { return nsPath(p[0], "/jobs/", url.PathEscape(p[1])) }, fieldsTable)},
	"schedule": {2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/jobs"), p[1], fieldsTable}, nil
	}},
	"trigger": jobAction("POST", "/trigger"),
	"pause":   jobAction("POST", "/pause"),
	"resume":  jobAction("POST", "/resume"),
	"cancel":  jobAction("DELETE", ""),
	"dead-letters": {1, []string{"limit", "job-prefix", "from", "to", "before", "replayed"}, func(p []string, f map[string]string) (clientCall, error) {
		f["job-id-prefix"] = f["job-prefix"]
		return clientCall{"GET", nsPath(p[0], "/dead-letters") + query(f, "limit", "job-id-prefix", "from", "to", "before", "replayed"), "", tableOf("dead_letters",
			col("ID", "id"), col("JOB", "job_id"), col("ATTEMPTS", "attempts"), col("AT", "at"), col("REASON", "reason"),
			col("REPLAYED", "replayed_at"), col("REPLAY JOB", "replay_job_id"))}, nil
	}},
	"replay": {2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/dead-letters/", url.PathEscape(p[1]), "/replay"), "", replayAnswer}, nil
	}},
	"replay-all": {1, []string{"job-prefix", "from", "to", "limit"}, func(p []string, f map[string]string) (clientCall, error) {
		m := map[string]any{}
		for k, name := range map[string]string{"job-prefix": "job_id_prefix", "from": "from", "to": "to"} {
			if v := f[k]; v != "" {
				m[name] = v
			}
		}
		if v := f["limit"]; v != "" {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil {
				return clientCall{}, fmt.Errorf("--limit %q is not a number", v)
			}
			m["limit"] = n
		}
		b, _ := json.Marshal(m)
		return clientCall{"POST", nsPath(p[0], "/dead-letters:replay"), string(b), bulkReplayAnswer}, nil
	}},
	"breaker": {1, nil, get(func(p []string) string { return nsPath(p[0], "/breaker") }, fieldsTable)},
	"history": {1, []string{"from", "to"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"GET", nsPath(p[0], "/breaker/history") + query(f, "from", "to"), "", tableOf("transitions",
			col("AT", "at"), col("FROM", "from"), col("TO", "to"), col("TRIPS", "consecutive_trips"), col("REASON", "reason"))}, nil
	}},
	"force": {2, []string{"note"}, func(p []string, f map[string]string) (clientCall, error) {
		mode, ok := map[string]string{"open": "force_open", "closed": "force_closed", "auto": "auto"}[p[1]]
		if !ok {
			return clientCall{}, fmt.Errorf("force takes open, closed or auto, not %q", p[1])
		}
		return clientCall{"PUT", nsPath(p[0], "/breaker"), jsonBody(map[string]string{"mode": mode, "note": f["note"]}), breakerAnswer}, nil
	}},
	"reset": {1, []string{"note"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/breaker/reset"), jsonBody(map[string]string{"note": f["note"]}), breakerAnswer}, nil
	}},
	"stats": {1, []string{"from", "to", "step"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"GET", nsPath(p[0], "/stats") + query(f, "from", "to", "step"), "", tableOf("points",
			col("TIME", "t"), col("REQUESTS", "requests"), col("OK", "successes"), col("FAILED", "failures"), col("EXPIRED", "expired"), col("P50 MS", "p50_ms"), col("P99 MS", "p99_ms"))}, nil
	}},
}

func get(path func([]string) string, table func(io.Writer, map[string]any)) func([]string, map[string]string) (clientCall, error) {
	return func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"GET", path(p), "", table}, nil
	}
}

func jobAction(method, suffix string) clientCommand {
	return clientCommand{2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{method, nsPath(p[0], "/jobs/", url.PathEscape(p[1]), suffix), "", fieldsTable}, nil
	}}
}

// clientRequest turns the arguments after the global flags into a call.
func clientRequest(args []string) (clientCall, error) {
	if len(args) == 0 {
		return clientCall{}, errors.New("nothing to call")
	}
	name := args[0]
	if c, ok := clientCommands[name]; ok {
		pos, flags, err := splitFlags(args[1:], c.flags)
		if err != nil {
			return clientCall{}, fmt.Errorf("%s: %w", name, err)
		}
		// ns-put and schedule take an optional or required JSON body.
		want := c.args
		switch {
		case name == "ns-put" && len(pos) == 2:
			call, _ := c.build(pos, flags)
			call.body = pos[1]
			return call, nil
		case len(pos) != want:
			return clientCall{}, fmt.Errorf("%s needs %d argument(s), got %d", name, want, len(pos))
		}
		return c.build(pos, flags)
	}
	m := strings.ToUpper(name)
	if !slices.Contains([]string{"GET", "POST", "PUT", "DELETE", "PATCH"}, m) {
		return clientCall{}, fmt.Errorf("unknown command or method %q", name)
	}
	if len(args) < 2 || !strings.HasPrefix(args[1], "/") {
		return clientCall{}, fmt.Errorf("%s needs a PATH starting with /", m)
	}
	call := clientCall{method: m, path: args[1]}
	if len(args) > 2 {
		call.body = args[2]
	}
	return call, nil
}

// splitFlags separates "--name value" and "--name=value" (names from
// allowed) from positional arguments, in any order.
func splitFlags(args, allowed []string) (pos []string, flags map[string]string, err error) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return nil, nil, fmt.Errorf("takes no flags, got %s", a)
			}
			return nil, nil, fmt.Errorf("unknown flag %s (it takes --%s)", a, strings.Join(allowed, ", --"))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		flags[name] = value
	}
	return pos, flags, nil
}

// clientToken finds the token and says where it came from (or where it
// looked).
func clientToken(flagToken, stateDir string, getenv func(string) string) (token, source string, err error) {
	if flagToken != "" {
		return flagToken, "--token", nil
	}
	for _, env := range []string{"CHIME_TOKEN", "CHIME_ADMIN_TOKEN"} {
		if v := getenv(env); v != "" {
			return v, "$" + env, nil
		}
	}
	if stateDir == "" {
		stateDir = getenv("CHIME_STATE_DIR")
	}
	if stateDir == "" {
		stateDir = config.DefaultStateDir
	}
	file := filepath.Join(stateDir, config.AdminTokenFile)
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("no token: looked at --token, $CHIME_TOKEN, $CHIME_ADMIN_TOKEN and %s (%v); pass --token, or --state-dir where chime dev keeps its state", file, errors.Unwrap(err))
	}
	return strings.TrimSpace(string(raw)), file, nil
}

// runClient is `chime client`.
func runClient(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chime client", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	base := fs.String("url", getenv("CHIME_API_URL"), "")
	flagToken := fs.String("token", "", "")
	stateDir := fs.String("state-dir", "", "")
	output := fs.String("o", "table", "")
	fs.StringVar(output, "output", "table", "")
	if err := fs.Parse(args); err != nil || (*output != "table" && *output != "json") {
		if err == nil {
			err = fmt.Errorf("-o %q: use table or json", *output)
		}
		fmt.Fprintf(stderr, "chime client: %v\n\n%s", err, clientUsage)
		return 2
	}
	if *base == "" {
		*base = "http://127.0.0.1:8080"
	}
	call, err := clientRequest(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "chime client: %v\n\n%s", err, clientUsage)
		return 2
	}
	token, source, err := clientToken(*flagToken, *stateDir, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "chime client:", err)
		return 1
	}
	if call.body == "-" {
		raw, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "chime client: reading standard input:", err)
			return 1
		}
		call.body = string(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, call.method, strings.TrimSuffix(*base, "/")+call.path, strings.NewReader(call.body))
	if err != nil {
		fmt.Fprintln(stderr, "chime client:", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if call.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "chime client: %s %s: %v (is chime running? set --url or CHIME_API_URL)\n", call.method, call.path, err)
		return 1
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 400 {
		fmt.Fprintf(stderr, "%s %s: %s\n", call.method, call.path, res.Status)
		_, _ = stderr.Write(indentJSON(raw))
		if res.StatusCode == http.StatusUnauthorized {
			fmt.Fprintf(stderr, "(the token came from %s)\n", source)
		}
		return 1
	}
	var v map[string]any
	if *output == "json" || call.table == nil || json.Unmarshal(raw, &v) != nil {
		_, _ = stdout.Write(indentJSON(raw))
		return 0
	}
	call.table(stdout, v)
	return 0
}

func indentJSON(raw []byte) []byte {
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		return append(pretty.Bytes(), '\n')
	}
	return raw
}
