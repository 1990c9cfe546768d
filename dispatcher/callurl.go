package dispatcher

import (
	"net/url"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
)

// callURL is what a call needs of its callback URL before it is made: its
// scheme and host, or why it does not parse; and the name of its host's
// gate (lanes.go).
type callURL struct {
	scheme, host string
	gate         string
	err          error
}

// callURLs remembers the parses of recent callback URLs. url.Parse was
// about 3 % of a fired job's CPU in a burst, and most callbacks go to
// URLs called moments before (a job's retries, a recurring job, a
// receiver that takes the job in its body). A parse depends on the string
// alone, so a remembered one answers exactly as parsing again would.
type callURLs struct{ cache *lru.Cache[string, callURL] }

// callURLsSize bounds the URLs remembered: at ~200 B each, under 1 MB.
const callURLsSize = 4096

func newCallURLs() callURLs {
	c, err := lru.New[string, callURL](callURLsSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return callURLs{cache: c}
}

// parse returns raw's scheme and host, parsing it at most once while it
// is remembered.
func (c callURLs) parse(raw string) callURL {
	if c.cache == nil { // a Dispatcher built without New (tests)
		return parseCallURL(raw)
	}
	if u, ok := c.cache.Get(raw); ok {
		return u
	}
	cu := parseCallURL(raw)
	c.cache.Add(raw, cu)
	return cu
}

func parseCallURL(raw string) callURL {
	var cu callURL
	u, err := url.Parse(raw)
	if err != nil {
		cu.err = err
	} else {
		cu.scheme, cu.host = u.Scheme, u.Hostname()
		// As fasthttp keys its host clients: TLS or not, and the host
		// with its port as written (lower-cased).
		if u.Host != "" {
			cu.gate = strings.ToLower(u.Scheme + "://" + u.Host)
		}
	}
	return cu
}
