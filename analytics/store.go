package analytics

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ErrUnavailable wraps failures to reach ClickHouse (down, refused,
// timed out): an API answers them with 503, a sink retries.
var ErrUnavailable = errors.New("analytics: ClickHouse is unavailable")

// ErrInvalid wraps bad query arguments (an API answers 400).
var ErrInvalid = errors.New("analytics: invalid query")

// Options configures Open.
type Options struct {
	// Retention is how long rows are kept (whole days; 0 means
	// DefaultRetention).
	Retention time.Duration
	// MaxOpenConns caps the connection pool (default 8).
	MaxOpenConns int
}

// Store is chime's analytics database: the writes of the sink and the
// operators' queries.
type Store struct {
	conn driver.Conn
}

// Open connects to the ClickHouse server and database dsn names
// (clickhouse://host:9000/db?username=...), creates the database if needed
// and applies the migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	o, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("analytics: ClickHouse DSN %q: %w", RedactDSN(dsn), err)
	}
	if opts.MaxOpenConns > 0 {
		o.MaxOpenConns = opts.MaxOpenConns
	} else if o.MaxOpenConns == 0 {
		o.MaxOpenConns = 8
	}
	if o.DialTimeout == 0 || o.DialTimeout > 5*time.Second {
		o.DialTimeout = 5 * time.Second
	}
	if db := o.Auth.Database; db != "" && db != "default" {
		if err := createDatabase(ctx, o, db); err != nil {
			return nil, err
		}
	}
	conn, err := ch.Open(o)
	if err != nil {
		return nil, fmt.Errorf("analytics: open %s: %w", RedactDSN(dsn), err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: ping %v: %w", ErrUnavailable, o.Addr, err)
	}
	if err := Migrate(ctx, conn, opts.Retention); err != nil {
		conn.Close()
		return nil, err
	}
	return &Store{conn: conn}, nil
}

// RedactDSN is dsn fit for logs and errors: the password in its user
// info and in a password= parameter replaced by "xxxxx". A DSN that does
// not parse as a URL is not shown at all.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a DSN that does not parse as a URL; not shown, it may hold a password)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

func createDatabase(ctx context.Context, o *ch.Options, db string) error {
	oo := *o
	oo.Auth.Database = "default"
	conn, err := ch.Open(&oo)
	if err != nil {
		return fmt.Errorf("analytics: open %v: %w", o.Addr, err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(db)); err != nil {
		return classify(fmt.Sprintf("create database %s", db), err)
	}
	return nil
}

func quoteIdent(s string) string {
	out := []byte{'`'}
	for i := 0; i < len(s); i++ {
		if s[i] == '`' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(append(out, '`'))
}

// Conn is the underlying connection, for tests and benchmarks.
func (s *Store) Conn() driver.Conn { return s.conn }

// Ping checks that the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.conn.Ping(ctx); err != nil {
		return classify("ping", err)
	}
	return nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.conn.Close() }

// classify wraps err with ErrUnavailable unless the server itself
// answered it (a ClickHouse exception: a bug or bad input, not an outage).
func classify(what string, err error) error {
	var exc *ch.Exception
	if errors.As(err, &exc) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("analytics: %s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}
