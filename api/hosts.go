package api

import (
	"net/url"
	"strings"

	"github.com/chime-sched/chime/schema"
)

// hostAllowed reports whether a namespace with allowed_hosts may call the
// URL's host (schema.HostAllowed, the rule the dispatcher applies again at
// call time), and returns the host.
func hostAllowed(allowed []string, rawURL string) (string, bool) {
	if len(allowed) == 0 {
		return "", true // every host is (schema.HostAllowed): nothing to parse
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", true // the URL check reports it
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	return host, schema.HostAllowed(allowed, host)
}
