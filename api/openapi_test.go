package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAPIMatchesRoutes keeps /openapi.json true: every route fiber
// serves is documented with its method, and every documented operation is
// served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "GET", "/openapi.json", "", nil)
	require.Equal(t, 200, r.status)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)

	methods := []string{"get", "put", "post", "delete", "patch"}
	var documented []string
	for path, item := range doc.Paths {
		for m := range item {
			if slices.Contains(methods, m) {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	var served []string
	for _, rt := range b.app.GetRoutes(true) {
		if rt.Method == http.MethodHead || rt.Method == "USE" {
			continue
		}
		served = append(served, rt.Method+" "+openapiPath(rt.Path))
	}
	slices.Sort(documented)
	slices.Sort(served)
	served = slices.Compact(served)
	require.Equal(t, documented, served)
}

// openapiPath turns fiber's "/v1/namespaces/:ns/jobs\:batch" into
// "/v1/namespaces/{ns}/jobs:batch".
func openapiPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.ReplaceAll(strings.Join(segs, "/"), `\:`, ":")
}
