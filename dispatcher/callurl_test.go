package dispatcher

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRememberedURLsAnswerAsParsing: a callback URL's remembered parse is
// the parse, for URLs that parse and URLs that do not, the first time and
// again, and after the cache has turned over.
func TestRememberedURLsAnswerAsParsing(t *testing.T) {
	t.Parallel()
	c := newCallURLs()
	urls := []string{
		"http://127.0.0.1:8080/hook", "https://[::1]:443/x?y=z", "https://user:pw@example.com/",
		"ftp://example.com/", "http:///nohost", "http://%zz/", "://", "", "HTTP://Example.COM:80/A",
	}
	for round := range 3 {
		for _, raw := range urls {
			require.Equal(t, parseCallURL(raw), c.parse(raw), "%q, round %d", raw, round)
		}
		if round == 1 {
			for i := range callURLsSize + 10 { // turn the cache over
				c.parse("http://127.0.0.1/" + string(rune('a'+i%26)) + "/" + string(rune(i)))
			}
		}
	}
	require.Equal(t, "127.0.0.1", c.parse("http://127.0.0.1:8080/hook").host)
	require.Equal(t, "::1", c.parse("https://[::1]:443/x?y=z").host)
	require.Error(t, c.parse("http://%zz/").err)
	require.Equal(t, "ftp", c.parse("ftp://example.com/").scheme)
}
