package kafkatest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// StartHelperProcess re-runs the test binary as a child process that runs
// only the test named helper (which must skip unless it finds env), and
// waits until the child prints ready on a line of its own. Crash tests use
// it to kill -9 a real process. The child is killed when the test ends;
// if the test failed, the child's last output lines are logged (the child
// gets CHIME_TEST_VERBOSE=1, so its logs are there).
func StartHelperProcess(t testing.TB, helper, ready string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "CHIME_TEST_VERBOSE=1"), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("kafkatest: start %s: %v", helper, err)
	}
	var mu sync.Mutex
	var lines []string
	up := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			if len(lines) > 400 {
				lines = lines[len(lines)-300:]
			}
			mu.Unlock()
			if sc.Text() == ready {
				once.Do(func() { close(up) })
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		pw.Close()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%s (pid %d) output, last lines:\n%s", helper, cmd.Process.Pid, strings.Join(lines[max(0, len(lines)-150):], "\n"))
		}
	})
	select {
	case <-up:
	case <-time.After(90 * time.Second):
		t.Fatalf("kafkatest: %s did not print %q within 90s", helper, ready)
	}
	return cmd
}
