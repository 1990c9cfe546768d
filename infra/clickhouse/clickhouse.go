// Package clickhouse owns the local ClickHouse server that `chime dev`, `make
// run` and the tests use when no external server is configured: the
// ClickHouse engine shipped as libchdb.so (npm package
// @chdb/lib-linux-x64-gnu, installed by `make clickhouse` into .tools/chdb),
// run as a child process by a small C host (infra/clickhouse/host/chimech.c,
// built by `make clickhouse` into bin/) that opens the HTTP listener on
// 127.0.0.1. Clients use the HTTP protocol (clickhouse-go's http:// DSNs):
// the engine, as embedded, stops on any failed login over the native
// protocol (see the host), and would give every local user a way to stop it.
//
// The engine ignores SIGTERM: Stop ends its keep-alive query over HTTP
// (KILL QUERY ... SYNC), which makes the host exit, and kills it if that does
// not happen in time. Data lives under Options.Dir, which is locked against
// a second server.
//
// Anyone on the host can reach 127.0.0.1, and the server holds every
// namespace's callback headers and bodies (dead letters), so it lets in one
// user only, with a password (Options.User, Options.Password); see users.go.
package clickhouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chime-sched/chime/infra/credential"
	"github.com/chime-sched/chime/infra/dirlock"
	"github.com/chime-sched/chime/internal/freeport"
)

// Version is the pinned npm package version of the engine; the Makefile pins
// the same (CHDB_VERSION).
const Version = "26.7.3-stable.1"

// Where the engine is under a tools dir (the repository's .tools), and the
// host under the repository (bin/, beside bin/chime): the host is built from
// this repository's source, so each checkout builds the one it needs, while
// the engine is a download that checkouts may share.
const (
	libRel  = "chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"
	hostRel = "bin/chimech"
)

// ErrNotInstalled says the engine or its host is missing.
var ErrNotInstalled = errors.New("local ClickHouse is not installed: run `make clickhouse` (installs the pinned @chdb/lib-linux-x64-gnu into .tools/chdb and builds the host into bin/chimech)")

// Options configures Start.
type Options struct {
	// Dir holds the server's data; it is created and locked.
	Dir string
	// Lib is libchdb.so and Host the chimech binary; ToolsDir fills in
	// whichever is empty (Host: bin/chimech beside ToolsDir).
	Lib, Host string
	// ToolsDir is the repository's .tools dir; empty means FindTools(".").
	ToolsDir string
	// HTTPPort on 127.0.0.1; 0 picks a free port.
	HTTPPort int
	// Log receives the server's own output (stdout and stderr); nil
	// discards it.
	Log io.Writer
	// StartTimeout bounds the wait for /ping (default 2 minutes: the first
	// start of a fresh dir loads a 500 MB library and creates the system
	// databases).
	StartTimeout time.Duration
	// User and Password are the only credential the server accepts (see
	// users.go). User defaults to DefaultUser; an empty Password is
	// generated, for the life of the Server and its Restarts. `chime dev`
	// keeps its own in the state dir, so other processes can be given it.
	User, Password string
}

// DefaultUser is the user chime's clients log in as when Options.User is
// empty.
const DefaultUser = "chime"

// Server is a running local ClickHouse.
type Server struct {
	opts     Options
	cmd      *exec.Cmd
	lock     *dirlock.Lock
	exited   chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

// FindTools looks for a .tools dir holding the engine in from and its
// parents, and returns it.
func FindTools(from string) (string, error) {
	dir, err := filepath.Abs(from)
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, ".tools")
		if _, err := os.Stat(filepath.Join(cand, libRel)); err == nil {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNotInstalled
		}
		dir = parent
	}
}

// Installed reports whether toolsDir holds the engine, and the repository
// it is in the host.
func Installed(toolsDir string) bool {
	for _, p := range []string{filepath.Join(toolsDir, libRel), hostPath(toolsDir)} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func hostPath(toolsDir string) string { return filepath.Join(filepath.Dir(toolsDir), hostRel) }

// Start runs the server and returns once it answers /ping. ctx bounds the
// start only; the server runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("clickhouse: Options.Dir is empty")
	}
	if opts.Lib == "" || opts.Host == "" {
		tools := opts.ToolsDir
		if tools == "" {
			t, err := FindTools(".")
			if err != nil {
				return nil, err
			}
			tools = t
		}
		if opts.Lib == "" {
			opts.Lib = filepath.Join(tools, libRel)
		}
		if opts.Host == "" {
			opts.Host = hostPath(tools)
		}
	}
	for _, p := range []string{opts.Lib, opts.Host} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w (%v)", ErrNotInstalled, err)
		}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if err := checkUser(opts.User); err != nil {
		return nil, err
	}
	if opts.Password == "" {
		opts.Password = credential.NewPassword()
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	lock, err := dirlock.Acquire(dir, ".chime-clickhouse.lock", "clickhouse data dir")
	if err != nil {
		return nil, err
	}
	// The dir holds the data and the users file: for its owner only, even
	// when it was made before by something else.
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = lock.Release()
		return nil, fmt.Errorf("clickhouse data dir %q: %w", dir, err)
	}
	if err := writeUsers(dir, opts.User, opts.Password); err != nil {
		_ = lock.Release()
		return nil, err
	}
	s := &Server{opts: opts, lock: lock, exited: make(chan struct{})}
	if err := s.start(ctx); err != nil {
		_ = lock.Release()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	var err error
	if s.opts.HTTPPort == 0 {
		if s.opts.HTTPPort, err = freeport.Get(); err != nil {
			return fmt.Errorf("clickhouse: pick a free port: %w", err)
		}
	}
	data := filepath.Join(s.opts.Dir, "data") + "/"
	cmd := exec.Command(s.opts.Host, s.opts.Lib, data, strconv.Itoa(s.opts.HTTPPort))
	// The engine reads config.xml from its working dir (users.go).
	cmd.Dir = s.opts.Dir
	out := s.opts.Log
	if out == nil {
		out = io.Discard
	}
	// The last lines the server wrote say why it did not start (a bad
	// users file, a port in use); the host exits 0 on some of them.
	tail := &tailWriter{max: 2 << 10}
	out = io.MultiWriter(out, tail)
	cmd.Stdout, cmd.Stderr = out, out
	// Pdeathsig: a server whose parent died (kill -9 of chime, a crashed
	// test binary) must not keep the ports and the data dir.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clickhouse: start %s: %w", s.opts.Host, err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	deadline := time.NewTimer(s.opts.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ping(ctx) == nil {
			return nil
		}
		select {
		case <-s.exited:
			exit := "exit status 0"
			if s.waitErr != nil {
				exit = s.waitErr.Error()
			}
			if last := tail.String(); last != "" {
				return fmt.Errorf("clickhouse: server exited during start (%s): %s", exit, last)
			}
			return fmt.Errorf("clickhouse: server exited during start (%s); is port %d in use?", exit, s.opts.HTTPPort)
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-deadline.C:
			s.kill()
			return fmt.Errorf("clickhouse: no answer on %s/ping after %s", s.HTTPURL(), s.opts.StartTimeout)
		case <-tick.C:
		}
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.HTTPURL()+"/ping", nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ping: %s", resp.Status)
	}
	return nil
}

// Query runs one statement over HTTP and returns its output: for setup
// and shutdown, not for chime's data path (that uses the native protocol).
func (s *Server) Query(ctx context.Context, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.HTTPURL()+"/", bytes.NewBufferString(q))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(s.opts.User, s.opts.Password)
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clickhouse: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// DSN is the clickhouse-go DSN (clickhouse.ParseDSN) of database, over
// HTTP, with the server's credential.
func (s *Server) DSN(database string) string {
	u := url.URL{Scheme: "http", User: url.UserPassword(s.opts.User, s.opts.Password), Host: s.Addr(), Path: "/" + database}
	return u.String()
}

// User is the user clients log in as.
func (s *Server) User() string { return s.opts.User }

// Password is User's password.
func (s *Server) Password() string { return s.opts.Password }

// Addr is the HTTP interface's address (host:port).
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.HTTPPort)) }

// HTTPURL is the HTTP interface's base URL.
func (s *Server) HTTPURL() string { return "http://" + s.Addr() }

// Dir is the server's data dir.
func (s *Server) Dir() string { return s.opts.Dir }

// HTTPPort is the port of the HTTP interface: Options.HTTPPort, or the one
// picked. A server started again on it keeps its DSN.
func (s *Server) HTTPPort() int { return s.opts.HTTPPort }

// Exited is closed once the server's process has ended: stopped, killed or
// crashed. ExitErr then says how.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr is how the server's process ended (exec's Wait error: nil for
// exit status 0), once Exited is closed; nil before.
func (s *Server) ExitErr() error {
	select {
	case <-s.exited:
		return s.waitErr
	default:
		return nil
	}
}

// Stop ends the server: its keep-alive query is killed over HTTP, which
// lets the engine shut down; a server still running 15 s later is killed.
// The data dir's lock is released. Stop is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.Query(ctx, "KILL QUERY WHERE query LIKE '%sleepEachRow%' AND query_id != queryID() SYNC")
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			s.kill()
		}
		s.stopErr = s.lock.Release()
	})
	return s.stopErr
}

// Kill ends the server at once (SIGKILL), as a crash would, and releases
// the lock. Tests use it; data already written survives.
func (s *Server) Kill() error {
	s.stopOnce.Do(func() {
		s.kill()
		s.stopErr = s.lock.Release()
	})
	return s.stopErr
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Restart starts a stopped server again on the same dir and ports.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	return Start(ctx, s.opts)
}
