package jobquery

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/bodybudget"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

// listenServer serves a query server as a scheduler does (Listen), on a
// loopback port, and returns its address.
func listenServer(t *testing.T, cfg ServerConfig) string {
	t.Helper()
	cfg.Source, cfg.Partitions, cfg.Secret = newFakeSource(0, 1, 2, 3), fakePartitions, testSecret
	s, err := NewServer(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lifecycletest.Start(t, Listen(s, ln))
	return ln.Addr().String()
}

// rawExchange opens a connection, sends head (a request's headers, with
// perhaps part of its body) and returns it with a reader of its answers.
func rawExchange(t *testing.T, addr, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// Bounds the test, should the server wait for the body; its own
	// bounds are well below.
	require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	return c, bufio.NewReader(c)
}

func readAnswer(br *bufio.Reader) (*http.Response, map[string]any, error) {
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	var body map[string]any
	raw, err := io.ReadAll(res.Body)
	if err == nil && strings.Contains(res.Header.Get("Content-Type"), "json") {
		err = json.Unmarshal(raw, &body)
	}
	return res, body, err
}

// A request whose signature is missing or wrong is refused on its
// headers, before a byte of its body is read, and its connection closed:
// an unsigned body costs the scheduler nothing, however large or slow.
func TestServerReadsNoUnsignedBody(t *testing.T) {
	t.Parallel()
	addr := listenServer(t, ServerConfig{})
	now := time.Now()
	body := []byte(`{"keys": ["a/x"]}`)
	wrong := signature.Sign([]byte("another-secret-0123456"), now, signature.Request{Method: "POST", URI: pathRows, Body: body})
	for _, tc := range []struct{ name, header, want string }{
		{"no signature", "", "no Chime-Query-Signature header"},
		{"another secret", signature.Header + ": " + wrong + "\r\n", "the signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, br := rawExchange(t, addr, "POST "+pathRows+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n"+tc.header+"\r\n")
			res, p, err := readAnswer(br)
			require.NoError(t, err)
			require.Equal(t, http.StatusUnauthorized, res.StatusCode)
			require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
			require.Contains(t, p["detail"], tc.want)
			require.True(t, res.Close, "the connection closes after the answer")
			_, err = br.ReadByte()
			require.ErrorIs(t, err, io.EOF)
			c.Close()
		})
	}
}

// Headers past a few KiB are refused: they are read before anything can
// be checked.
func TestServerBoundsHeaders(t *testing.T) {
	t.Parallel()
	addr := listenServer(t, ServerConfig{})
	_, br := rawExchange(t, addr, "GET "+pathPing+" HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("x", 64<<10)+"\r\n\r\n")
	res, _, err := readAnswer(br)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)
}

// Signed bodies are held within the process's budget: a body it has no
// room for is answered 503 with Retry-After, unread.
func TestServerBodyBudget(t *testing.T) {
	t.Parallel()
	budget, err := bodybudget.New(20 << 10)
	require.NoError(t, err)
	addr := listenServer(t, ServerConfig{Bodies: budget})
	keys := make([]string, 0, MaxKeys)
	for i := range cap(keys) {
		keys = append(keys, fmt.Sprintf("a/job-%04d", i))
	}
	body, _ := json.Marshal(rowsRequest{Keys: keys})
	require.Greater(t, len(body), 10<<10, "two bodies are over the budget")
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s: %s\r\n\r\n", pathRows, len(body), signature.Header,
		signature.Sign([]byte(testSecret), time.Now(), signature.Request{Method: "POST", URI: pathRows, Body: body}))
	type answered struct {
		i    int
		res  *http.Response
		body map[string]any
		err  error
	}
	answers := make(chan answered, 2)
	var conns [2]net.Conn
	for i := range conns {
		c, br := rawExchange(t, addr, head+string(body[:100]))
		conns[i] = c
		go func() {
			res, p, err := readAnswer(br)
			answers <- answered{i, res, p, err}
		}()
	}
	refused := <-answers
	require.NoError(t, refused.err)
	require.Equal(t, http.StatusServiceUnavailable, refused.res.StatusCode)
	require.Equal(t, problemBusy, refused.body["type"])
	require.Equal(t, "1", refused.res.Header.Get("Retry-After"))
	require.True(t, refused.res.Close)

	_, err = conns[1-refused.i].Write(body[100:])
	require.NoError(t, err)
	admitted := <-answers
	require.NoError(t, admitted.err)
	require.Equal(t, http.StatusOK, admitted.res.StatusCode, "%v", admitted.body)
	require.Len(t, admitted.body["rows"], MaxKeys)
}
