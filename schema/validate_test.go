package schema

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// validUpsert returns a command that passes validation; each case breaks
// one thing in it.
func validUpsert() *chimev1.JobCommand {
	return &chimev1.JobCommand{
		CommandId: "cmd-1",
		IssuedAt:  timestamppb.New(testNow),
		Namespace: "billing",
		JobId:     "invoice-42",
		Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: &chimev1.JobSpec{
			Namespace: "billing",
			Id:        "invoice-42",
			Schedule: &chimev1.Schedule{
				Kind:   &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 9 * * MON-FRI", Timezone: "Europe/Berlin"}},
				Jitter: durationpb.New(30 * time.Second),
			},
			Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
				Url:     "https://hooks.example.com/remind?x=1",
				Method:  "POST",
				Headers: map[string]string{"Authorization": "Bearer abc", "X-Trace": "a\tb"},
				Body:    []byte(`{"invoice":42}`),
				Timeout: durationpb.New(10 * time.Second),
			}}},
			Retry: &chimev1.RetryPolicy{
				MaxAttempts:     5,
				InitialInterval: durationpb.New(time.Second),
				MaxInterval:     durationpb.New(time.Minute),
				Multiplier:      2,
				Jitter:          0.2,
				MaxElapsed:      durationpb.New(time.Hour),
			},
			RelevancyWindow: durationpb.New(time.Hour),
			Labels:          map[string]string{"team": "billing", "app.kubernetes.io/name": "invoicer"},
		}}},
	}
}

func spec(c *chimev1.JobCommand) *chimev1.JobSpec { return c.GetUpsert().GetSpec() }
func httpT(c *chimev1.JobCommand) *chimev1.HttpCallback {
	return spec(c).GetTarget().GetHttp()
}

func kafkaTarget(c *chimev1.JobCommand) *chimev1.KafkaTarget {
	k := &chimev1.KafkaTarget{Topic: "chime.breaker-timers", Key: []byte("k"), Value: []byte("v")}
	spec(c).Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: k}}
	return k
}

func atIn(c *chimev1.JobCommand, t time.Time) {
	spec(c).Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(t)}}
}

func manyStrings(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = "v"
	}
	return m
}

func TestValidateCommandRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(c *chimev1.JobCommand)
		opts   ValidateOptions
		field  string
		reason string // substring
	}{
		{"command_id empty", func(c *chimev1.JobCommand) { c.CommandId = "" }, ValidateOptions{}, "command_id", "is empty"},
		{"command_id not utf8", func(c *chimev1.JobCommand) { c.CommandId = "a\xffb" }, ValidateOptions{}, "command_id", "not valid UTF-8"},
		{"namespace empty", func(c *chimev1.JobCommand) { c.Namespace = "" }, ValidateOptions{}, "namespace", "is empty"},
		{"namespace upper case", func(c *chimev1.JobCommand) { c.Namespace = "Billing" }, ValidateOptions{}, "namespace", `has 'B' at byte 0`},
		{"namespace leading dash", func(c *chimev1.JobCommand) { c.Namespace = "-billing" }, ValidateOptions{}, "namespace", "starting with a letter or digit"},
		{"namespace leading underscore", func(c *chimev1.JobCommand) { c.Namespace = "_b" }, ValidateOptions{}, "namespace", "'_' at byte 0"},
		{"namespace dot", func(c *chimev1.JobCommand) { c.Namespace = "a.b" }, ValidateOptions{}, "namespace", "'.' at byte 1"},
		{"namespace 64 bytes", func(c *chimev1.JobCommand) { c.Namespace = strings.Repeat("a", 64) }, ValidateOptions{}, "namespace", "limit is 63"},
		{"job_id empty", func(c *chimev1.JobCommand) { c.JobId = "" }, ValidateOptions{}, "job_id", "is empty"},
		{"job_id slash", func(c *chimev1.JobCommand) { c.JobId = "a/b" }, ValidateOptions{}, "job_id", "contains '/'"},
		{"job_id space", func(c *chimev1.JobCommand) { c.JobId = "a b" }, ValidateOptions{}, "job_id", "' ' at byte 1"},
		{"job_id non-ascii", func(c *chimev1.JobCommand) { c.JobId = "jöb" }, ValidateOptions{}, "job_id", "at byte 1"},
		{"job_id 129 bytes", func(c *chimev1.JobCommand) { c.JobId = strings.Repeat("x", 129) }, ValidateOptions{}, "job_id", "limit is 128"},
		{"issued_at invalid", func(c *chimev1.JobCommand) { c.IssuedAt = &timestamppb.Timestamp{Nanos: -1} }, ValidateOptions{}, "issued_at", "invalid timestamp"},
		{"no command", func(c *chimev1.JobCommand) { c.Command = nil }, ValidateOptions{}, "command", "set exactly one of upsert, cancel, pause, resume, retry, defer, ack"},

		{"upsert empty", func(c *chimev1.JobCommand) { c.Command = &chimev1.JobCommand_Upsert{} }, ValidateOptions{}, "upsert.spec", "is not set"},
		{"spec missing", func(c *chimev1.JobCommand) { c.GetUpsert().Spec = nil }, ValidateOptions{}, "upsert.spec", "is not set"},
		{"spec namespace differs", func(c *chimev1.JobCommand) { spec(c).Namespace = "other" }, ValidateOptions{}, "upsert.spec.namespace", `is "other" but the command's namespace is "billing"`},
		{"spec id differs", func(c *chimev1.JobCommand) { spec(c).Id = "x" }, ValidateOptions{}, "upsert.spec.id", `is "x" but the command's job_id is "invoice-42"`},

		{"schedule missing", func(c *chimev1.JobCommand) { spec(c).Schedule = nil }, ValidateOptions{}, "upsert.spec.schedule", "set exactly one of at, every, cron"},
		{"schedule kind missing", func(c *chimev1.JobCommand) { spec(c).Schedule.Kind = nil }, ValidateOptions{}, "upsert.spec.schedule", "set exactly one of at, every, cron"},
		{"cron bad", func(c *chimev1.JobCommand) { spec(c).Schedule.GetCron().Expr = "*/0 * * * *" }, ValidateOptions{}, "upsert.spec.schedule.cron.expr", `cron "*/0 * * * *": minute field`},
		{"cron zone", func(c *chimev1.JobCommand) { spec(c).Schedule.GetCron().Timezone = "Nowhere" }, ValidateOptions{}, "upsert.spec.schedule.cron.timezone", `unknown time zone "Nowhere"`},
		{"every too short", func(c *chimev1.JobCommand) {
			spec(c).Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Millisecond)}}}
		}, ValidateOptions{}, "upsert.spec.schedule.every.interval", "at least 1s"},
		{"schedule jitter too long", func(c *chimev1.JobCommand) { spec(c).Schedule.Jitter = durationpb.New(2 * time.Hour) }, ValidateOptions{}, "upsert.spec.schedule.jitter", "at most 1h"},
		{"at zero", func(c *chimev1.JobCommand) {
			spec(c).Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: &timestamppb.Timestamp{}}}
		}, ValidateOptions{}, "upsert.spec.schedule.at", "is not set"},

		{"target missing", func(c *chimev1.JobCommand) { spec(c).Target = nil }, ValidateOptions{}, "upsert.spec.target", "set exactly one of http, kafka"},
		{"target empty", func(c *chimev1.JobCommand) { spec(c).Target = &chimev1.Target{} }, ValidateOptions{}, "upsert.spec.target", "set exactly one of http, kafka"},
		{"http empty", func(c *chimev1.JobCommand) {
			spec(c).Target = &chimev1.Target{Kind: &chimev1.Target_Http{}}
		}, ValidateOptions{}, "upsert.spec.target.http.url", "is empty"},
		{"url relative", func(c *chimev1.JobCommand) { httpT(c).Url = "/hook" }, ValidateOptions{}, "upsert.spec.target.http.url", `has scheme ""`},
		{"url ftp", func(c *chimev1.JobCommand) { httpT(c).Url = "ftp://example.com/x" }, ValidateOptions{}, "upsert.spec.target.http.url", `has scheme "ftp"`},
		{"url userinfo", func(c *chimev1.JobCommand) { httpT(c).Url = "https://user:pw@example.com/" }, ValidateOptions{}, "upsert.spec.target.http.url", "contains credentials"},
		{"url user only", func(c *chimev1.JobCommand) { httpT(c).Url = "https://user@example.com/" }, ValidateOptions{}, "upsert.spec.target.http.url", "contains credentials"},
		{"url no host", func(c *chimev1.JobCommand) { httpT(c).Url = "https:///path" }, ValidateOptions{}, "upsert.spec.target.http.url", "has no host"},
		{"url port only", func(c *chimev1.JobCommand) { httpT(c).Url = "http://:8080/x" }, ValidateOptions{}, "upsert.spec.target.http.url", "has no host"},
		{"url opaque", func(c *chimev1.JobCommand) { httpT(c).Url = "http:example.com" }, ValidateOptions{}, "upsert.spec.target.http.url", "has no host"},
		{"url unparsable", func(c *chimev1.JobCommand) { httpT(c).Url = "http://[::1/x" }, ValidateOptions{}, "upsert.spec.target.http.url", "does not parse"},
		{"url not utf8", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/\xff" }, ValidateOptions{}, "upsert.spec.target.http.url", "not valid UTF-8"},
		{"url too long", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/" + strings.Repeat("a", 2029) }, ValidateOptions{}, "upsert.spec.target.http.url", "is 2049 bytes long; the limit is 2048"},
		// Characters RFC 3986 does not allow in a URI would be sent as they
		// are in the request line (the dispatcher does not re-encode), which
		// receivers answer 400 or split differently.
		{"url space in path", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/a b" }, ValidateOptions{}, "upsert.spec.target.http.url", "has a space at byte 21; percent-encode it as %20"},
		{"url space in query", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/h?q=a b" }, ValidateOptions{}, "upsert.spec.target.http.url", "has a space at byte 25; percent-encode it as %20"},
		{"url quote", func(c *chimev1.JobCommand) { httpT(c).Url = `https://example.com/h?q="x"` }, ValidateOptions{}, "upsert.spec.target.http.url", `has '"' at byte 24, which URLs do not allow; percent-encode it as %22`},
		{"url angle brackets", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/<script>" }, ValidateOptions{}, "upsert.spec.target.http.url", "has '<' at byte 20, which URLs do not allow; percent-encode it as %3C"},
		{"url backslash", func(c *chimev1.JobCommand) { httpT(c).Url = `https://example.com\@evil.test/` }, ValidateOptions{}, "upsert.spec.target.http.url", `has '\\' at byte 19, which URLs do not allow; percent-encode it as %5C`},
		{"url braces and pipe", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/{id}" }, ValidateOptions{}, "upsert.spec.target.http.url", "has '{' at byte 20"},
		{"url control character", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/a\r\nX-Injected: 1" }, ValidateOptions{}, "upsert.spec.target.http.url", `has '\r' at byte 21`},
		{"url non-ASCII path", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/café" }, ValidateOptions{}, "upsert.spec.target.http.url", "has 'é' at byte 23, which URLs do not allow unencoded; percent-encode its UTF-8 bytes as %C3%A9"},
		{"url non-ASCII host", func(c *chimev1.JobCommand) { httpT(c).Url = "https://bücher.example/" }, ValidateOptions{}, "upsert.spec.target.http.url", "write the host in its ASCII form (punycode: xn--...)"},
		{"url bad escape", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/h?q=100%" }, ValidateOptions{}, "upsert.spec.target.http.url", "has '%' at byte 27 not followed by two hex digits; write %25 for a literal '%'"},
		{"method lower case", func(c *chimev1.JobCommand) { httpT(c).Method = "post" }, ValidateOptions{}, "upsert.spec.target.http.method", `write "POST"`},
		{"method TRACE", func(c *chimev1.JobCommand) { httpT(c).Method = "TRACE" }, ValidateOptions{}, "upsert.spec.target.http.method", `"TRACE" is not supported; use GET, POST, PUT, PATCH or DELETE`},
		{"too many headers", func(c *chimev1.JobCommand) { httpT(c).Headers = manyStrings(51) }, ValidateOptions{}, "upsert.spec.target.http.headers", "has 51 entries; the limit is 50"},
		{"header name space", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"Bad Name": "v"} }, ValidateOptions{}, `upsert.spec.target.http.headers["Bad Name"]`, "not a valid header name"},
		{"header name empty", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"": "v"} }, ValidateOptions{}, `upsert.spec.target.http.headers[""]`, "not a valid header name"},
		{"header name colon", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"A:B": "v"} }, ValidateOptions{}, `upsert.spec.target.http.headers["A:B"]`, "not a valid header name"},
		{"header value CRLF", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": "a\r\nX-Evil: 1"} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, `control character '\r' at byte 1`},
		{"header value too long", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": strings.Repeat("v", 999_000)} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, "limit is 8192"},
		{"header name too long", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{strings.Repeat("N", 300): "v"} }, ValidateOptions{}, `upsert.spec.target.http.headers`, "limit is 256"},
		{"headers too large together", func(c *chimev1.JobCommand) {
			httpT(c).Headers = map[string]string{"X-A": strings.Repeat("a", 8000), "X-B": strings.Repeat("b", 8000), "X-C": strings.Repeat("c", 8000)}
		}, ValidateOptions{}, `upsert.spec.target.http.headers`, "16 KiB"},
		{"header value LF", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": "a\nb"} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, `'\n'`},
		{"header value NUL", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": "a\x00"} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, `'\x00'`},
		{"header value DEL", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": "\x7f"} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, "control character"},
		{"header value not utf8", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"X-A": "\xc3"} }, ValidateOptions{}, `upsert.spec.target.http.headers["X-A"]`, "not valid UTF-8"},
		{"header Idempotency-Key", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"idempotency-KEY": "1"} }, ValidateOptions{}, `upsert.spec.target.http.headers["idempotency-KEY"]`, "is set by chime on every call"},
		{"header Host", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"HOST": "x"} }, ValidateOptions{}, `upsert.spec.target.http.headers["HOST"]`, "reserved"},
		{"header Content-Length", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"Content-Length": "1"} }, ValidateOptions{}, `upsert.spec.target.http.headers["Content-Length"]`, "reserved"},
		{"header Transfer-Encoding", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"transfer-encoding": "chunked"} }, ValidateOptions{}, `upsert.spec.target.http.headers["transfer-encoding"]`, "reserved"},
		{"header Connection", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"Connection": "close"} }, ValidateOptions{}, `upsert.spec.target.http.headers["Connection"]`, "reserved"},
		{"header X-Chime-", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"x-chime-fire-seq": "1"} }, ValidateOptions{}, `upsert.spec.target.http.headers["x-chime-fire-seq"]`, "reserved"},
		{"header Webhook-", func(c *chimev1.JobCommand) { httpT(c).Headers = map[string]string{"Webhook-Signature": "s"} }, ValidateOptions{}, `upsert.spec.target.http.headers["Webhook-Signature"]`, "reserved"},
		{"body too large", func(c *chimev1.JobCommand) { httpT(c).Body = make([]byte, 64<<10+1) }, ValidateOptions{}, "upsert.spec.target.http.body", "is 65537 bytes; the limit is 65536"},
		{"timeout zero", func(c *chimev1.JobCommand) { httpT(c).Timeout = durationpb.New(0) }, ValidateOptions{}, "upsert.spec.target.http.timeout", "must be in (0, 1m0s], or unset for the default (10s)"},
		{"timeout negative", func(c *chimev1.JobCommand) { httpT(c).Timeout = durationpb.New(-time.Second) }, ValidateOptions{}, "upsert.spec.target.http.timeout", "must be in (0, 1m0s]"},
		{"timeout over the limit", func(c *chimev1.JobCommand) { httpT(c).Timeout = durationpb.New(MaxHTTPTimeout + time.Nanosecond) }, ValidateOptions{}, "upsert.spec.target.http.timeout", "must be in (0, 1m0s]"},
		{"timeout 2m, which the dispatcher would not wait", func(c *chimev1.JobCommand) { httpT(c).Timeout = durationpb.New(2 * time.Minute) }, ValidateOptions{}, "upsert.spec.target.http.timeout", "must be in (0, 1m0s]"},
		{"timeout invalid", func(c *chimev1.JobCommand) { httpT(c).Timeout = &durationpb.Duration{Seconds: 1, Nanos: -1} }, ValidateOptions{}, "upsert.spec.target.http.timeout", "invalid duration"},

		{"kafka key too long", func(c *chimev1.JobCommand) { kafkaTarget(c).Key = make([]byte, 5000) }, ValidateOptions{}, "upsert.spec.target.kafka.key", "4 KiB"},
		{"kafka headers too large", func(c *chimev1.JobCommand) {
			kafkaTarget(c).Headers = map[string]string{"a": strings.Repeat("a", 20_000)}
		}, ValidateOptions{}, "upsert.spec.target.kafka.headers", "16 KiB"},
		{"kafka topic empty", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = "" }, ValidateOptions{}, "upsert.spec.target.kafka.topic", "is empty"},
		{"kafka topic dot", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = "." }, ValidateOptions{}, "upsert.spec.target.kafka.topic", "not a valid Kafka topic name"},
		{"kafka topic dotdot", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = ".." }, ValidateOptions{}, "upsert.spec.target.kafka.topic", "not a valid Kafka topic name"},
		{"kafka topic slash", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = "a/b" }, ValidateOptions{}, "upsert.spec.target.kafka.topic", "'/' at byte 1"},
		{"kafka topic too long", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = strings.Repeat("t", 250) }, ValidateOptions{}, "upsert.spec.target.kafka.topic", "at most 249"},
		{"kafka value too large", func(c *chimev1.JobCommand) { kafkaTarget(c).Value = make([]byte, 512<<10+1) }, ValidateOptions{}, "upsert.spec.target.kafka.value", "limit is 524288"},

		{"retry attempts", func(c *chimev1.JobCommand) { spec(c).Retry.MaxAttempts = 101 }, ValidateOptions{}, "upsert.spec.retry.max_attempts", "is 101; the limit is 100"},
		{"retry initial negative", func(c *chimev1.JobCommand) { spec(c).Retry.InitialInterval = durationpb.New(-time.Second) }, ValidateOptions{}, "upsert.spec.retry.initial_interval", "must not be negative"},
		{"retry max negative", func(c *chimev1.JobCommand) { spec(c).Retry.MaxInterval = durationpb.New(-time.Second) }, ValidateOptions{}, "upsert.spec.retry.max_interval", "must not be negative"},
		{"retry max below initial", func(c *chimev1.JobCommand) { spec(c).Retry.MaxInterval = durationpb.New(500 * time.Millisecond) }, ValidateOptions{}, "upsert.spec.retry.max_interval", "shorter than initial_interval (1s)"},
		{"retry interval invalid", func(c *chimev1.JobCommand) {
			spec(c).Retry.InitialInterval = &durationpb.Duration{Seconds: -1, Nanos: 5}
		}, ValidateOptions{}, "upsert.spec.retry.initial_interval", "invalid duration"},
		{"retry multiplier below 1", func(c *chimev1.JobCommand) { spec(c).Retry.Multiplier = 0.5 }, ValidateOptions{}, "upsert.spec.retry.multiplier", "between 1 and 10"},
		{"retry multiplier above 10", func(c *chimev1.JobCommand) { spec(c).Retry.Multiplier = 10.5 }, ValidateOptions{}, "upsert.spec.retry.multiplier", "between 1 and 10"},
		{"retry multiplier NaN", func(c *chimev1.JobCommand) { spec(c).Retry.Multiplier = math.NaN() }, ValidateOptions{}, "upsert.spec.retry.multiplier", "is NaN"},
		{"retry multiplier negative", func(c *chimev1.JobCommand) { spec(c).Retry.Multiplier = -2 }, ValidateOptions{}, "upsert.spec.retry.multiplier", "between 1 and 10"},
		{"retry jitter negative", func(c *chimev1.JobCommand) { spec(c).Retry.Jitter = -0.1 }, ValidateOptions{}, "upsert.spec.retry.jitter", "in [0, 1]"},
		{"retry jitter above 1", func(c *chimev1.JobCommand) { spec(c).Retry.Jitter = 1.01 }, ValidateOptions{}, "upsert.spec.retry.jitter", "in [0, 1]"},
		{"retry jitter NaN", func(c *chimev1.JobCommand) { spec(c).Retry.Jitter = math.NaN() }, ValidateOptions{}, "upsert.spec.retry.jitter", "in [0, 1]"},
		{"retry max_elapsed negative", func(c *chimev1.JobCommand) { spec(c).Retry.MaxElapsed = durationpb.New(-time.Minute) }, ValidateOptions{}, "upsert.spec.retry.max_elapsed", "must not be negative"},

		{"window zero", func(c *chimev1.JobCommand) { spec(c).RelevancyWindow = durationpb.New(0) }, ValidateOptions{}, "upsert.spec.relevancy_window", "must be positive"},
		{"window negative", func(c *chimev1.JobCommand) { spec(c).RelevancyWindow = durationpb.New(-time.Hour) }, ValidateOptions{}, "upsert.spec.relevancy_window", "must be positive"},
		{"window over 30 days", func(c *chimev1.JobCommand) {
			spec(c).RelevancyWindow = durationpb.New(30*24*time.Hour + time.Second)
		}, ValidateOptions{}, "upsert.spec.relevancy_window", "at most 720h0m0s (30 days)"},
		{"window invalid", func(c *chimev1.JobCommand) { spec(c).RelevancyWindow = &durationpb.Duration{Nanos: 1e9} }, ValidateOptions{}, "upsert.spec.relevancy_window", "invalid duration"},
		{"window not longer than jitter", func(c *chimev1.JobCommand) { spec(c).RelevancyWindow = durationpb.New(30 * time.Second) }, ValidateOptions{}, "upsert.spec.relevancy_window", "not longer than schedule.jitter (30s)"},

		{"too many labels", func(c *chimev1.JobCommand) { spec(c).Labels = manyStrings(33) }, ValidateOptions{}, "upsert.spec.labels", "has 33 entries; the limit is 32"},
		{"label key empty", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{"": "v"} }, ValidateOptions{}, `upsert.spec.labels[""]`, "key is 0 bytes long"},
		{"label key too long", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{strings.Repeat("k", 64): "v"} }, ValidateOptions{}, `upsert.spec.labels["` + strings.Repeat("k", 64) + `"]`, "key is 64 bytes long"},
		{"label key bad char", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{"a b": "v"} }, ValidateOptions{}, `upsert.spec.labels["a b"]`, "key has ' ' at byte 1"},
		{"label key colon", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{"a:b": "v"} }, ValidateOptions{}, `upsert.spec.labels["a:b"]`, "key has ':'"},
		{"label value too long", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{"k": strings.Repeat("é", 257)} }, ValidateOptions{}, `upsert.spec.labels["k"]`, "value is 257 characters long; the limit is 256"},
		{"label value invalid utf8", func(c *chimev1.JobCommand) { spec(c).Labels = map[string]string{"k": "\xff"} }, ValidateOptions{}, `upsert.spec.labels["k"]`, "not valid UTF-8"},

		{"at past its window", func(c *chimev1.JobCommand) { atIn(c, testNow.Add(-time.Hour-time.Second)) }, ValidateOptions{Now: testNow}, "upsert.spec.schedule.at", "2026-06-01T10:59:59Z is already past its relevancy window (1h0m0s"},

		{"retry empty", func(c *chimev1.JobCommand) { c.Command = &chimev1.JobCommand_Retry{} }, ValidateOptions{}, "retry.fire_seq", "is 0"},
		{"retry fire_seq 0", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{Attempt: 2, NotBefore: timestamppb.New(testNow)}}
		}, ValidateOptions{}, "retry.fire_seq", "numbered from 1"},
		{"retry attempt 1", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, Attempt: 1, NotBefore: timestamppb.New(testNow)}}
		}, ValidateOptions{}, "retry.attempt", "is 1; a retry is attempt 2 or later"},
		{"retry not_before missing", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, Attempt: 2}}
		}, ValidateOptions{}, "retry.not_before", "is not set"},
		{"retry not_before invalid", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, Attempt: 2, NotBefore: &timestamppb.Timestamp{Seconds: math.MaxInt64}}}
		}, ValidateOptions{}, "retry.not_before", "invalid timestamp"},
		{"defer fire_seq 0", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{NotBefore: timestamppb.New(testNow)}}
		}, ValidateOptions{}, "defer.fire_seq", "is 0"},
		{"defer not_before missing", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{FireSeq: 3}}
		}, ValidateOptions{}, "defer.not_before", "is not set"},
		{"defer not_before invalid", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{FireSeq: 3, NotBefore: &timestamppb.Timestamp{Nanos: 1e9}}}
		}, ValidateOptions{}, "defer.not_before", "invalid timestamp"},
		{"ack fire_seq 0", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED}}
		}, ValidateOptions{}, "ack.fire_seq", "is 0"},
		{"ack result unspecified", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: 1}}
		}, ValidateOptions{}, "ack.result", "is unspecified"},
		{"ack result unknown", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: 1, Result: 99}}
		}, ValidateOptions{}, "ack.result", "99 is not a known result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := validUpsert()
			tt.mutate(cmd)
			err := ValidateCommand(cmd, tt.opts)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.field, ve.Field, "reason: %s", ve.Reason)
			require.Contains(t, ve.Reason, tt.reason)
			require.Equal(t, tt.field+": "+ve.Reason, err.Error())
		})
	}
}

func TestValidateCommandAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(c *chimev1.JobCommand)
		opts   ValidateOptions
	}{
		{"full upsert", func(*chimev1.JobCommand) {}, ValidateOptions{Now: testNow}},
		{"minimal upsert", func(c *chimev1.JobCommand) {
			c.IssuedAt = nil
			s := spec(c)
			s.Retry, s.RelevancyWindow, s.Labels = nil, nil, nil
			s.Schedule.Jitter = nil
			s.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://10.0.0.1:8080"}}}
		}, ValidateOptions{}},
		{"namespace limits", func(c *chimev1.JobCommand) {
			c.Namespace = "0" + strings.Repeat("a-_", 20) + "zz"
			spec(c).Namespace = c.Namespace
		}, ValidateOptions{}},
		{"job_id alphabet and length", func(c *chimev1.JobCommand) {
			c.JobId = "Aa0_.:@-" + strings.Repeat("x", 120)
			spec(c).Id = c.JobId
		}, ValidateOptions{}},
		{"empty method means POST", func(c *chimev1.JobCommand) { httpT(c).Method = "" }, ValidateOptions{}},
		{"GET", func(c *chimev1.JobCommand) { httpT(c).Method = "GET" }, ValidateOptions{}},
		{"PUT", func(c *chimev1.JobCommand) { httpT(c).Method = "PUT" }, ValidateOptions{}},
		{"PATCH", func(c *chimev1.JobCommand) { httpT(c).Method = "PATCH" }, ValidateOptions{}},
		{"DELETE", func(c *chimev1.JobCommand) { httpT(c).Method = "DELETE" }, ValidateOptions{}},
		{"ipv6 host", func(c *chimev1.JobCommand) { httpT(c).Url = "https://[2001:db8::1]:8443/h" }, ValidateOptions{}},
		{"url at the limit", func(c *chimev1.JobCommand) { httpT(c).Url = "https://example.com/" + strings.Repeat("a", 2028) }, ValidateOptions{}},
		{"url with every character URLs allow", func(c *chimev1.JobCommand) {
			httpT(c).Url = "https://example.com:8443/a-._~!$&'()*+,;=:@/%20%C3%a9?q[]=1&r=/?#frag"
		}, ValidateOptions{}},
		{"50 headers", func(c *chimev1.JobCommand) { httpT(c).Headers = manyStrings(50) }, ValidateOptions{}},
		{"look-alike headers", func(c *chimev1.JobCommand) {
			httpT(c).Headers = map[string]string{"X-Chime": "ok", "Webhook": "ok", "X-Hosted": "ok", "Idempotency": "ok"}
		}, ValidateOptions{}},
		{"body at the limit", func(c *chimev1.JobCommand) { httpT(c).Body = make([]byte, 64<<10) }, ValidateOptions{}},
		{"timeout at the limit", func(c *chimev1.JobCommand) { httpT(c).Timeout = durationpb.New(MaxHTTPTimeout) }, ValidateOptions{}},
		{"kafka target", func(c *chimev1.JobCommand) { kafkaTarget(c).Value = make([]byte, 512<<10) }, ValidateOptions{}},
		{"kafka topic at the limit", func(c *chimev1.JobCommand) { kafkaTarget(c).Topic = strings.Repeat("a._-Z9", 41) + "abc" }, ValidateOptions{}},
		{"retry zeros take defaults", func(c *chimev1.JobCommand) { spec(c).Retry = &chimev1.RetryPolicy{} }, ValidateOptions{}},
		{"retry max_interval unset", func(c *chimev1.JobCommand) { spec(c).Retry.MaxInterval = durationpb.New(0) }, ValidateOptions{}},
		{"retry bounds", func(c *chimev1.JobCommand) {
			r := spec(c).Retry
			r.MaxAttempts, r.Multiplier, r.Jitter = 100, 10, 1
			r.MaxInterval = r.InitialInterval
		}, ValidateOptions{}},
		{"retry multiplier 1 no jitter", func(c *chimev1.JobCommand) { spec(c).Retry.Multiplier, spec(c).Retry.Jitter = 1, 0 }, ValidateOptions{}},
		{"window 30 days", func(c *chimev1.JobCommand) { spec(c).RelevancyWindow = durationpb.New(30 * 24 * time.Hour) }, ValidateOptions{}},
		{"32 labels", func(c *chimev1.JobCommand) { spec(c).Labels = manyStrings(32) }, ValidateOptions{}},
		{"label limits", func(c *chimev1.JobCommand) {
			spec(c).Labels = map[string]string{strings.Repeat("k", 63): strings.Repeat("é", 256), "a/b.c-d_e": ""}
		}, ValidateOptions{}},
		{"at past but inside its window", func(c *chimev1.JobCommand) { atIn(c, testNow.Add(-time.Hour)) }, ValidateOptions{Now: testNow}},
		{"at past without a window", func(c *chimev1.JobCommand) {
			atIn(c, testNow.Add(-24*time.Hour))
			spec(c).RelevancyWindow = nil
		}, ValidateOptions{Now: testNow}},
		{"at past, no clock given", func(c *chimev1.JobCommand) { atIn(c, testNow.Add(-24*time.Hour)) }, ValidateOptions{}},
		{"cancel", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "done"}}
		}, ValidateOptions{}},
		{"cancel empty", func(c *chimev1.JobCommand) { c.Command = &chimev1.JobCommand_Cancel{} }, ValidateOptions{}},
		{"pause", func(c *chimev1.JobCommand) { c.Command = &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}} }, ValidateOptions{}},
		{"resume", func(c *chimev1.JobCommand) { c.Command = &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}} }, ValidateOptions{}},
		{"retry", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{FireSeq: 1, EmitSeq: 4, Attempt: 2, NotBefore: timestamppb.New(testNow)}}
		}, ValidateOptions{}},
		{"defer", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{FireSeq: 1, NotBefore: timestamppb.New(testNow)}}
		}, ValidateOptions{}},
		{"ack", func(c *chimev1.JobCommand) {
			c.Command = &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: 9, Result: chimev1.AckResult_ACK_RESULT_EXPIRED}}
		}, ValidateOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := validUpsert()
			tt.mutate(cmd)
			require.NoError(t, ValidateCommand(cmd, tt.opts))
		})
	}
}

func TestValidateCommandNil(t *testing.T) {
	t.Parallel()
	err := ValidateCommand(nil, ValidateOptions{})
	require.EqualError(t, err, "command is nil")
}

// The scheduler validates commands when it consumes them and records
// rejections: the same command must always get the same error.
func TestValidateCommandDeterministic(t *testing.T) {
	t.Parallel()
	cmd := validUpsert()
	httpT(cmd).Headers = map[string]string{"Host": "a", "Connection": "b", "X-Chime-A": "c", "Bad Name": "d", "Webhook-Id": "e"}
	want := ValidateCommand(cmd, ValidateOptions{}).Error()
	require.Equal(t, `upsert.spec.target.http.headers["Bad Name"]: "Bad Name" is not a valid header name; use letters, digits and !#$%&'*+-.^_`+"`"+`|~`, want)
	for range 50 {
		require.Equal(t, want, ValidateCommand(cmd, ValidateOptions{}).Error())
	}
}

func TestValidateNamespaceAndJobID(t *testing.T) {
	t.Parallel()
	for _, ns := range []string{"a", "0", "billing", "team_a-prod", strings.Repeat("z", 63)} {
		require.NoError(t, ValidateNamespace(ns), ns)
	}
	for _, ns := range []string{"", "A", "-a", "_a", "a b", "a/b", "ä", strings.Repeat("z", 64)} {
		var ve *ValidationError
		require.ErrorAs(t, ValidateNamespace(ns), &ve, ns)
		require.Equal(t, "namespace", ve.Field)
	}
	for _, id := range []string{"a", "A.b:c@d-e_f", "2026-06-01T10:00:00Z", strings.Repeat("z", 128)} {
		require.NoError(t, ValidateJobID(id), id)
	}
	for _, id := range []string{"", "a/b", "a b", "a\n", "a#b", strings.Repeat("z", 129)} {
		var ve *ValidationError
		require.ErrorAs(t, ValidateJobID(id), &ve, id)
		require.Equal(t, "job_id", ve.Field)
	}
}

func FuzzValidateCommand(f *testing.F) {
	valid, err := proto.Marshal(validUpsert())
	require.NoError(f, err)
	f.Add(valid, "billing", "invoice-42", "https://example.com/h", "POST", "X-A", "v", "0 9 * * *", "Europe/Berlin", "topic", "k", "v", int64(3600), int64(1780308000), uint8(0))
	f.Add([]byte{}, "a", "b", "http://[::1]:80", "", "Host", "x", "*/0 * * * *", "", "..", "", "", int64(-1), int64(0), uint8(1))
	f.Add([]byte{0x52, 0x02, 0x0a, 0x00}, "-", "a/b", "http://u:p@h/", "post", "Bad Name", "a\r\nb", "TZ=", "Local", ".", "a b", "\xff", int64(0), int64(-62135596801), uint8(2))
	f.Add([]byte("\x0a\x01x\x1a\x01a\x22\x01b\x72\x00"), "a", "b", "", "GET", "", "", "@every 1s", "Mars/Base", "", "", "", int64(1<<62), int64(1<<40), uint8(3))

	f.Fuzz(func(t *testing.T, raw []byte, ns, id, url, method, hName, hValue, expr, tz, topic, lKey, lValue string, window, atSec int64, kind uint8) {
		now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
		check := func(cmd *chimev1.JobCommand) {
			first := ValidateCommand(cmd, ValidateOptions{Now: now})
			if first == nil {
				if _, err := proto.Marshal(cmd); err != nil {
					t.Fatalf("valid command does not marshal: %v", err)
				}
				// What is sent in the request line is a URI: RFC 3986's
				// characters only.
				if u := cmd.GetUpsert().GetSpec().GetTarget().GetHttp().GetUrl(); strings.ContainsFunc(u, func(r rune) bool {
					return !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%", r)
				}) {
					t.Fatalf("valid command's URL %q has characters URLs do not allow", u)
				}
				return
			}
			ve, ok := first.(*ValidationError)
			if !ok || ve.Reason == "" {
				t.Fatalf("error %T %v is not a *ValidationError with a reason", first, first)
			}
			if again := ValidateCommand(cmd, ValidateOptions{Now: now}); again == nil || again.Error() != first.Error() {
				t.Fatalf("not deterministic: %v then %v", first, again)
			}
		}

		var decoded chimev1.JobCommand
		if proto.Unmarshal(raw, &decoded) == nil {
			check(&decoded)
		}

		cmd := validUpsert()
		cmd.Namespace, cmd.JobId = ns, id
		s := spec(cmd)
		s.Namespace, s.Id = ns, id
		switch kind % 4 {
		case 0:
			s.Schedule.Kind = &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: expr, Timezone: tz}}
		case 1:
			s.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: &timestamppb.Timestamp{Seconds: atSec}}}
		case 2:
			s.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: &durationpb.Duration{Seconds: atSec}}}}
		case 3:
			kafkaTarget(cmd).Topic = topic
		}
		if kind%4 != 3 {
			h := httpT(cmd)
			h.Url, h.Method = url, method
			h.Headers = map[string]string{hName: hValue}
		}
		s.RelevancyWindow = &durationpb.Duration{Seconds: window}
		s.Labels = map[string]string{lKey: lValue}
		check(cmd)
	})
}
