package kafkatest

import (
	"bufio"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// StartHelperProcess re-runs the test binary as a child process that runs
// only the test named helper (which must skip unless it finds env), and
// waits until the child prints ready on a line of its own. Crash tests use
// it to kill -9 a real process. The child is killed when the test ends.
func StartHelperProcess(t testing.TB, helper, ready string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("kafkatest: %s: %v", helper, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kafkatest: start %s: %v", helper, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	up := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == ready {
				once.Do(func() { close(up) })
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(90 * time.Second):
		t.Fatalf("kafkatest: %s did not print %q within 90s", helper, ready)
	}
	return cmd
}
