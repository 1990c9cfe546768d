// Package console owns chime's web console: a small single-page app
// served by the API at /ui/ from files embedded in the binary (nothing is
// loaded from the internet). It signs in with the admin token or a
// namespace key, kept in the browser's session storage, and calls the same
// HTTP API as any client.
//
// Why no front-end toolchain: the pages are plain ES modules, CSS and
// hand-drawn SVG charts, about a thousand lines with no dependency, so
// `go build` alone builds the whole binary on a fresh clone.
package console

import (
	"embed"
	"io/fs"
)

//go:embed assets
var assets embed.FS

// Path is where the API serves the console.
const Path = "/ui"

// Files are the console's assets, index.html at the root.
func Files() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}
