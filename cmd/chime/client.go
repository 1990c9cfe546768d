package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chime-sched/chime/infra/config"
)

// clientSynopsis is the client's one-line usage, under a usage error that
// names no command.
const clientSynopsis = "chime client [--url URL] [--token TOKEN] [--state-dir DIR] [-o table|json] [--utc] [--insecure-http] COMMAND ARGS..."

// clientUsage is the help text, and the one place each command's arguments
// are written: a usage error quotes the command's line (commandUsage), and
// a test holds the lines to clientCommands. A line is the usage, then two
// or more spaces and what it does; " | " separates commands on one line.
const clientUsage = `chime client: call the chime HTTP API.

Usage: ` + clientSynopsis + `

These flags go before the command or after its arguments:
  --url URL        $CHIME_API_URL, else http://127.0.0.1:8080; plain http only to
                   a loopback address (127.0.0.1, ::1, localhost) unless --insecure-http
  --token TOKEN    else $CHIME_TOKEN, else $CHIME_ADMIN_TOKEN, else the admin-token
                   file in --state-dir ($CHIME_STATE_DIR, else ./.chime: what chime dev wrote)
  -o table|json    a table or "field value" lines (the default), or the API's JSON
  --utc            times in UTC; the default is local time (both show the zone)

Any route:
  METHOD PATH [BODY|-]                GET, POST, PUT, DELETE or PATCH; BODY "-" reads standard input
Namespaces (admin token):
  namespaces [--limit N] [--cursor C]  list, with breaker states
  ns|ns-get NS | ns-put NS [JSON]     show | create or replace (JSON defaults to {})
  keys NS | key NS                    list keys | create one (shown once)
  revoke-key NS ID                    revoke one
  rotate-secret NS [--overlap 24h]    new signing secret; the old one signs beside it meanwhile
Jobs:
  jobs NS [--state S] [--label K:V]... [--limit N] [--cursor C]
                                      list, newest first; each --label must match
  job NS ID                           show, with fires in progress
  schedule NS JSON|-                  create
  preview SCHEDULE [--count N] [--ns NS --id ID] [--from T]   the next fires of a schedule (JSON,
                                      as a job's "schedule"), creating nothing; --ns and --id
                                      for a schedule with jitter
  trigger|pause|resume|cancel NS ID
  backfill NS ID [--from T] [--to T]  fire now the occurrences of the past range [from, to); both needed
Dead letters:
  dead-letters NS [--limit N] [--job-prefix P] [--from T] [--to T] [--replayed true|false]
  replay NS ID                        replay one (once: a repeat says when it was)
  replay-all NS [--job-prefix P] [--from T] [--to T] [--limit N]   those not replayed yet
Breaker and stats:
  breaker NS | history NS [--from T] [--to T]
  force NS open|closed|auto [--note N] | reset NS [--note N]   (admin token)
  stats NS [--from T] [--to T] [--step D]

Problems (RFC 9457) are printed and make the exit status 1; a command line
the client cannot use makes it 2.
`

// clientCall is one API request the CLI makes, and how to print its answer.
type clientCall struct {
	method, path, body string
	// view prints the decoded answer unless -o json; nil prints it as
	// fields (fieldsTable).
	view func(w io.Writer, v map[string]any)
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
			for _, v := range strings.Split(v, repeatSep) {
				q.Add(strings.ReplaceAll(n, "-", "_"), v)
			}
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
	"jobs": {1, []string{"state", "label", "limit", "cursor"}, func(p []string, f map[string]string) (clientCall, error) {
		return clientCall{"GET", nsPath(p[0], "/jobs") + query(f, "state", "label", "limit", "cursor"), "", tableOf("jobs",
			col("ID", "id"), col("STATE", "state"), col("NEXT FIRE", "next_fire_at"), col("FIRES", "fires"), col("LAST OUTCOME", "last_outcome.result"), col("LABELS", "labels"), col("CREATED", "created_at"))}, nil
	}},
	"job": {2, nil, get(func(p []string) string { return nsPath(p[0], "/jobs/", url.PathEscape(p[1])) }, jobAnswer)},
	"schedule": {2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"POST", nsPath(p[0], "/jobs"), p[1], jobAnswer}, nil
	}},
	"preview": {1, []string{"count", "ns", "id", "from"}, func(p []string, f map[string]string) (clientCall, error) {
		if !json.Valid([]byte(p[0])) {
			return clientCall{}, fmt.Errorf("preview: %q is not a JSON schedule; write e.g. '{\"cron\": \"0 9 * * 1-5\", \"timezone\": \"Europe/Berlin\"}'", p[0])
		}
		m := map[string]any{"schedule": json.RawMessage(p[0])}
		for flag, field := range map[string]string{"ns": "namespace", "id": "id", "from": "from"} {
			if v := f[flag]; v != "" {
				m[field] = v
			}
		}
		if v := f["count"]; v != "" {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil {
				return clientCall{}, fmt.Errorf("--count %q is not a number", v)
			}
			m["count"] = n
		}
		b, _ := json.Marshal(m)
		return clientCall{"POST", "/v1/schedules:preview", string(b), firesTable("fires")}, nil
	}},
	"backfill": {2, []string{"from", "to"}, func(p []string, f map[string]string) (clientCall, error) {
		if f["from"] == "" || f["to"] == "" {
			return clientCall{}, fmt.Errorf("backfill: give --from and --to (RFC 3339 times; the range [from, to) in the past)")
		}
		return clientCall{"POST", nsPath(p[0], "/jobs/", url.PathEscape(p[1]), "/backfill"), jsonBody(map[string]string{"from": f["from"], "to": f["to"]}), fieldsTable}, nil
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
		return clientCall{"GET", nsPath(p[0], "/stats") + query(f, "from", "to", "step"), "", statsAnswer}, nil
	}},
}

func get(path func([]string) string, table func(io.Writer, map[string]any)) func([]string, map[string]string) (clientCall, error) {
	return func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{"GET", path(p), "", table}, nil
	}
}

func jobAction(method, suffix string) clientCommand {
	return clientCommand{2, nil, func(p []string, _ map[string]string) (clientCall, error) {
		return clientCall{method, nsPath(p[0], "/jobs/", url.PathEscape(p[1]), suffix), "", jobAnswer}, nil
	}}
}

// clientRequest turns the arguments after the global flags into a call.
// Its errors are usage errors: runClient prints them with the command's
// usage line (usageLine).
func clientRequest(args []string) (clientCall, error) {
	name := args[0]
	if c, ok := clientCommands[name]; ok {
		pos, flags, err := splitFlags(args[1:], c.flags)
		if err != nil {
			return clientCall{}, fmt.Errorf("%s: %w", name, err)
		}
		// ns-put takes an optional JSON body.
		switch {
		case name == "ns-put" && len(pos) == 2:
			call, _ := c.build(pos, flags)
			call.body = pos[1]
			return call, nil
		case len(pos) < c.args:
			return clientCall{}, fmt.Errorf("%s: %s", name, missingArgs(name, len(pos), c.args))
		case len(pos) > c.args:
			return clientCall{}, fmt.Errorf("%s: unexpected argument %q", name, pos[c.args])
		}
		call, err := c.build(pos, flags)
		if err != nil {
			return clientCall{}, fmt.Errorf("%s: %w", name, err)
		}
		return call, nil
	}
	m := strings.ToUpper(name)
	if !isMethod(m) {
		return clientCall{}, fmt.Errorf("unknown command or method %q", name)
	}
	if len(args) < 2 || !strings.HasPrefix(args[1], "/") {
		return clientCall{}, fmt.Errorf("%s needs a PATH starting with /", m)
	}
	for _, a := range args[2:] {
		if strings.HasPrefix(a, "-") && a != "-" {
			return clientCall{}, fmt.Errorf("%s: unknown flag %s (put query parameters in PATH)", m, a)
		}
	}
	if len(args) > 3 {
		return clientCall{}, fmt.Errorf("%s: unexpected argument %q (it takes PATH and at most one BODY; quote a BODY with spaces)", m, args[3])
	}
	call := clientCall{method: m, path: args[1]}
	if len(args) > 2 {
		call.body = args[2]
	}
	return call, nil
}

// takeClientFlags sets in fs the client's own flags (-o, --utc, --url, ...)
// that args, a command and its arguments, carries after the command, and
// returns args without them: `jobs acme -o json` is `-o json jobs acme`.
// A command's own flag keeps its value, even one that starts with "-".
func takeClientFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	own := clientCommands[args[0]].flags
	kept := args[:1:1]
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		switch {
		case !strings.HasPrefix(a, "-") || a == "-":
		case slices.Contains(own, name):
			if !hasValue && i+1 < len(args) {
				kept = append(kept, a)
				i++
				a = args[i]
			}
		case f != nil:
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				if !hasValue {
					value = "true"
				}
			} else if !hasValue {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("flag %s needs a value", a)
				}
				i++
				value = args[i]
			}
			if err := fs.Set(name, value); err != nil {
				return nil, fmt.Errorf("flag %s: %w", a, err)
			}
			continue
		}
		kept = append(kept, a)
	}
	return kept, nil
}

func isMethod(name string) bool {
	return slices.Contains([]string{"GET", "POST", "PUT", "DELETE", "PATCH"}, strings.ToUpper(name))
}

// usageGap separates a help line's usage from what it does.
var usageGap = regexp.MustCompile(` {2,}`)

// commandUsage is name's usage as clientUsage writes it ("jobs NS [--state
// S] [--limit N] [--cursor C]"), or "" if it has none.
func commandUsage(name string) string {
	for _, line := range strings.Split(clientUsage, "\n") {
		// Commands are indented two spaces; flags and wrapped lines are not
		// commands.
		if len(line) < 3 || line[:2] != "  " || line[2] == ' ' || line[2] == '-' {
			continue
		}
		syntax := usageGap.Split(strings.TrimSpace(line), 2)[0]
		for _, alt := range strings.Split(syntax, " | ") {
			names, rest, _ := strings.Cut(alt, " ")
			if slices.Contains(strings.Split(names, "|"), name) {
				return strings.TrimSpace(name + " " + rest)
			}
		}
	}
	return ""
}

// usageLine is the one line printed under a usage error: the usage of the
// command args name, else the client's.
func usageLine(args []string) string {
	if len(args) > 0 {
		if u := commandUsage(args[0]); u != "" {
			return "chime client " + u
		}
		if isMethod(args[0]) {
			return "chime client " + commandUsage("METHOD")
		}
	}
	return clientSynopsis + ` ("chime client" alone lists the commands)`
}

// requiredArgs are a usage's positional arguments outside brackets:
// "schedule NS JSON|-" has NS and JSON|-.
func requiredArgs(usage string) []string {
	var req []string
	depth := 0
	for _, w := range strings.Fields(usage)[1:] {
		if depth == 0 && !strings.HasPrefix(w, "[") {
			req = append(req, w)
		}
		depth += strings.Count(w, "[") - strings.Count(w, "]")
	}
	return req
}

// missingArgs says which arguments a command line lacks, by the names its
// usage gives them.
func missingArgs(name string, got, want int) string {
	req := requiredArgs(commandUsage(name))
	if len(req) != want || got >= want {
		return fmt.Sprintf("needs %d argument(s), got %d", want, got)
	}
	return "missing " + strings.Join(req[got:], " ")
}

// repeatable are the flags given once per value (--label a:1 --label
// b:2); splitFlags joins their values with repeatSep, a byte no command
// line argument can hold.
var repeatable = []string{"label"}

const repeatSep = "\x00"

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
		if prev, ok := flags[name]; ok && slices.Contains(repeatable, name) {
			value = prev + repeatSep + value
		}
		flags[name] = value
	}
	return pos, flags, nil
}

// clientToken finds the token and says where it came from (or where it
// looked). flagToken is nil when --token was not given. A token given
// empty is an error, not a reason to look further: falling back would
// send the admin token where the user meant a narrower one.
func clientToken(flagToken *string, stateDir string, lookupEnv func(string) (string, bool)) (token, source string, err error) {
	if flagToken != nil {
		if strings.TrimSpace(*flagToken) == "" {
			return "", "", errors.New("--token is empty: pass a token, or leave --token out to use $CHIME_TOKEN, $CHIME_ADMIN_TOKEN or the admin-token file")
		}
		return *flagToken, "--token", nil
	}
	for _, env := range []struct{ name, next string }{
		{"CHIME_TOKEN", "$CHIME_ADMIN_TOKEN or the admin-token file"},
		{"CHIME_ADMIN_TOKEN", "the admin-token file"},
	} {
		v, set := lookupEnv(env.name)
		if !set {
			continue
		}
		if strings.TrimSpace(v) == "" {
			return "", "", fmt.Errorf("$%s is set but empty: set it to a token, or unset it to use %s", env.name, env.next)
		}
		return v, "$" + env.name, nil
	}
	if stateDir == "" {
		stateDir, _ = lookupEnv("CHIME_STATE_DIR")
	}
	if stateDir == "" {
		stateDir = config.DefaultStateDir
	}
	file := filepath.Join(stateDir, config.AdminTokenFile)
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("no token: looked at --token, $CHIME_TOKEN, $CHIME_ADMIN_TOKEN and %s (%v); pass --token, or --state-dir where chime dev keeps its state", file, errors.Unwrap(err))
	}
	token = strings.TrimSpace(string(raw))
	if token == "" {
		return "", "", fmt.Errorf("%s is empty: pass --token, or restart chime dev to write a new admin token", file)
	}
	return token, file, nil
}

// apiURL checks --url. Plain http goes only to a loopback address unless
// insecureHTTP: anywhere else the token would cross the network in the
// clear.
func apiURL(raw string, insecureHTTP bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http(s)://host[:port]", raw)
	}
	if u.Scheme == "http" && !insecureHTTP && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("--url %s: refusing to send the token over plain http to %s, which is not a loopback address; use https, or pass --insecure-http if the network is trusted", raw, u.Host)
	}
	return u, nil
}

// isLoopback reports whether host names this machine: a loopback IP, or
// localhost (which resolves to one, RFC 6761).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errOtherOrigin stops a redirect away from --url's origin.
var errOtherOrigin = errors.New("not following a redirect to another origin with the token")

// apiClient follows redirects only within the origin (scheme, host and
// port) of the first request: net/http keeps the Authorization header on
// a redirect to the same host name, whatever its port or scheme.
func apiClient() *http.Client {
	return &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if from := origin(via[0].URL); origin(req.URL) != from {
			return fmt.Errorf("redirected to %s, outside %s: %w (point --url at the API itself)", origin(req.URL), from, errOtherOrigin)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// origin is u's scheme, host and port, the port filled in from the scheme.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// runClient is `chime client`.
func runClient(ctx context.Context, p proc) int {
	args, lookupEnv, stdin, stdout, stderr := p.args, p.lookupEnv, p.stdin, p.stdout, p.stderr
	fs := flag.NewFlagSet("chime client", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	envURL, _ := lookupEnv("CHIME_API_URL")
	base := fs.String("url", envURL, "")
	flagToken := fs.String("token", "", "")
	stateDir := fs.String("state-dir", "", "")
	output := fs.String("o", "table", "")
	fs.StringVar(output, "output", "table", "")
	utc := fs.Bool("utc", false, "")
	insecureHTTP := fs.Bool("insecure-http", false, "")
	usageError := func(err error, usage string) int {
		fmt.Fprintf(stderr, "chime client: %v\nusage: %s\n", err, usage)
		return 2
	}
	err := fs.Parse(args)
	var cmdArgs []string
	if err == nil && fs.NArg() > 0 {
		cmdArgs, err = takeClientFlags(fs, fs.Args())
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, clientUsage)
		return 0
	case err != nil:
		return usageError(err, clientSynopsis)
	case *output != "table" && *output != "json":
		return usageError(fmt.Errorf("-o %q: use table or json", *output), clientSynopsis)
	case len(cmdArgs) == 0:
		fmt.Fprint(stderr, clientUsage)
		return 2
	}
	format := answerFormat{json: *output == "json", loc: time.Local}
	if *utc {
		format.loc = time.UTC
	}
	call, err := clientRequest(cmdArgs)
	if err != nil {
		return usageError(err, usageLine(cmdArgs))
	}
	if *base == "" {
		*base = "http://" + config.Default().APIAddr
	}
	api, err := apiURL(*base, *insecureHTTP)
	if err != nil {
		fmt.Fprintln(stderr, "chime client:", err)
		return 2
	}
	var given *string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "token" {
			given = flagToken
		}
	})
	token, source, err := clientToken(given, *stateDir, lookupEnv)
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
	req, err := http.NewRequestWithContext(ctx, call.method, strings.TrimSuffix(api.String(), "/")+call.path, strings.NewReader(call.body))
	if err != nil {
		fmt.Fprintln(stderr, "chime client:", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if call.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := apiClient().Do(req)
	if err != nil {
		hint := " (is chime running? set --url or CHIME_API_URL)"
		if errors.Is(err, errOtherOrigin) {
			hint = ""
		}
		fmt.Fprintf(stderr, "chime client: %s %s: %v%s\n", call.method, call.path, err, hint)
		return 1
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 400 {
		fmt.Fprintf(stderr, "%s %s: %s\n", call.method, call.path, res.Status)
		format.print(stderr, raw, fieldsTable)
		if res.StatusCode == http.StatusUnauthorized {
			fmt.Fprintf(stderr, "(the token came from %s)\n", source)
		}
		return 1
	}
	if len(bytes.TrimSpace(raw)) == 0 && !format.json {
		// An answer without a body (204): say it worked.
		fmt.Fprintln(stdout, res.Status)
		return 0
	}
	format.print(stdout, raw, call.view)
	return 0
}
