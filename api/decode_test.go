package api

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// batchBody is a jobs:batch body of n one-shot jobs as the burst sends
// them, with the fields a client commonly sets.
func batchBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"jobs": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"id": "job-%06d", "schedule": {"at": "2026-11-30T18:00:00Z"}, "callback": {"url": "http://127.0.0.1:8080/hook", "method": "POST", "headers": {"X-Trace": "t%d"}, "body": {"order": %d, "note": "caf\u00e9"}, "timeout": "10s"}, "labels": {"tenant": "t1"}, "retry": {"max_attempts": 3, "multiplier": 2.5}}`, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// decodeBodies are bodies the two decoders must treat alike: valid ones,
// and each kind of refusal decodeJSON knows.
var decodeBodies = []string{
	string(batchBody(3)),
	`{"jobs": []}`,
	`{"jobs": null}`,
	`{"jobs": [null]}`,
	`{"jobs": [{"callback": {"body": null}}]}`,
	`{"jobs": [{"callback": {"body": "text"}}]}`,
	`{"jobs": [{"callback": {"body": [1, 2.5e3, true, {"a": null}]}}]}`,
	`{"jobs": [{"labels": {}}]}`,
	`{"jobs": [{"labels": {"a": "1", "a": "2"}}]}`,
	`{"jobs": [{"labels": {"a": "\ud800"}}]}`,
	"{\"jobs\": [{\"labels\": {\"a\": \"\xff\"}}]}",
	`{"jobs": [{"max_fires": 1e2}]}`,
	`{"jobs": [{"max_fires": 1.0}]}`,
	`{"jobs": [{"max_fires": -1}]}`,
	`{"jobs": [{"max_fires": 4294967296}]}`,
	`{"jobs": [{"max_fires": "3"}]}`,
	`{"jobs": [{"retry": {"multiplier": 1e400}}]}`,
	`{"jobs": [{"retry": {"multiplier": -0}}]}`,
	`{"jobs": [{"pause_on_failure": 1}]}`,
	`{"jobs": [{"schedule": {"in": 5}}]}`,
	`{"jobs": [{"Schedule": {}}]}`,
	`{"jobs": [{"callback": {"bdy": "x"}}]}`,
	`{"jobs": [{"callback": {"url": "a"}, "callback": {"url": "b"}}]}`,
	`{"jobs": [{"callback": {"he\u0061ders": {}}}]}`,
	`{"jobs": [{}]} {}`,
	`{"jobs": [{}]}   `,
	`{"jobs": [{}]`,
	`{"jobs": [{},]}`,
	`{"jobs": {}}`,
	`[]`,
	`"jobs"`,
	`null`,
	`schedule=1`,
	`{"jobs": [{"id": "a\u0000b"}]}`,
	`{"jobs": [{"schedule": {"exclude": [{"date": "2026-12-25"}, {"cron": "0 0 * * *", "duration": "1h"}]}}]}`,
	// A namespace's body (namespaceBody): numbers of every kind it holds.
	`{"rate_limit": {"per_second": 2.5, "burst": 10}, "max_concurrency": 32, "allowed_hosts": ["a.test", "*.b.test"], "breaker": {"failure_rate_threshold": 0.5, "min_requests": 20, "window": "1m"}}`,
	`{"rate_limit": {"per_second": 1e-3}}`,
	`{"rate_limit": {"per_second": "1"}}`,
	`{"max_concurrency": 1.5}`,
	`{"allowed_hosts": "a.test"}`,
	`{"allowed_hosts": [null]}`,
	`{"breaker": {"Window": "1m"}}`,
	`{"retry": {"jitter": 0.1, "jitter": 0.2}}`,
}

// TestDecodersAgree holds the fast path to the slow one: where JSON v2
// accepts a body, encoding/json and strictKeys accept it too and decode
// the same value, so the fast path lets through nothing chime refused.
// Each body is tried as a batch of jobs (which holds a job's every field)
// and as a namespace.
func TestDecodersAgree(t *testing.T) {
	t.Parallel()
	for _, body := range decodeBodies {
		requireDecodersAgree[batchRequest](t, []byte(body))
		requireDecodersAgree[namespaceBody](t, []byte(body))
	}
}

func FuzzDecodersAgree(f *testing.F) {
	for _, body := range decodeBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireDecodersAgree[batchRequest](t, body)
		requireDecodersAgree[namespaceBody](t, body)
	})
}

func requireDecodersAgree[T any](t *testing.T, body []byte) {
	t.Helper()
	var fast, slow T
	fastErr := decodeBody(body, &fast)
	slowErr := decodeStrict(body, &slow)
	if len(strings.TrimSpace(string(body))) == 0 {
		require.Error(t, fastErr)
		return
	}
	if slowErr != nil {
		// What chime refused it still refuses, with the same problem.
		require.Equal(t, slowErr, fastErr, "body %q", body)
		return
	}
	if fastErr != nil {
		// Refused by JSON v2 alone: named, not let through.
		var p *Problem
		require.ErrorAs(t, fastErr, &p, "body %q", body)
		return
	}
	require.True(t, reflect.DeepEqual(slow, fast), "body %q decodes to\n%#v\nnot\n%#v", body, fast, slow)
}

// TestDecodeRefusalAfterPartialFill: a body JSON v2 refuses halfway is
// decoded again from the zero value, so nothing the fast path filled in
// leaks into the slow path's answer.
func TestDecodeRefusalAfterPartialFill(t *testing.T) {
	t.Parallel()
	var req batchRequest
	err := decodeBody([]byte(`{"jobs": [{"id": "a"}, {"id": "b", "bdy": 1}]}`), &req)
	var p *Problem
	require.ErrorAs(t, err, &p)
	require.Contains(t, fmt.Sprint(p.Errors), "jobs[1].bdy")
}

// BenchmarkDecodeBatch: a 1,000-job batch, as the burst creates jobs,
// through decodeBody (JSON v2) and through the slow path alone
// (encoding/json and strictKeys), which was the only one before.
func BenchmarkDecodeBatch(b *testing.B) {
	body := batchBody(1000)
	for _, path := range []struct {
		name   string
		decode func([]byte, any) error
	}{{"v2", decodeBody}, {"encoding-json+strictKeys", decodeStrict}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var req batchRequest
				if err := path.decode(body, &req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
