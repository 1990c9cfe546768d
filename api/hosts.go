package api

import (
	"net/url"
	"strings"
)

// hostAllowed reports whether a namespace with allowed_hosts may call the
// URL's host, and returns the host. It follows the dispatcher's rule
// (dispatcher/ssrf.go, which checks again at call time): exact host names
// or "*.example.com" (any subdomain, not the domain itself); an empty list
// allows every host. Keep the two in step.
func hostAllowed(allowed []string, rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", true // the URL check reports it
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if len(allowed) == 0 {
		return host, true
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a), "."))
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return host, true
			}
			continue
		}
		if a == host {
			return host, true
		}
	}
	return host, false
}
