package schema

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// ValidationError says which field of a command is wrong and why.
type ValidationError struct {
	// Field is a path into the command, e.g. "upsert.spec.schedule.cron.expr".
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidateOptions tunes ValidateCommand.
type ValidateOptions struct {
	// AllowReserved accepts job ids under ReservedJobIDPrefix; only the
	// scheduler sets it, and it checks such jobs itself.
	AllowReserved bool
	// Now enables checks that depend on the time (an "at" already past its
	// relevancy window). Zero skips them.
	Now time.Time
}

// Limits on commands. They keep one job from bloating the scheduler's table
// rows and the due topic, and keep callbacks within what the dispatcher can
// send.
const (
	MaxNamespaceLen   = 63
	MaxJobIDLen       = 128
	MaxURLLen         = 2048
	MaxHeaders        = 50
	MaxHeaderNameLen  = 256
	MaxHeaderValueLen = 8 << 10
	// MaxHeadersBytes bounds a target's header names and values together.
	MaxHeadersBytes = 16 << 10
	MaxKafkaKey     = 4 << 10
	MaxHTTPBody     = 64 << 10
	// MaxHTTPTimeout bounds a callback's timeout: the dispatcher gives
	// no call longer. It is below the scheduler's AckTimeout (2 min), so
	// a call still running is never emitted again as unanswered.
	MaxHTTPTimeout     = 60 * time.Second
	MaxKafkaValue      = 512 << 10
	MaxKafkaTopicLen   = 249
	MaxRetryAttempts   = 100
	MaxRetryMultiplier = 10
	MaxRelevancyWindow = 30 * 24 * time.Hour
	MaxLabels          = 32
	MaxLabelKeyLen     = 63
	MaxLabelValueLen   = 256
)

// DefaultHTTPTimeout is a callback's timeout when the job sets none
// (the dispatcher's DefaultTimeout, unless configured otherwise).
const DefaultHTTPTimeout = 10 * time.Second

// What to write instead, for error messages.
const (
	namespaceCharsHelp   = "a-z, 0-9, '_' and '-', starting with a letter or digit"
	jobIDCharsHelp       = "A-Z, a-z, 0-9 and _ . : @ -"
	kafkaTopicCharsHelp  = "A-Z, a-z, 0-9 and . _ -"
	labelKeyCharsHelp    = "A-Z, a-z, 0-9 and _ . - /"
	allowedMethodsHelp   = "GET, POST, PUT, PATCH or DELETE"
	reservedHeadersHelpf = "%q is set by chime on every call (reserved: Idempotency-Key, Host, Content-Length, Transfer-Encoding, Connection, X-Chime-*, Webhook-*); remove it"
)

// ValidateNamespace checks a namespace name: 1 to 63 characters of a-z, 0-9,
// '_' and '-', starting with a letter or digit. It returns a
// *ValidationError for the field "namespace".
func ValidateNamespace(ns string) error {
	if err := checkNamespace("namespace", ns); err != nil {
		return err
	}
	return nil
}

func checkNamespace(field, ns string) *ValidationError {
	if ns == "" {
		return invalid(field, "is empty; give 1-%d characters of %s", MaxNamespaceLen, namespaceCharsHelp)
	}
	if len(ns) > MaxNamespaceLen {
		return invalid(field, "%q is %d bytes long; the limit is %d", ns, len(ns), MaxNamespaceLen)
	}
	for i := 0; i < len(ns); i++ {
		b := ns[i]
		ok := b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || (i > 0 && (b == '_' || b == '-'))
		if !ok {
			return invalid(field, "%q has %q at byte %d; use only %s", ns, b, i, namespaceCharsHelp)
		}
	}
	return nil
}

// ReservedJobIDPrefix starts the ids of chime's own jobs (the breaker's
// cool-off timers). Clients cannot use it, so they cannot cancel or replace
// those jobs.
const ReservedJobIDPrefix = "_chime."

// ValidateJobID checks a job id: 1 to 128 characters of A-Z, a-z, 0-9 and
// _ . : @ -, not starting with ReservedJobIDPrefix. A '/' is refused because
// commands are keyed "namespace/job_id". It returns a *ValidationError for
// the field "job_id".
func ValidateJobID(id string) error {
	if err := checkJobID("job_id", id); err != nil {
		return err
	}
	if err := checkNotReserved("job_id", id); err != nil {
		return err
	}
	return nil
}

func checkNotReserved(field, id string) *ValidationError {
	if strings.HasPrefix(id, ReservedJobIDPrefix) {
		return invalid(field, "%q starts with %q, which is reserved for chime's own jobs; choose another id", id, ReservedJobIDPrefix)
	}
	return nil
}

func checkJobID(field, id string) *ValidationError {
	if id == "" {
		return invalid(field, "is empty; give 1-%d characters of %s", MaxJobIDLen, jobIDCharsHelp)
	}
	if len(id) > MaxJobIDLen {
		return invalid(field, "is %d bytes long; the limit is %d", len(id), MaxJobIDLen)
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !isAlnum(b) && !strings.ContainsRune("_.:@-", rune(b)) {
			if b == '/' {
				return invalid(field, "%q contains '/', which separates namespace and job id in keys; use only %s", id, jobIDCharsHelp)
			}
			return invalid(field, "%q has %q at byte %d; use only %s", id, b, i, jobIDCharsHelp)
		}
	}
	return nil
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// ValidateCommand checks a job command before it is published and again when
// the scheduler receives it. It returns a *ValidationError.
//
// Maps are checked in sorted key order, so the same command always gets the
// same error: the scheduler's rejection events must not depend on map order.
func ValidateCommand(cmd *chimev1.JobCommand, opts ValidateOptions) error {
	if err := validateCommand(cmd, opts); err != nil {
		return err
	}
	return nil
}

// MaxBatchCommands is the most commands one batch carries (the API's
// MaxBatch of creates, and the dispatchers' answers).
const MaxBatchCommands = 1000

// ValidateBatch checks a batch and each command in it, the first error
// naming the command (batch.commands[i].field): what a producer checks
// before it publishes one.
func ValidateBatch(cmd *chimev1.JobCommand, opts ValidateOptions) error {
	if err := validateCommand(cmd, opts); err != nil {
		return err
	}
	for i, sub := range cmd.GetBatch().GetCommands() {
		if err := validateCommand(sub, opts); err != nil {
			err.Field = fmt.Sprintf("batch.commands[%d].%s", i, err.Field)
			return err
		}
	}
	return nil
}

func validateCommand(cmd *chimev1.JobCommand, opts ValidateOptions) *ValidationError {
	if cmd == nil {
		return &ValidationError{Reason: "command is nil"}
	}
	if cmd.GetCommandId() == "" {
		return invalid("command_id", "is empty; give every command a unique id (a UUID, say), so rejections and events can echo it")
	}
	if !utf8.ValidString(cmd.GetCommandId()) {
		return invalid("command_id", "is not valid UTF-8")
	}
	if err := checkNamespace("namespace", cmd.GetNamespace()); err != nil {
		return err
	}
	if !opts.AllowReserved {
		if err := checkNotReserved("job_id", cmd.GetJobId()); err != nil {
			return err
		}
	}
	if err := checkJobID("job_id", cmd.GetJobId()); err != nil {
		return err
	}
	if ts := cmd.GetIssuedAt(); ts != nil {
		if err := checkTimestamp("issued_at", ts); err != nil {
			return err
		}
	}
	switch c := cmd.GetCommand().(type) {
	case *chimev1.JobCommand_Upsert:
		return validateUpsert(cmd, c.Upsert, opts)
	case *chimev1.JobCommand_Cancel, *chimev1.JobCommand_Pause, *chimev1.JobCommand_Resume, *chimev1.JobCommand_Trigger:
		return nil
	case *chimev1.JobCommand_Backfill:
		b := c.Backfill
		for _, f := range []struct {
			name string
			ts   *timestamppb.Timestamp
		}{{"backfill.from", b.GetFrom()}, {"backfill.to", b.GetTo()}} {
			if f.ts == nil {
				return invalid(f.name, "is not set; a backfill covers [from, to)")
			}
			if err := checkTimestamp(f.name, f.ts); err != nil {
				return err
			}
			if err := schedule.InRange(f.ts.AsTime()); err != nil {
				return invalid(f.name, "%v", err)
			}
		}
		if !b.GetFrom().AsTime().Before(b.GetTo().AsTime()) {
			return invalid("backfill.to", "is not after from; a backfill covers [from, to)")
		}
		return nil
	case *chimev1.JobCommand_Batch:
		// The batch's shape; each of its commands is checked on its own
		// (ValidateBatch), so that one bad command is rejected alone.
		cmds := c.Batch.GetCommands()
		switch {
		case len(cmds) == 0:
			return invalid("batch.commands", "is empty; a batch carries 1 to %d commands", MaxBatchCommands)
		case len(cmds) > MaxBatchCommands:
			return invalid("batch.commands", "has %d commands; a batch carries at most %d", len(cmds), MaxBatchCommands)
		case cmds[0].GetNamespace() != cmd.GetNamespace() || cmds[0].GetJobId() != cmd.GetJobId():
			return invalid("batch.commands[0]", "is for %s/%s, not the batch's own %s/%s: a batch is keyed by its first command", cmds[0].GetNamespace(), cmds[0].GetJobId(), cmd.GetNamespace(), cmd.GetJobId())
		}
		for i, sub := range cmds {
			if sub.GetBatch() != nil {
				return invalid(fmt.Sprintf("batch.commands[%d]", i), "is a batch; batches do not nest")
			}
		}
		return nil
	case *chimev1.JobCommand_Retry:
		r := c.Retry
		if err := checkFireSeq("retry.fire_seq", r.GetFireSeq()); err != nil {
			return err
		}
		if r.GetAttempt() < 2 {
			return invalid("retry.attempt", "is %d; a retry is attempt 2 or later (attempt 1 is the first call)", r.GetAttempt())
		}
		return checkNotBefore("retry.not_before", r.GetNotBefore())
	case *chimev1.JobCommand_Defer:
		d := c.Defer
		if err := checkFireSeq("defer.fire_seq", d.GetFireSeq()); err != nil {
			return err
		}
		return checkNotBefore("defer.not_before", d.GetNotBefore())
	case *chimev1.JobCommand_Ack:
		a := c.Ack
		if err := checkFireSeq("ack.fire_seq", a.GetFireSeq()); err != nil {
			return err
		}
		switch res := a.GetResult(); {
		case res == chimev1.AckResult_ACK_RESULT_UNSPECIFIED:
			return invalid("ack.result", "is unspecified; say how the occurrence ended (SUCCEEDED, FAILED, DEAD or EXPIRED)")
		case chimev1.AckResult_name[int32(res)] == "":
			return invalid("ack.result", "%d is not a known result; use SUCCEEDED, FAILED, DEAD or EXPIRED", int32(res))
		}
		return nil
	default:
		return invalid("command", "none is set; set exactly one of upsert, cancel, pause, resume, retry, defer, ack, trigger, batch, backfill")
	}
}

func checkFireSeq(field string, seq uint64) *ValidationError {
	if seq == 0 {
		return invalid(field, "is 0; occurrences are numbered from 1, echo the fire_seq of the due event")
	}
	return nil
}

func checkNotBefore(field string, ts *timestamppb.Timestamp) *ValidationError {
	if ts == nil {
		return invalid(field, "is not set; give the earliest time the occurrence may go out again")
	}
	if err := checkTimestamp(field, ts); err != nil {
		return err
	}
	if err := schedule.InRange(ts.AsTime()); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

func checkTimestamp(field string, ts *timestamppb.Timestamp) *ValidationError {
	if err := ts.CheckValid(); err != nil {
		return invalid(field, "invalid timestamp (%v); it must lie between 0001-01-01 and 9999-12-31 with nanos in [0, 1e9)", err)
	}
	return nil
}

// checkDuration returns d after checking it is valid and fits time.Duration
// (AsDuration would silently saturate).
func checkDuration(field string, d *durationpb.Duration) (time.Duration, *ValidationError) {
	if err := d.CheckValid(); err != nil {
		return 0, invalid(field, "invalid duration (%v); seconds and nanos must share a sign", err)
	}
	if s := d.GetSeconds(); s > math.MaxInt64/int64(time.Second)-1 || s < math.MinInt64/int64(time.Second)+1 {
		return 0, invalid(field, "%ds is out of range", s)
	}
	return d.AsDuration(), nil
}

func validateUpsert(cmd *chimev1.JobCommand, u *chimev1.Upsert, opts ValidateOptions) *ValidationError {
	spec := u.GetSpec()
	if spec == nil {
		return invalid("upsert.spec", "is not set; an upsert carries the job's full spec")
	}
	if spec.GetNamespace() != cmd.GetNamespace() {
		return invalid("upsert.spec.namespace", "is %q but the command's namespace is %q; they must be equal", spec.GetNamespace(), cmd.GetNamespace())
	}
	if spec.GetId() != cmd.GetJobId() {
		return invalid("upsert.spec.id", "is %q but the command's job_id is %q; they must be equal", spec.GetId(), cmd.GetJobId())
	}

	if spec.GetSchedule() == nil {
		return invalid("upsert.spec.schedule", "is not set; set exactly one of at, every, cron")
	}
	sched, err := schedule.Compile(spec.GetSchedule())
	if err != nil {
		var se *schedule.Error
		if errors.As(err, &se) {
			field := "upsert.spec.schedule"
			if se.Field != "" {
				field += "." + se.Field
			}
			return &ValidationError{Field: field, Reason: se.Reason}
		}
		return invalid("upsert.spec.schedule", "%v", err)
	}

	if err := validateTarget("upsert.spec.target", spec.GetTarget()); err != nil {
		return err
	}
	if r := spec.GetRetry(); r != nil {
		if err := validateRetry("upsert.spec.retry", r); err != nil {
			return err
		}
	}
	if w := spec.GetRelevancyWindow(); w != nil {
		const field = "upsert.spec.relevancy_window"
		window, err := checkDuration(field, w)
		if err != nil {
			return err
		}
		switch {
		case window <= 0:
			return invalid(field, "is %s; it must be positive (leave it unset for the namespace's window)", window)
		case window > MaxRelevancyWindow:
			return invalid(field, "is %s; it must be at most %s (30 days)", window, MaxRelevancyWindow)
		case sched.MaxJitter() >= window:
			return invalid(field, "is %s, not longer than schedule.jitter (%s); jittered fires would expire, so shorten the jitter or widen the window", window, sched.MaxJitter())
		}
		if at := spec.GetSchedule().GetAt(); at != nil && !opts.Now.IsZero() {
			if deadline := at.AsTime().Add(window); deadline.Before(opts.Now) {
				return invalid("upsert.spec.schedule.at", "%s is already past its relevancy window (%s, ended %s, now %s); schedule it later or widen relevancy_window",
					at.AsTime().Format(time.RFC3339), window, deadline.Format(time.RFC3339), opts.Now.UTC().Format(time.RFC3339))
			}
		}
	}
	if c := spec.GetCatchup(); chimev1.CatchupPolicy_name[int32(c)] == "" {
		return invalid("upsert.spec.catchup", "%d is not a known catch-up policy; use LATEST, NONE or ALL", int32(c))
	}
	if w := spec.GetCatchupWindow(); w != nil {
		const field = "upsert.spec.catchup_window"
		window, err := checkDuration(field, w)
		if err != nil {
			return err
		}
		if window <= 0 || window > MaxRelevancyWindow {
			return invalid(field, "is %s; it must be positive and at most %s (30 days)", window, MaxRelevancyWindow)
		}
	}
	if o := spec.GetOverlap(); chimev1.OverlapPolicy_name[int32(o)] == "" {
		return invalid("upsert.spec.overlap", "%d is not a known overlap policy; use ALLOW_ALL, SKIP, BUFFER_ONE or CANCEL_OTHER", int32(o))
	}
	return validateLabels("upsert.spec.labels", spec.GetLabels())
}

func validateTarget(field string, t *chimev1.Target) *ValidationError {
	switch k := t.GetKind().(type) {
	case *chimev1.Target_Http:
		return validateHTTP(field, k.Http)
	case *chimev1.Target_Kafka:
		return validateKafka(field+".kafka", k.Kafka)
	default:
		return invalid(field, "none is set; set exactly one of http, kafka")
	}
}

// validateHTTP checks the http target under parent (its field is
// parent.http). Field paths are built only for an error: every create is
// validated twice (the API, then the scheduler), and building them for
// every job was a tenth of the validation's CPU.
func validateHTTP(parent string, h *chimev1.HttpCallback) *ValidationError {
	at := func(name string) string { return parent + ".http." + name }
	if err := checkURL(h.GetUrl()); err != nil {
		err.Field = at("url")
		return err
	}
	switch m := h.GetMethod(); m {
	case "", "GET", "POST", "PUT", "PATCH", "DELETE":
	default:
		hint := ""
		if up := strings.ToUpper(m); up != m && slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, up) {
			hint = fmt.Sprintf(" (methods are case-sensitive: write %q)", up)
		}
		return invalid(at("method"), "%q is not supported%s; use %s, or leave it empty for POST", m, hint, allowedMethodsHelp)
	}
	if !headersFine(h.GetHeaders()) {
		return headersError(at("headers"), h.GetHeaders())
	}
	if n := len(h.GetBody()); n > MaxHTTPBody {
		return invalid(at("body"), "is %d bytes; the limit is %d (64 KiB): send a reference to the payload instead", n, MaxHTTPBody)
	}
	if to := h.GetTimeout(); to != nil {
		d, err := checkDuration(at("timeout"), to)
		if err != nil {
			return err
		}
		if d <= 0 || d > MaxHTTPTimeout {
			return invalid(at("timeout"), "is %s; it must be in (0, %s], or unset for the default (%s)", d, MaxHTTPTimeout, DefaultHTTPTimeout)
		}
	}
	return nil
}

// validURLs remembers callback URLs that passed checkURL. A namespace's
// jobs call a few endpoints, and parsing every job's URL again
// (net/url.Parse, twice per create) was half of the validation's CPU in a
// run of creates. Only URLs that passed are kept: the check depends on the
// URL alone, and a refused one is checked again to say why.
var validURLs = func() *lru.Cache[string, struct{}] {
	c, err := lru.New[string, struct{}](validURLsKept)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}()

// validURLsKept bounds validURLs: at MaxURLLen each, a few MB.
const validURLsKept = 1024

// checkURL checks a callback URL; the error's Field is left for the
// caller to set.
func checkURL(raw string) *ValidationError {
	if _, ok := validURLs.Get(raw); ok { // Get, not Contains: a URL in use stays
		return nil
	}
	const field = ""
	if raw == "" {
		return invalid(field, "is empty; give the absolute http or https URL to call")
	}
	if !utf8.ValidString(raw) {
		return invalid(field, "is not valid UTF-8; percent-encode the bytes")
	}
	if len(raw) > MaxURLLen {
		return invalid(field, "is %d bytes long; the limit is %d", len(raw), MaxURLLen)
	}
	if err := checkURLChars(field, raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(field, "%q does not parse (%v); give an absolute http or https URL", raw, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid(field, "%q has scheme %q; give an absolute http or https URL", raw, u.Scheme)
	}
	if u.User != nil {
		return invalid(field, "%q contains credentials; remove them from the URL and send them in a header", raw)
	}
	if u.Hostname() == "" {
		return invalid(field, "%q has no host; give an absolute URL such as https://example.com/hook", raw)
	}
	validURLs.Add(raw, struct{}{})
	return nil
}

// uriChars are the bytes RFC 3986 allows in a URI: unreserved, the
// delimiters, and '%' (of a percent-encoding, checked apart).
var uriChars = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%") {
		t[c] = true
	}
	return t
}()

// checkURLChars refuses what a URI cannot hold. The dispatcher sends the
// URL as it is in the request line: a space, a quote or '<' there either
// breaks the request (the receiver answers 400) or makes one server read a
// different target than another. Go's URL parser accepts most of them, and
// encoding them on chime's side would send something else than the job
// says, so chime refuses them with the encoding to write instead (what
// clients' URL builders produce anyway).
func checkURLChars(field, raw string) *ValidationError {
	// The authority ends at the first '/', '?' or '#' after "//".
	hostStart, hostEnd := -1, -1
	if i := strings.Index(raw, "//"); i >= 0 {
		hostStart = i + 2
		hostEnd = len(raw)
		if j := strings.IndexAny(raw[hostStart:], "/?#"); j >= 0 {
			hostEnd = hostStart + j
		}
	}
	for i, r := range raw {
		switch {
		case r == '%':
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return invalid(field, "%q has '%%' at byte %d not followed by two hex digits; write %%25 for a literal '%%'", raw, i)
			}
		case r == ' ':
			return invalid(field, "%q has a space at byte %d; percent-encode it as %%20", raw, i)
		case r >= utf8.RuneSelf:
			var enc strings.Builder
			for _, b := range []byte(string(r)) {
				fmt.Fprintf(&enc, "%%%02X", b)
			}
			if i >= hostStart && i < hostEnd {
				return invalid(field, "%q has %s at byte %d, in the host; write the host in its ASCII form (punycode: xn--...)", raw, strconv.QuoteRune(r), i)
			}
			return invalid(field, "%q has %s at byte %d, which URLs do not allow unencoded; percent-encode its UTF-8 bytes as %s", raw, strconv.QuoteRune(r), i, enc.String())
		case !uriChars[r]:
			return invalid(field, "%q has %s at byte %d, which URLs do not allow; percent-encode it as %%%02X", raw, strconv.QuoteRune(r), i, r)
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// headersFine says headers pass every check headersError makes, without
// sorting them or naming a field: the path of nearly every job.
func headersFine(headers map[string]string) bool {
	if len(headers) > MaxHeaders {
		return false
	}
	total := 0
	for name, value := range headers {
		total += len(name) + len(value)
		if len(name) > MaxHeaderNameLen || len(value) > MaxHeaderValueLen || total > MaxHeadersBytes ||
			!isToken(name) || isReservedHeader(name) || !utf8.ValidString(value) || strings.IndexFunc(value, isCTL) >= 0 {
			return false
		}
	}
	return true
}

// headersError says what is wrong with headers, looking at them in sorted
// order so the same headers always get the same answer; nil if nothing
// is (headersFine).
func headersError(field string, headers map[string]string) *ValidationError {
	if len(headers) > MaxHeaders {
		return invalid(field, "has %d entries; the limit is %d", len(headers), MaxHeaders)
	}
	total := 0
	for _, name := range sortedKeys(headers) {
		f := fmt.Sprintf("%s[%q]", field, name)
		if len(name) > MaxHeaderNameLen {
			return invalid(field, "a header name is %d bytes long; the limit is %d", len(name), MaxHeaderNameLen)
		}
		if n := len(headers[name]); n > MaxHeaderValueLen {
			return invalid(f, "value is %d bytes long; the limit is %d (8 KiB)", n, MaxHeaderValueLen)
		}
		if total += len(name) + len(headers[name]); total > MaxHeadersBytes {
			return invalid(field, "names and values add up to more than %d bytes (16 KiB); send large data in the body", MaxHeadersBytes)
		}
		if !isToken(name) {
			return invalid(f, "%q is not a valid header name; use letters, digits and !#$%%&'*+-.^_`|~", name)
		}
		if isReservedHeader(name) {
			return invalid(f, reservedHeadersHelpf, name)
		}
		if !utf8.ValidString(headers[name]) {
			return invalid(f, "value is not valid UTF-8")
		}
		if i := strings.IndexFunc(headers[name], isCTL); i >= 0 {
			return invalid(f, "value has control character %q at byte %d (CR, LF, NUL and other controls except tab would break or smuggle headers); remove it", headers[name][i], i)
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of header names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !isAlnum(b) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(b)) {
			return false
		}
	}
	return true
}

func isCTL(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }

func isReservedHeader(name string) bool {
	for _, r := range []string{"idempotency-key", "host", "content-length", "transfer-encoding", "connection"} {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return hasPrefixFold(name, "x-chime-") || hasPrefixFold(name, "webhook-")
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case, without the copy
// strings.ToLower makes of a name with capitals (Content-Type).
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func validateKafka(field string, k *chimev1.KafkaTarget) *ValidationError {
	topic := k.GetTopic()
	switch {
	case topic == "":
		return invalid(field+".topic", "is empty; give the topic to write to")
	case len(topic) > MaxKafkaTopicLen:
		return invalid(field+".topic", "is %d bytes long; Kafka allows at most %d", len(topic), MaxKafkaTopicLen)
	case topic == "." || topic == "..":
		return invalid(field+".topic", "%q is not a valid Kafka topic name", topic)
	}
	for i := 0; i < len(topic); i++ {
		if b := topic[i]; !isAlnum(b) && b != '.' && b != '_' && b != '-' {
			return invalid(field+".topic", "%q has %q at byte %d; Kafka topic names use only %s", topic, b, i, kafkaTopicCharsHelp)
		}
	}
	if n := len(k.GetValue()); n > MaxKafkaValue {
		return invalid(field+".value", "is %d bytes; the limit is %d (512 KiB)", n, MaxKafkaValue)
	}
	if n := len(k.GetKey()); n > MaxKafkaKey {
		return invalid(field+".key", "is %d bytes; the limit is %d (4 KiB)", n, MaxKafkaKey)
	}
	if len(k.GetHeaders()) > MaxHeaders {
		return invalid(field+".headers", "has %d entries; the limit is %d", len(k.GetHeaders()), MaxHeaders)
	}
	total := 0
	for _, name := range sortedKeys(k.GetHeaders()) {
		total += len(name) + len(k.GetHeaders()[name])
	}
	if total > MaxHeadersBytes {
		return invalid(field+".headers", "names and values add up to %d bytes; the limit is %d (16 KiB)", total, MaxHeadersBytes)
	}
	return nil
}

func validateRetry(field string, r *chimev1.RetryPolicy) *ValidationError {
	if n := r.GetMaxAttempts(); n > MaxRetryAttempts {
		return invalid(field+".max_attempts", "is %d; the limit is %d", n, MaxRetryAttempts)
	}
	var initial, maxInterval time.Duration
	for _, d := range []struct {
		name string
		pb   *durationpb.Duration
		out  *time.Duration
	}{
		{"initial_interval", r.GetInitialInterval(), &initial},
		{"max_interval", r.GetMaxInterval(), &maxInterval},
		{"max_elapsed", r.GetMaxElapsed(), nil},
	} {
		if d.pb == nil {
			continue
		}
		v, err := checkDuration(field+"."+d.name, d.pb)
		if err != nil {
			return err
		}
		if v < 0 {
			return invalid(field+"."+d.name, "is %s; it must not be negative (0 takes the namespace's value)", v)
		}
		if d.out != nil {
			*d.out = v
		}
	}
	// Zero means "the namespace's value", so only two explicit values can
	// contradict each other.
	if initial > 0 && maxInterval > 0 && maxInterval < initial {
		return invalid(field+".max_interval", "is %s, shorter than initial_interval (%s); raise it or lower initial_interval", maxInterval, initial)
	}
	if m := r.GetMultiplier(); m != 0 && !(m >= 1 && m <= MaxRetryMultiplier) {
		return invalid(field+".multiplier", "is %v; it must be 0 (the namespace's value) or between 1 and %d", m, MaxRetryMultiplier)
	}
	if j := r.GetJitter(); !(j >= 0 && j <= 1) {
		return invalid(field+".jitter", "is %v; it is a randomization factor in [0, 1]", j)
	}
	return nil
}

func validateLabels(field string, labels map[string]string) *ValidationError {
	if len(labels) > MaxLabels {
		return invalid(field, "has %d entries; the limit is %d", len(labels), MaxLabels)
	}
	// The first bad label in key order is named: the same one whatever
	// the map's order. Valid maps (nearly all) are checked without sorting.
	var bad []string
	for k, v := range labels {
		if labelProblem(k, v) != "" {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	k := slices.Min(bad)
	return invalid(fmt.Sprintf("%s[%q]", field, k), "%s", labelProblem(k, labels[k]))
}

// labelProblem says what is wrong with a label ("": nothing).
func labelProblem(k, v string) string {
	if k == "" || len(k) > MaxLabelKeyLen {
		return fmt.Sprintf("key is %d bytes long; give 1-%d characters of %s", len(k), MaxLabelKeyLen, labelKeyCharsHelp)
	}
	for i := 0; i < len(k); i++ {
		if b := k[i]; !isAlnum(b) && !strings.ContainsRune("_.-/", rune(b)) {
			return fmt.Sprintf("key has %q at byte %d; use only %s", b, i, labelKeyCharsHelp)
		}
	}
	if !utf8.ValidString(v) {
		return "value is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(v); n > MaxLabelValueLen {
		return fmt.Sprintf("value is %d characters long; the limit is %d", n, MaxLabelValueLen)
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
