package api

import (
	_ "embed"

	"github.com/gofiber/fiber/v2"
)

// openapiDoc describes every route; TestOpenAPIMatchesRoutes keeps it true.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *server) openapi(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openapiDoc)
}
