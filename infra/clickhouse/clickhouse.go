// Package clickhouse owns the local ClickHouse server that `chime dev`, `make
// run` and the tests use when no external server is configured: the
// ClickHouse engine shipped as libchdb.so (npm package
// @chdb/lib-linux-x64-gnu, installed by `make clickhouse` into .tools/chdb),
// run as a child process by a small C host (infra/clickhouse/host/chimech.c)
// that opens the native and HTTP listeners on 127.0.0.1.
//
// The engine ignores SIGTERM: Stop ends its keep-alive query over HTTP
// (KILL QUERY ... SYNC), which makes the host exit, and kills it if that does
// not happen in time. Data lives under Options.Dir, which is locked against
// a second server.
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

	"github.com/chime-sched/chime/infra/dirlock"
)

// Version is the pinned npm package version of the engine; the Makefile pins
// the same (CHDB_VERSION).
const Version = "26.7.3-stable.1"

// Paths of the engine and host under a tools dir (the repository's .tools).
const (
	libRel  = "chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"
	hostRel = "chdb/chimech"
)

// ErrNotInstalled says the engine or its host is missing from the tools dir.
var ErrNotInstalled = errors.New("local ClickHouse is not installed: run `make clickhouse` (installs the pinned @chdb/lib-linux-x64-gnu into .tools/chdb and builds the host)")

// Options configures Start.
type Options struct {
	// Dir holds the server's data; it is created and locked.
	Dir string
	// Lib is libchdb.so and Host the chimech binary; ToolsDir fills in
	// whichever is empty.
	Lib, Host string
	// ToolsDir is the repository's .tools dir; empty means FindTools(".").
	ToolsDir string
	// TCPPort (native protocol) and HTTPPort on 127.0.0.1; 0 picks a free
	// port.
	TCPPort, HTTPPort int
	// Log receives the server's own output (stdout and stderr); nil
	// discards it.
	Log io.Writer
	// StartTimeout bounds the wait for /ping (default 2 minutes: the first
	// start of a fresh dir loads a 500 MB library and creates the system
	// databases).
	StartTimeout time.Duration
}

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

// Installed reports whether toolsDir holds the engine and its host.
func Installed(toolsDir string) bool {
	for _, rel := range []string{libRel, hostRel} {
		if _, err := os.Stat(filepath.Join(toolsDir, rel)); err != nil {
			return false
		}
	}
	return true
}

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
			opts.Host = filepath.Join(tools, hostRel)
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
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	lock, err := dirlock.Acquire(dir, ".chime-clickhouse.lock", "clickhouse data dir")
	if err != nil {
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
	if s.opts.TCPPort == 0 {
		if s.opts.TCPPort, err = freePort(); err != nil {
			return err
		}
	}
	if s.opts.HTTPPort == 0 {
		if s.opts.HTTPPort, err = freePort(); err != nil {
			return err
		}
	}
	data := filepath.Join(s.opts.Dir, "data") + "/"
	cmd := exec.Command(s.opts.Host, s.opts.Lib, data, strconv.Itoa(s.opts.TCPPort), strconv.Itoa(s.opts.HTTPPort))
	cmd.Dir = s.opts.Dir
	out := s.opts.Log
	if out == nil {
		out = io.Discard
	}
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
			return fmt.Errorf("clickhouse: server exited during start (%v); is port %d or %d in use?", s.waitErr, s.opts.TCPPort, s.opts.HTTPPort)
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("clickhouse: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// DSN is the native-protocol address of the default database, for
// clickhouse-go (clickhouse.ParseDSN).
func (s *Server) DSN() string { return DSN(s.TCPAddr(), "default") }

// DSN builds a clickhouse-go DSN for database at addr (host:port).
func DSN(addr, database string) string {
	u := url.URL{Scheme: "clickhouse", Host: addr, Path: "/" + database}
	return u.String()
}

// TCPAddr is the native-protocol address.
func (s *Server) TCPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.TCPPort)) }

// HTTPURL is the HTTP interface's base URL.
func (s *Server) HTTPURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.HTTPPort))
}

// Dir is the server's data dir.
func (s *Server) Dir() string { return s.opts.Dir }

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
