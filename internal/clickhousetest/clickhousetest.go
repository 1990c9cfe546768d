// Package clickhousetest owns the ClickHouse servers chime's tests run
// against: by default the local engine from .tools/chdb (see
// infra/clickhouse), one server per test binary shared through a database
// per test; or, when CHIME_TEST_CLICKHOUSE_DSN names a server, that one.
//
// Without the local engine a test is skipped with a message saying how to
// install it, unless CHIME_REQUIRE_CLICKHOUSE is set (CI sets it), in which
// case it fails. Reading these variables here is the test-side exception to
// "only cmd/ reads the environment", as in internal/kafkatest.
package clickhousetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/chime-sched/chime/infra/clickhouse"
)

// Environment variables read by this package.
const (
	EnvDSN     = "CHIME_TEST_CLICKHOUSE_DSN"
	EnvRequire = "CHIME_REQUIRE_CLICKHOUSE"
)

// DB is one test's database.
type DB struct {
	// DSN is a clickhouse-go DSN whose database is Database.
	DSN      string
	Database string
	// Server is the local server holding it; nil on an external server.
	Server *clickhouse.Server
}

var shared struct {
	once sync.Once
	srv  *clickhouse.Server
	dir  string
	err  error
}

// Main runs the package's tests and then stops the shared server: call it
// from TestMain. (Without it the server still dies with the test binary.)
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// Tools returns the .tools dir holding the local engine, or skips (fails,
// with CHIME_REQUIRE_CLICKHOUSE) the test.
func Tools(t testing.TB) string {
	t.Helper()
	tools, err := clickhouse.FindTools(".")
	if err == nil && !clickhouse.Installed(tools) {
		err = clickhouse.ErrNotInstalled
	}
	if err != nil {
		if os.Getenv(EnvRequire) != "" {
			t.Fatalf("%s is set but: %v", EnvRequire, err)
		}
		t.Skipf("skipping: %v; or set %s to use a running server", err, EnvDSN)
	}
	return tools
}

// New returns a fresh database for the test, dropped when it ends.
func New(t testing.TB) *DB {
	t.Helper()
	base := os.Getenv(EnvDSN)
	var srv *clickhouse.Server
	if base == "" {
		tools := Tools(t)
		shared.once.Do(func() {
			shared.dir, shared.err = os.MkdirTemp("", "chime-clickhouse-*")
			if shared.err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			shared.srv, shared.err = clickhouse.Start(ctx, clickhouse.Options{Dir: shared.dir, ToolsDir: tools})
		})
		if shared.err != nil {
			t.Fatalf("clickhousetest: start the shared server: %v", shared.err)
		}
		srv = shared.srv
		base = srv.DSN("default")
	}
	db := "t_" + randHex(6)
	dsn, err := withDatabase(base, db)
	if err != nil {
		t.Fatalf("clickhousetest: %s=%q: %v", EnvDSN, base, err)
	}
	exec(t, base, "CREATE DATABASE "+db)
	t.Cleanup(func() { exec(t, base, "DROP DATABASE IF EXISTS "+db+" SYNC") })
	return &DB{DSN: dsn, Database: db, Server: srv}
}

// NewServer starts a server of the test's own, stopped when it ends, for
// tests that stop and restart it. It skips on an external server.
func NewServer(t testing.TB) *clickhouse.Server {
	t.Helper()
	if os.Getenv(EnvDSN) != "" {
		t.Skipf("skipping: needs a local server it can stop; %s names an external one", EnvDSN)
	}
	tools := Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := clickhouse.Start(ctx, clickhouse.Options{Dir: t.TempDir(), ToolsDir: tools})
	if err != nil {
		t.Fatalf("clickhousetest: start server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

func withDatabase(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Path = "/" + db
	return u.String(), nil
}

func exec(t testing.TB, dsn, q string) {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("clickhousetest: parse DSN %q: %v", dsn, err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatalf("clickhousetest: open %q: %v", dsn, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("clickhousetest: %s: %v", firstWords(q), err)
	}
}

func firstWords(q string) string {
	if f := strings.Fields(q); len(f) > 3 {
		return strings.Join(f[:3], " ")
	}
	return q
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
