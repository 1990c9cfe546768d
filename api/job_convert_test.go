package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A callback body is sent as given: a JSON string's contents, any other
// JSON value compacted.
func TestCallbackBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      []byte
	}{
		{"absent", ``, nil},
		{"null", `null`, nil},
		{"string", `"plain <text>"`, []byte("plain <text>")},
		{"string with escapes", `"a\"b\u00e9\n"`, []byte("a\"bé\n")},
		{"string, JSON inside", `"{\"x\": 1}"`, []byte(`{"x": 1}`)},
		{"object, compacted", `{ "order" : 1, "items": [ 1, 2 ] }`, []byte(`{"order":1,"items":[1,2]}`)},
		{"object, compact already", `{"order":1,"note":"a b"}`, []byte(`{"order":1,"note":"a b"}`)},
		{"array", `[1, 2]`, []byte(`[1,2]`)},
		{"number", `42`, []byte(`42`)},
		{"leading space before a string", " \n\t\"x\"", []byte("x")},
		{"leading space before null", "  null", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, callbackBody(json.RawMessage(tc.raw)))
		})
	}
}
