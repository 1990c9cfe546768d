package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/schema"
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
	served := servedRoutes(b)
	slices.Sort(documented)
	require.Equal(t, documented, served)
}

// TestRoutesDocMatchesCode holds docs/api.md's table of routes to the
// routes the server serves.
func TestRoutesDocMatchesCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	_, table, _ := strings.Cut(string(doc), "## Routes")
	table, _, _ = strings.Cut(table, "\n#")
	var documented []string
	for _, line := range strings.Split(table, "\n") {
		cell, ok := strings.CutPrefix(line, "| `")
		if !ok {
			continue
		}
		route, _, _ := strings.Cut(cell, "`")
		route, _, _ = strings.Cut(route, "?")
		documented = append(documented, route)
	}
	served := servedRoutes(b)
	slices.Sort(documented)
	require.Equal(t, served, documented)
}

// servedRoutes are the server's routes as "METHOD /path/{param}", sorted,
// each once.
func servedRoutes(b *testBundle) []string {
	var served []string
	for _, rt := range b.app.GetRoutes(true) {
		if rt.Method == http.MethodHead || rt.Method == "USE" {
			continue
		}
		served = append(served, rt.Method+" "+openapiPath(rt.Path))
	}
	slices.Sort(served)
	return slices.Compact(served)
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

// TestLimitsDocMatchesCode holds docs/api.md's table of limits to the
// constants the validation uses.
func TestLimitsDocMatchesCode(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	for _, row := range []string{
		fmt.Sprintf("| request body | %d bytes |", api.MaxBodyBytes),
		fmt.Sprintf("| `jobs` per batch | %d |", api.MaxBatch),
		fmt.Sprintf("| namespace | %d bytes |", schema.MaxNamespaceLen),
		fmt.Sprintf("| job `id` | %d bytes |", schema.MaxJobIDLen),
		fmt.Sprintf("| `callback.url` | %d bytes |", schema.MaxURLLen),
		fmt.Sprintf("| `callback.headers` | %d entries |", schema.MaxHeaders),
		fmt.Sprintf("| `callback.headers` name | %d bytes |", schema.MaxHeaderNameLen),
		fmt.Sprintf("| `callback.headers` value | %d bytes |", schema.MaxHeaderValueLen),
		fmt.Sprintf("| `callback.headers` names and values together | %d bytes |", schema.MaxHeadersBytes),
		fmt.Sprintf("| `callback.body` | %d bytes |", schema.MaxHTTPBody),
		fmt.Sprintf("| `callback.timeout` | %d s |", int(schema.MaxHTTPTimeout/time.Second)),
		fmt.Sprintf("| `labels` | %d entries |", schema.MaxLabels),
		fmt.Sprintf("| `labels` key | %d bytes |", schema.MaxLabelKeyLen),
		fmt.Sprintf("| `labels` value | %d characters |", schema.MaxLabelValueLen),
		fmt.Sprintf("| Kafka target `value` | %d bytes |", schema.MaxKafkaValue),
		fmt.Sprintf("| Kafka target `key` | %d bytes |", schema.MaxKafkaKey),
	} {
		require.Contains(t, string(doc), row)
	}
}
