package api

import (
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// allowTable answers which methods a path takes, for the Allow header of
// a 405 (RFC 9110 15.5.6 requires it): fiber's routes, matched segment by
// segment (":name" matches any one segment).
type allowTable struct {
	routes []allowRoute
}

type allowRoute struct {
	segs    []string
	methods []string
}

func newAllowTable(app *fiber.App) *allowTable {
	t := &allowTable{}
	for _, r := range app.GetRoutes(true) {
		path := strings.ReplaceAll(r.Path, `\:`, ":")
		segs := strings.Split(strings.Trim(path, "/"), "/")
		i := slices.IndexFunc(t.routes, func(a allowRoute) bool { return slices.Equal(a.segs, segs) })
		if i < 0 {
			t.routes = append(t.routes, allowRoute{segs: segs})
			i = len(t.routes) - 1
		}
		if !slices.Contains(t.routes[i].methods, r.Method) {
			t.routes[i].methods = append(t.routes[i].methods, r.Method)
		}
	}
	return t
}

// of is the Allow value for path, "" if no route matches it.
func (t *allowTable) of(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var methods []string
	for _, r := range t.routes {
		if matchSegs(r.segs, segs) {
			for _, m := range r.methods {
				if !slices.Contains(methods, m) {
					methods = append(methods, m)
				}
			}
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

func matchSegs(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if strings.HasPrefix(p, ":") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return true
}
