package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/internal/bodybudget"
)

// listen serves the app on a loopback port until the test ends: what the
// server reads of a body, and when, shows only to a client on a socket.
func (b *testBundle) listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	return ln.Addr().String()
}

// rawConn speaks HTTP/1.1 by hand, to send what a well-behaved client
// would not: a body announced and withheld, or sent slowly.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// A bound on the whole exchange, so that a server that waits for the
	// body fails the test instead of hanging it; the server's own bounds
	// are well below.
	require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, s string) {
	t.Helper()
	_, err := io.WriteString(c, s)
	require.NoError(t, err)
}

// answer reads one response.
func (c *rawConn) answer(t *testing.T) response {
	t.Helper()
	r, err := c.read()
	require.NoError(t, err)
	return r
}

func (c *rawConn) read() (response, error) {
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	if res.Close {
		r.header.Set("Connection", "close")
	}
	return r, nil
}

// requireClosed: the server closes the connection after its answer.
func (c *rawConn) requireClosed(t *testing.T) {
	t.Helper()
	_, err := c.br.ReadByte()
	require.Error(t, err, "the server closes the connection")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not timed out: %v", err)
}

// A request without valid credentials is answered as soon as its headers
// are in, without its body being read, and its connection is closed: the
// body costs the server nothing, however large or slow. (fasthttp reads
// ahead 8 KiB of a body before the handler runs; the answer came only
// once those had arrived, or after the read timeout, 30 s, with a 408.)
func TestBodiesWithoutCredentialsAreNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.namespace(t, "shop", nil)
	addr := b.listen(t)
	const announced = "Content-Type: application/json\r\nContent-Length: 1048576\r\n"
	for _, tc := range []struct {
		name, request string
		status        int
	}{
		{"no credentials", "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\n" + announced, 401},
		{"a wrong token", "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nobody-at-all\r\n" + announced, 401},
		{"a key of no namespace", "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ck_shop.not-a-key\r\n" + announced, 401},
		{"chunked", "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n", 401},
		{"expecting 100 Continue", "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" + announced, 401},
		{"a public route", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + announced, 200},
		{"an unknown method", "BREW /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\n" + announced, 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialRaw(t, addr)
			c.send(t, tc.request+"\r\n") // the headers, and not a byte of the body
			r := c.answer(t)
			require.Equal(t, tc.status, r.status, "%s", r.raw)
			if tc.status != 200 {
				require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			}
			require.Equal(t, "close", r.header.Get("Connection"))
			c.requireClosed(t)
		})
	}
	require.Empty(t, b.jobs.commands())
}

// An authenticated body is read, and the connection stays open for the
// next request; a body on a route that reads none closes the connection
// after the answer (what follows would be the rest of that body).
func TestBodiesOfAuthenticatedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	addr := b.listen(t)
	c := dialRaw(t, addr)
	job := `{"schedule": {"at": "2026-11-23T11:00:00Z"}, "callback": {"url": "https://example.com/hook"}}`
	for range 2 {
		c.send(t, fmt.Sprintf("POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", key, len(job), job))
		r := c.answer(t)
		require.Equal(t, 201, r.status, "%s", r.raw)
		require.Empty(t, r.header.Get("Connection"))
	}
	require.Len(t, b.jobs.commands(), 2)

	c.send(t, fmt.Sprintf("GET /v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 5\r\n\r\nhello", adminToken))
	r := c.answer(t)
	require.Equal(t, 200, r.status, "%s", r.raw)
	require.Equal(t, "close", r.header.Get("Connection"))
	c.requireClosed(t)
}

// The bodies held at once stay within the process's budget: a body the
// budget has no room for is answered 503 with Retry-After, unread, and
// its connection closed.
func TestBodyBudget(t *testing.T) {
	t.Parallel()
	budget, err := bodybudget.New(64 << 10)
	require.NoError(t, err)
	b := setup(t, func(c *api.Config) { c.Bodies = budget })
	key := b.namespace(t, "shop", nil)
	addr := b.listen(t)
	// 40 KiB bodies of which 10 KiB are sent: past fasthttp's 8 KiB
	// read-ahead, so the handler holds its room while it waits for more.
	body := `{"schedule": {"at": "2026-11-23T11:00:00Z"}, "callback": {"url": "https://example.com/hook", "body": "` + strings.Repeat("x", 40<<10) + `"}}`
	head := fmt.Sprintf("POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", key, len(body))

	// Two of them: the budget has room for one. The one refused is
	// answered at once; the other waits for the rest of its body.
	type answered struct {
		i   int
		r   response
		err error
	}
	answers := make(chan answered, 2)
	var conns [2]*rawConn
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		conns[i].send(t, head+body[:10<<10])
		go func() {
			r, err := conns[i].read()
			answers <- answered{i, r, err}
		}()
	}
	refused := <-answers
	require.NoError(t, refused.err)
	r := refused.r
	requireProblem(t, r, 503, "")
	require.Equal(t, "https://chime.dev/problems/busy", r.body["type"])
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Equal(t, "close", r.header.Get("Connection"))

	conns[1-refused.i].send(t, body[10<<10:])
	admitted := <-answers
	require.NoError(t, admitted.err)
	require.Equal(t, 201, admitted.r.status, "%s", admitted.r.raw)
	// Its room is back.
	third := dialRaw(t, addr)
	third.send(t, head+body)
	r = third.answer(t)
	require.Equal(t, 201, r.status, "%s", r.raw)
}

// A client that sends its headers or its body too slowly is cut off: the
// server does not wait for it beyond HeaderTimeout and BodyTimeout.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.HeaderTimeout, c.BodyTimeout = 500*time.Millisecond, 500*time.Millisecond })
	key := b.namespace(t, "shop", nil)
	addr := b.listen(t)

	headers := dialRaw(t, addr)
	headers.send(t, "POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\n") // and no end of the headers
	r := headers.answer(t)
	requireProblem(t, r, 408, "")
	headers.requireClosed(t)

	body := dialRaw(t, addr)
	body.send(t, fmt.Sprintf("POST /v1/namespaces/shop/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 20000\r\n\r\n%s", key, strings.Repeat(" ", 10000)))
	r = body.answer(t)
	requireProblem(t, r, 408, "")
	require.Equal(t, "https://chime.dev/problems/body-timeout", r.body["type"])
	body.requireClosed(t)
}

// docs/api.md's bounds on slow clients are the code's.
func TestBodyBoundsDocMatchesCode(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	for _, want := range []string{
		fmt.Sprintf("its accept) | %d s | 408, connection closed |", int(api.DefaultHeaderTimeout/time.Second)),
		fmt.Sprintf("from the end of its headers | %d s | 408 `body-timeout`", int(api.DefaultBodyTimeout/time.Second)),
		fmt.Sprintf("| connections at once | %d,%03d | 503, closed |", api.MaxConnections/1000, api.MaxConnections%1000),
		fmt.Sprintf("(`CHIME_BODY_BUDGET`, %d MiB", bodybudget.Default>>20),
	} {
		require.True(t, strings.Contains(string(doc), want), "docs/api.md says %q", want)
	}
}
