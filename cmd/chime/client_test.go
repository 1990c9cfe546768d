package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClientRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args               []string
		method, path, body string
		err                string
	}{
		{[]string{"ns-put", "acme"}, "PUT", "/v1/namespaces/acme", "{}", ""},
		{[]string{"ns-put", "acme", `{"spread":2}`}, "PUT", "/v1/namespaces/acme", `{"spread":2}`, ""},
		{[]string{"schedule", "acme", `{"x":1}`}, "POST", "/v1/namespaces/acme/jobs", `{"x":1}`, ""},
		{[]string{"pause", "acme", "j1"}, "POST", "/v1/namespaces/acme/jobs/j1/pause", "", ""},
		{[]string{"trigger", "acme", "j1"}, "POST", "/v1/namespaces/acme/jobs/j1/trigger", "", ""},
		{[]string{"cancel", "acme", "j1"}, "DELETE", "/v1/namespaces/acme/jobs/j1", "", ""},
		{[]string{"jobs", "acme", "--state", "paused", "--limit=5"}, "GET", "/v1/namespaces/acme/jobs?limit=5&state=paused", "", ""},
		{[]string{"jobs", "--state", "dead", "acme"}, "GET", "/v1/namespaces/acme/jobs?state=dead", "", ""},
		{[]string{"dead-letters", "acme", "--job-prefix", "order-"}, "GET", "/v1/namespaces/acme/dead-letters?job_id_prefix=order-", "", ""},
		{[]string{"dead-letters", "acme", "--replayed", "false"}, "GET", "/v1/namespaces/acme/dead-letters?replayed=false", "", ""},
		{[]string{"replay", "acme", "dl-acme/j/1#2"}, "POST", "/v1/namespaces/acme/dead-letters/dl-acme%2Fj%2F1%232/replay", "", ""},
		{[]string{"replay-all", "acme", "--limit", "10"}, "POST", "/v1/namespaces/acme/dead-letters:replay", `{"limit":10}`, ""},
		{[]string{"force", "acme", "open"}, "PUT", "/v1/namespaces/acme/breaker", `{"mode":"force_open"}`, ""},
		{[]string{"rotate-secret", "acme", "--overlap", "1h"}, "POST", "/v1/namespaces/acme/signing-secret:rotate", `{"overlap":"1h"}`, ""},
		{[]string{"revoke-key", "acme", "key_0011"}, "DELETE", "/v1/namespaces/acme/keys/key_0011", "", ""},
		{[]string{"get", "/healthz"}, "GET", "/healthz", "", ""},
		{[]string{"schedule", "acme"}, "", "", "", "needs 2 argument"},
		{[]string{"jobs", "acme", "--colour", "red"}, "", "", "", "unknown flag --colour"},
		{[]string{"force", "acme", "sideways"}, "", "", "", "open, closed or auto"},
		{[]string{"fetch", "/x"}, "", "", "", "unknown command"},
		{[]string{"get", "healthz"}, "", "", "", "starting with /"},
	}
	for _, tt := range tests {
		c, err := clientRequest(tt.args)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%q", tt.args)
			continue
		}
		require.NoError(t, err, "%q", tt.args)
		require.Equal(t, []string{tt.method, tt.path, tt.body}, []string{c.method, c.path, c.body}, "%q", tt.args)
	}
}

func TestClientCallsTheAPI(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"title":"Unauthorized","status":401}`))
			return
		}
		if r.URL.Path == "/v1/namespaces/acme/jobs" && r.Method == "GET" {
			_, _ = w.Write([]byte(`{"jobs":[{"id":"tick","state":"scheduled","fires":3,"next_fire_at":null,"last_outcome":{"result":"succeeded"}}],"next_cursor":"abc"}`))
			return
		}
		_, _ = w.Write([]byte(`{"method":"` + r.Method + `","path":"` + r.URL.Path + `","body":` + string(body) + `}`))
	}))
	defer srv.Close()
	env := func(k string) string {
		if k == "CHIME_API_URL" {
			return srv.URL
		}
		return ""
	}
	call := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := runClient(context.Background(), args, env, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := call("--token", "tok", "-o", "json", "schedule", "acme", `{"a":1}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"path": "/v1/namespaces/acme/jobs"`)

	code, out, errOut = call("--token", "tok", "jobs", "acme")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+STATE\s+NEXT FIRE\s+FIRES\s+LAST OUTCOME`, lines[0])
	require.Regexp(t, `^tick\s+scheduled\s+-\s+3\s+succeeded`, lines[1])
	require.Equal(t, "more: add --cursor abc", lines[2])

	// The token from the state dir; a refused one says where it came from.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "admin-token"), []byte("bad\n"), 0o600))
	code, _, errOut = call("--state-dir", dir, "ns", "acme")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "401")
	require.Contains(t, errOut, "the token came from "+filepath.Join(dir, "admin-token"))

	// No token anywhere: the error says where it looked.
	code, _, errOut = call("--state-dir", filepath.Join(dir, "missing"), "ns", "acme")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "looked at --token, $CHIME_TOKEN, $CHIME_ADMIN_TOKEN and "+filepath.Join(dir, "missing", "admin-token"))
}
