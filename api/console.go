package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/chime-sched/chime/api/console"
)

// consoleCSP keeps the console to its own files: no script, style, image
// or connection anywhere else (style attributes are the charts' colours).
const consoleCSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// consoleRoutes serves the web console (api/console) at /ui/. Its files are
// public; every call it makes is authenticated like any client's.
func (s *server) consoleRoutes(app *fiber.App) {
	files := filesystem.New(filesystem.Config{Root: http.FS(console.Files()), Index: "index.html", MaxAge: 0})
	app.Use(console.Path, func(c *fiber.Ctx) error {
		if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
			return problem(fiber.StatusMethodNotAllowed, "method-not-allowed", "the console's files are read with GET")
		}
		if c.Path() == console.Path {
			// The pages load their files relative to /ui/.
			return c.Redirect(console.Path+"/", fiber.StatusMovedPermanently)
		}
		c.Set("Content-Security-Policy", consoleCSP)
		c.Set("X-Content-Type-Options", "nosniff")
		c.Set("Referrer-Policy", "no-referrer")
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return files(c)
	})
}
