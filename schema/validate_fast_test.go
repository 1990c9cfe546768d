package schema

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// headersFine is the quick path of header validation: it must accept
// exactly what headersError finds nothing wrong with.
func TestHeadersFineAgreesWithHeadersError(t *testing.T) {
	t.Parallel()
	fixed := []map[string]string{
		nil,
		{},
		{"Content-Type": "application/json"},
		{"X-Chime-Attempt": "1"},
		{"x-CHIME-anything": "1"},
		{"Webhook-Id": "1"},
		{"HOST": "example.com"},
		{"Connection": "close"},
		{"bad name": "x"},
		{"": "x"},
		{"X-A": "line\r\nInjected: 1"},
		{"X-A": "tab\tis fine"},
		{"X-A": "\xff"},
		{"X-A": "\x7f"},
		{"X-" + strings.Repeat("a", MaxHeaderNameLen): "x"},
		{"X-A": strings.Repeat("v", MaxHeaderValueLen+1)},
		{"X-A": strings.Repeat("v", MaxHeaderValueLen), "X-B": strings.Repeat("v", MaxHeaderValueLen)},
		{"Hoſt": "x"},
	}
	many := map[string]string{}
	for i := range MaxHeaders + 1 {
		many["X-H"+strings.Repeat("i", i)] = "v"
	}
	fixed = append(fixed, many)

	// Random maps from parts that each break one rule or none.
	names := []string{"X-Trace", "Content-Type", "authorization", "X-Chime-Job", "webhook-signature", "Idempotency-Key",
		"Transfer-Encoding", "bad:name", "ünicode", "X-" + strings.Repeat("n", MaxHeaderNameLen)}
	values := []string{"", "v", "a\tb", "a\nb", "\x00", "\xc3\x28", "é", strings.Repeat("v", MaxHeaderValueLen/2+1), strings.Repeat("v", MaxHeaderValueLen+1)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		h := map[string]string{}
		for range rng.IntN(5) {
			h[names[rng.IntN(len(names))]] = values[rng.IntN(len(values))]
		}
		fixed = append(fixed, h)
	}
	for _, h := range fixed {
		err := headersError("f", h)
		require.Equal(t, err == nil, headersFine(h), "headers %q: headersError says %v", h, err)
	}
}

// A URL is remembered only once it passed; one refused is refused again,
// with its reason, however often it comes.
func TestCheckURLRemembersOnlyValid(t *testing.T) {
	t.Parallel()
	const good = "https://remembered.example.com/hook"
	require.Nil(t, checkURL(good))
	require.True(t, validURLs.Contains(good))
	require.Nil(t, checkURL(good))

	const bad = "https://user:pw@refused.example.com/hook"
	for range 2 {
		err := checkURL(bad)
		require.NotNil(t, err)
		require.Contains(t, err.Reason, "contains credentials")
		require.False(t, validURLs.Contains(bad))
	}
}
