package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
		{[]string{"schedule", "acme", `{"x":1}`}, "POST", "/v1/namespaces/acme/jobs", `{"x":1}`, ""},
		{[]string{"pause", "acme", "j1"}, "POST", "/v1/namespaces/acme/jobs/j1/pause", "", ""},
		{[]string{"cancel", "acme", "j1"}, "DELETE", "/v1/namespaces/acme/jobs/j1", "", ""},
		{[]string{"get", "/healthz"}, "GET", "/healthz", "", ""},
		{[]string{"schedule", "acme"}, "", "", "", "needs 2 argument"},
		{[]string{"fetch", "/x"}, "", "", "", "unknown shortcut"},
		{[]string{"get", "healthz"}, "", "", "", "starting with /"},
	}
	for _, tt := range tests {
		m, p, b, err := clientRequest(tt.args)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%q", tt.args)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, []string{tt.method, tt.path, tt.body}, []string{m, p, b}, "%q", tt.args)
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
		_, _ = w.Write([]byte(`{"method":"` + r.Method + `","path":"` + r.URL.Path + `","body":` + string(body) + `}`))
	}))
	defer srv.Close()
	env := func(k string) string {
		if k == "CHIME_API_URL" {
			return srv.URL
		}
		return ""
	}
	var out, errOut strings.Builder
	code := runClient(context.Background(), []string{"--token", "tok", "schedule", "acme", `{"a":1}`}, env, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), `"path": "/v1/namespaces/acme/jobs"`)

	out.Reset()
	errOut.Reset()
	code = runClient(context.Background(), []string{"--token", "bad", "ns-get", "acme"}, env, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "401")
}
