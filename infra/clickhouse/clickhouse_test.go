package clickhouse_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/internal/clickhousetest"
)

func TestMain(m *testing.M) { clickhousetest.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestServerKeepsDataAcrossStopAndKill starts the local server, writes over
// the native protocol, stops it cleanly, restarts, kills it, restarts, and
// reads the rows back each time.
func TestServerKeepsDataAcrossStopAndKill(t *testing.T) {
	t.Parallel()
	srv := clickhousetest.NewServer(t)
	ctx := ctxT(t)

	conn := open(t, srv.DSN("default"))
	require.NoError(t, conn.Exec(ctx, "CREATE TABLE kv (k UInt32, v String) ENGINE = MergeTree ORDER BY k"))
	require.NoError(t, conn.Exec(ctx, "INSERT INTO kv VALUES (1, 'a'), (2, 'b')"))
	conn.Close()

	// A second server on the same dir is refused while the first runs.
	_, err := clickhouse.Start(ctx, clickhouse.Options{Dir: srv.Dir(), ToolsDir: clickhousetest.Tools(t)})
	require.ErrorContains(t, err, "in use")

	require.NoError(t, srv.Stop())
	srv, err = srv.Restart(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), count(t, srv.DSN("default")))

	require.NoError(t, srv.Kill())
	srv, err = srv.Restart(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	require.Equal(t, uint64(2), count(t, srv.DSN("default")))

	out, err := srv.Query(ctx, "SELECT version()")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "26."), "version %q", out)
}

func TestDatabasePerTest(t *testing.T) {
	t.Parallel()
	db := clickhousetest.New(t)
	conn := open(t, db.DSN)
	var name string
	require.NoError(t, conn.QueryRow(ctxT(t), "SELECT currentDatabase()").Scan(&name))
	require.Equal(t, db.Database, name)
}

func TestStartWithoutEngineSaysHowToInstall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := clickhouse.Start(context.Background(), clickhouse.Options{Dir: dir, ToolsDir: filepath.Join(dir, "no-tools")})
	require.ErrorIs(t, err, clickhouse.ErrNotInstalled)
	require.ErrorContains(t, err, "make clickhouse")
}

func open(t *testing.T, dsn string) ch.Conn {
	opts, err := ch.ParseDSN(dsn)
	require.NoError(t, err)
	conn, err := ch.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func count(t *testing.T, dsn string) uint64 {
	conn := open(t, dsn)
	var n uint64
	require.NoError(t, conn.QueryRow(ctxT(t), "SELECT count() FROM kv").Scan(&n))
	return n
}

// TestServerRefusesClientsWithoutItsCredential: anyone on the host can
// reach 127.0.0.1, and the server holds every namespace's callback headers
// and bodies (dead letters). Only the credential the server was started
// with opens it: not the user `default`, with or without a password, not a
// wrong password; and refusing them does not stop the server.
func TestServerRefusesClientsWithoutItsCredential(t *testing.T) {
	t.Parallel()
	srv := clickhousetest.NewServer(t)
	ctx := ctxT(t)
	var n uint8
	require.NoError(t, open(t, srv.DSN("default")).QueryRow(ctx, "SELECT 1").Scan(&n), "with the credential")

	addr := srv.Addr()
	for _, dsn := range []string{
		"http://" + addr + "/default",
		"http://default@" + addr + "/default",
		"http://default:x@" + addr + "/default",
		"http://" + srv.User() + ":wrong@" + addr + "/default",
		"http://nobody@" + addr + "/default",
	} {
		err := open(t, dsn).Ping(ctx)
		require.Error(t, err, "%s must be refused", dsn)
		require.Regexp(t, "Authentication failed|cannot log in", err.Error(), dsn)
	}
	// Over plain HTTP, a request is refused with 401 or 403 and a reason,
	// never a 500 naming an internal user id.
	for _, tc := range []struct {
		name   string
		auth   func(*http.Request)
		status int
		says   string
	}{
		{"no credential", func(*http.Request) {}, http.StatusUnauthorized, clickhouse.NoCredentialAnswer},
		{"credential in the URL", func(r *http.Request) {
			r.URL.RawQuery = url.Values{"user": {srv.User()}, "password": {srv.Password()}}.Encode()
		}, http.StatusUnauthorized, clickhouse.NoCredentialAnswer},
		{"basic default, no password", func(r *http.Request) { r.SetBasicAuth("default", "") }, http.StatusForbidden, clickhouse.DefaultUserAnswer},
		{"basic default, a password", func(r *http.Request) { r.SetBasicAuth("default", "x") }, http.StatusForbidden, clickhouse.DefaultUserAnswer},
		{"header default", func(r *http.Request) { r.Header.Set("X-ClickHouse-User", "default") }, http.StatusForbidden, clickhouse.DefaultUserAnswer},
		{"wrong password", func(r *http.Request) { r.SetBasicAuth(srv.User(), "wrong") }, http.StatusForbidden, "Authentication failed"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.HTTPURL()+"/", strings.NewReader("SELECT name FROM system.databases"))
		require.NoError(t, err)
		tc.auth(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.name, body)
		require.Contains(t, string(body), tc.says, tc.name)
	}
	res, err := http.Get(srv.HTTPURL() + "/ping")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "/ping answers without a credential")
	require.NoError(t, open(t, srv.DSN("default")).QueryRow(ctx, "SELECT 1").Scan(&n), "the refusals did not stop the server")

	// The users file holds the password's hash only; both files are the
	// owner's alone.
	for _, name := range []string{"users.xml", "config.xml"} {
		fi, err := os.Stat(filepath.Join(srv.Dir(), name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	users, err := os.ReadFile(filepath.Join(srv.Dir(), "users.xml"))
	require.NoError(t, err)
	require.NotContains(t, string(users), srv.Password())
}
