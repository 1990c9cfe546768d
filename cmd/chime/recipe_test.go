package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/internal/freeport"
)

// recipe is the operator's script that runs every role as a process of
// its own; docs/operations.md shows it whole.
const recipe = "docs/separate-processes.sh"

// TestSeparateProcessesRecipe runs docs/separate-processes.sh as an
// operator would, with this binary as chime: the broker and every role
// (the sink with a local ClickHouse) each in a process with a state dir of
// its own, a job calling chime echo on 127.0.0.1, the analytics routes
// answering. Then the scheduler is stopped and started again as the docs
// say: the broker and the other roles run on, and a job created meanwhile
// fires. Ctrl-C (SIGINT) stops every process cleanly.
func TestSeparateProcessesRecipe(t *testing.T) {
	t.Parallel()
	clickhousetest.Tools(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "roles")
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freeport.For(t))
	echoAddr := fmt.Sprintf("127.0.0.1:%d", freeport.For(t))
	env := append(environWithoutChime(), "CHIME_RUN_MAIN=1", "CHIME="+os.Args[0], "CHIME_API_ADDR="+apiAddr, "ECHO_ADDR="+echoAddr)

	script := exec.Command("bash", recipe, dir)
	script.Dir, script.Env = root, env
	// Its own process group: the cleanup kills whatever it started.
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := script.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	script.Stderr = &stderr
	require.NoError(t, script.Start())
	t.Cleanup(func() {
		// The script runs each process in a group of its own.
		_ = syscall.Kill(-script.Process.Pid, syscall.SIGKILL)
		pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, p := range pids {
			if pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, p))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			for _, name := range []string{"broker", "scheduler", "dispatcher", "breaker", "sink", "api", "echo"} {
				raw, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				lines := strings.Split(string(raw), "\n")
				t.Logf("%s.log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	up, exited := make(chan struct{}), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "every role is up") {
				close(up)
			}
		}
		exited <- script.Wait()
	}()
	select {
	case <-up:
	case err := <-exited:
		t.Fatalf("%s ended before every role was up: %v\n%s", recipe, err, stderr.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("%s: not up within 4 minutes\n%s", recipe, stderr.String())
	}

	token := strings.TrimSpace(readFile(t, filepath.Join(dir, "admin-token")))
	dev := &devAPI{base: "http://" + apiAddr}
	api := func(method, path, body string) (int, map[string]any) { return dev.call(t, method, path, token, body) }
	require.Contains(t, readFile(t, filepath.Join(dir, "echo.log")), "idempotency-key: acme/hello/1", "chime echo got the job's call")
	waitFor(t, time.Minute, "the call in ClickHouse, read through the API", func() bool {
		st, out := api("GET", "/v1/namespaces/acme/jobs/hello/attempts", "")
		atts, _ := out["attempts"].([]any)
		return st == http.StatusOK && len(atts) == 1
	})
	st, stats := api("GET", "/v1/namespaces/acme/stats", "")
	require.Equal(t, http.StatusOK, st, "%v", stats)
	// Only the broker process runs a broker.
	for _, name := range []string{"scheduler", "dispatcher", "breaker", "sink", "api"} {
		require.NotContains(t, readFile(t, filepath.Join(dir, name+".log")), "embedded broker started", name)
	}
	require.Contains(t, readFile(t, filepath.Join(dir, "broker.log")), "embedded broker started")

	// Restart the scheduler as docs/operations.md says: stop its process,
	// start it with the environment the script kept.
	scheduler := pidOf(t, dir, "scheduler")
	require.NoError(t, syscall.Kill(scheduler, syscall.SIGTERM))
	waitFor(t, time.Minute, "the scheduler's clean stop", func() bool {
		return strings.Contains(readFile(t, filepath.Join(dir, "scheduler.log")), `msg="stopped cleanly"`)
	})
	st, job := api("POST", "/v1/namespaces/acme/jobs", `{"id": "meanwhile", "schedule": {"in": "1s"}, "callback": {"url": "http://`+echoAddr+`/meanwhile"}}`)
	require.Equal(t, http.StatusCreated, st, "the API publishes while no scheduler runs: %v", job)
	restart := exec.Command("bash", "-c", `set -a; . "$1/env"; set +a; exec "$CHIME" scheduler --state-dir "$1/scheduler" >>"$1/scheduler.log" 2>&1`, "restart", dir)
	restart.Dir, restart.Env = root, env
	require.NoError(t, restart.Start())
	t.Cleanup(func() { _ = restart.Process.Kill() })
	waitFor(t, 2*time.Minute, "the job created while the scheduler was stopped, called", func() bool {
		return strings.Contains(readFile(t, filepath.Join(dir, "echo.log")), "POST /meanwhile")
	})
	require.NoError(t, syscall.Kill(pidOf(t, dir, "broker"), 0), "the broker ran on")
	require.Equal(t, 1, strings.Count(readFile(t, filepath.Join(dir, "broker.log")), "embedded broker started"), "the broker started once")

	// Ctrl-C: the script stops every process it started, each cleanly.
	require.NoError(t, restart.Process.Signal(syscall.SIGTERM))
	require.NoError(t, restart.Wait())
	require.NoError(t, script.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the script did not end within 2 minutes of SIGINT")
	}
	for _, name := range []string{"broker", "scheduler", "dispatcher", "breaker", "sink", "api"} {
		lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, name+".log"))), "\n")
		require.Contains(t, lines[len(lines)-1], `msg="stopped cleanly"`, "%s stopped cleanly", name)
		if name != "broker" {
			require.NotContains(t, strings.Join(lines, "\n"), "leaving consumer groups; the partitions move after the session timeout", "%s left its groups while the broker ran", name)
		}
	}
}

// TestOperationsShowsTheRecipe: docs/operations.md shows the script the
// test above runs, as it is.
func TestOperationsShowsTheRecipe(t *testing.T) {
	t.Parallel()
	script := readFile(t, filepath.Join("../..", recipe))
	doc := readFile(t, "../../docs/operations.md")
	_, after, ok := strings.Cut(doc, "<!-- "+recipe+" -->\n```sh\n")
	require.True(t, ok, "docs/operations.md shows %s after the line <!-- %s -->", recipe, recipe)
	shown, _, ok := strings.Cut(after, "```\n")
	require.True(t, ok)
	require.Equal(t, script, shown, "docs/operations.md's copy of %s", recipe)
}

// environWithoutChime is this process's environment without chime's
// settings, which would change what the script's processes do.
func environWithoutChime() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHIME_") {
			env = append(env, kv)
		}
	}
	return env
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(raw)
}

// pidOf reads the process id the script kept for name.
func pidOf(t *testing.T, dir, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, name+".pid"))))
	require.NoError(t, err)
	return pid
}
