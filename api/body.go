package api

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/chime-sched/chime/internal/bodybudget"
)

// Request bodies cost memory only once their request is authenticated.
// fasthttp streams bodies (StreamRequestBody) and calls admitBody when a
// request's headers are in, before it reads a byte of the body: a request
// without valid credentials gets its answer (a 401 on every route that
// needs credentials) without its body being read, and its connection is
// closed after the answer. An authenticated body is read by readBody,
// after authenticate and the request quota, within the process's body
// budget (bodybudget): beyond it the answer is a 503 with Retry-After,
// the body unread. Bodies read before the credentials were checked let
// clients without a token make chime hold all they sent: 500 slow 1 MiB
// bodies grew `chime dev` by about 1 GB.

// MaxBodyBytes bounds every request body; a larger one is a 413 problem.
const MaxBodyBytes = 1 << 20

// drainLimit: an authenticated body over MaxBodyBytes is read and thrown
// away up to this much before the 413 goes out, so that a client still
// sending it (Go's net/http writes the whole body before it reads) gets
// the answer instead of a connection reset; beyond it the connection is
// closed unread.
const drainLimit = 64 << 20

// bodyReadKey marks a request whose body readBody has read.
const bodyReadKey = "chime.body-read"

// hasBody says whether a request's headers announce a body: a length
// (fasthttp: -2 for none) or chunks (-1).
func hasBody(h *fasthttp.RequestHeader) bool {
	n := h.ContentLength()
	return n != 0 && n != -2
}

// admitBody is fasthttp's HeaderReceived hook. A body whose request
// carries a valid credential may be read (within BodyTimeout); any other
// is not: fasthttp is told the request has none, is not invited to send
// it (no 100 Continue), and the connection closes after the answer, since
// what follows on it is the rest of that body, not a request.
func (s *server) admitBody(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !hasBody(h) {
		return fasthttp.RequestConfig{}
	}
	if s.credentialed(string(h.Peek(fiber.HeaderAuthorization))) {
		return fasthttp.RequestConfig{ReadTimeout: s.cfg.BodyTimeout}
	}
	h.SetContentLength(0)
	h.Del(fiber.HeaderExpect)
	h.SetConnectionClose()
	return fasthttp.RequestConfig{}
}

// credentialed says whether an Authorization header holds the admin
// token or a valid namespace key, whatever the route: authenticate checks
// the route, once the body may be read.
func (s *server) credentialed(header string) bool {
	token, _, err := bearer(header)
	if err != nil {
		return false
	}
	if s.isAdmin(token) {
		return true
	}
	ns, ok := keyNamespace(token)
	if !ok {
		return false
	}
	ok, err = s.validKey(ns, token)
	return err == nil && ok
}

// readBody reads an authenticated request's body within the body budget;
// the routes that take a body run it after authenticate. A body over
// MaxBodyBytes is a 413 problem, one that does not arrive within
// BodyTimeout a 408.
func (s *server) readBody(c *fiber.Ctx) error {
	fc := c.Context()
	stream := fc.RequestBodyStream()
	if stream == nil {
		if len(fc.Request.Body()) > MaxBodyBytes {
			return fiber.ErrRequestEntityTooLarge
		}
		return c.Next()
	}
	announced := int64(fc.Request.Header.ContentLength())
	if !hasBody(&fc.Request.Header) {
		return c.Next()
	}
	if announced > MaxBodyBytes {
		refuseBody(c, stream, announced)
		return fiber.ErrRequestEntityTooLarge
	}
	held, ok := s.bodies.Reserve(announced, MaxBodyBytes)
	if !ok {
		c.Set(fiber.HeaderConnection, "close")
		p := problem(fiber.StatusServiceUnavailable, "busy", "chime holds as many request bodies as it may at once (%d bytes, CHIME_BODY_BUDGET); retry shortly", s.bodies.Size())
		p.retryAfter = time.Second
		return p
	}
	defer held.Release()
	body, err := bodybudget.Read(stream, announced, MaxBodyBytes)
	switch {
	case errors.Is(err, bodybudget.ErrTooLarge):
		refuseBody(c, stream, -1)
		return fiber.ErrRequestEntityTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.Set(fiber.HeaderConnection, "close")
		return problem(fiber.StatusRequestTimeout, "body-timeout", "the request body did not arrive within %s of the headers; send it at once", s.cfg.BodyTimeout)
	case err != nil:
		c.Set(fiber.HeaderConnection, "close")
		return badRequest("", "the request body could not be read: %v", err)
	}
	fc.Request.SetBodyRaw(body)
	c.Locals(bodyReadKey, true)
	return c.Next()
}

// refuseBody drains what is left of an oversized body (up to drainLimit)
// and closes the connection after the answer.
func refuseBody(c *fiber.Ctx, stream io.Reader, announced int64) {
	c.Set(fiber.HeaderConnection, "close")
	if announced <= drainLimit {
		_, _ = io.Copy(io.Discard, io.LimitReader(stream, drainLimit))
	}
}

// closeUnread closes the connection after the answer to a request whose
// body nothing read (a route that takes none, a refusal before readBody):
// the rest of that body would be read as the next request.
func closeUnread(c *fiber.Ctx) error {
	err := c.Next()
	if hasBody(&c.Context().Request.Header) && c.Locals(bodyReadKey) == nil {
		c.Set(fiber.HeaderConnection, "close")
	}
	return err
}
