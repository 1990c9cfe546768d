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
// gets CHIME_TEST_VERBOSE=1, so its logs are there), each prefixed with the
// time the test read it, to line them up with the test's own log.
//
// A child that exits before printing ready fails the test at once, with its
// output, instead of after the 90 s wait. The child writes straight into a
// pipe that is read to the end whatever it prints, so a long line or a
// chatty child never blocks it, and cmd.Wait does not wait for its output.
func StartHelperProcess(t testing.TB, helper, ready string, env ...string) *exec.Cmd {
	t.Helper()
	return StartHelperProcessFiles(t, helper, ready, nil, env...)
}

// StartHelperProcessFiles is StartHelperProcess handing the child files
// too: files[i] is the child's descriptor 3+i. A test that restarts a
// server process passes its listening socket this way, so every
// generation of the server accepts on the same address and no connection
// is refused between two of them.
func StartHelperProcessFiles(t testing.TB, helper, ready string, files []*os.File, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "CHIME_TEST_VERBOSE=1"), env...)
	cmd.ExtraFiles = files
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("kafkatest: start %s: %v", helper, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	// The child has its own copy of the write end: the reader sees EOF
	// when the child is gone.
	pw.Close()
	if err != nil {
		pr.Close()
		t.Fatalf("kafkatest: start %s: %v", helper, err)
	}
	var mu sync.Mutex
	var lines []string
	up := make(chan struct{})
	exited := make(chan struct{}) // the child closed its output: it is gone
	var once sync.Once
	go func() {
		defer close(exited)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, time.Now().Format("15:04:05.000")+" "+sc.Text())
			if len(lines) > 400 {
				lines = lines[len(lines)-300:]
			}
			mu.Unlock()
			if sc.Text() == ready {
				once.Do(func() { close(up) })
			}
		}
		if err := sc.Err(); err != nil {
			mu.Lock()
			lines = append(lines, "kafkatest: reading the output stopped: "+err.Error())
			mu.Unlock()
		}
		// Never leave the child blocked on a full pipe.
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // something else holds the pipe
		}
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%s (pid %d) output, last lines:\n%s", helper, cmd.Process.Pid, strings.Join(lines[max(0, len(lines)-150):], "\n"))
		}
	})
	select {
	case <-up:
	case <-exited:
		select {
		case <-up: // it printed ready, then exited: the caller will see
		default:
			t.Fatalf("kafkatest: %s exited before printing %q (its output follows)", helper, ready)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("kafkatest: %s did not print %q within 90s", helper, ready)
	}
	return cmd
}
