package main

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A thread named as HotSpot names a compiler thread counts; the rest of
// the process does not.
func TestJVMJITCPUCountsOnlyCompilerThreads(t *testing.T) {
	t.Parallel() // only the thread it names counts, whatever else runs
	pid := os.Getpid()
	require.Zero(t, jvmJITCPU(pid), "a Go process has no compiler threads")

	// CPU spent by unnamed threads is not counted.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
	}
	require.Zero(t, jvmJITCPU(pid))

	burned := make(chan error)
	release := make(chan struct{})
	go func() {
		// Locked and never unlocked: the thread ends with this goroutine,
		// so its name never passes to another.
		runtime.LockOSThread()
		task := "/proc/self/task/" + strconv.Itoa(syscall.Gettid())
		if err := os.WriteFile(task+"/comm", []byte("C2 CompilerThread0"), 0); err != nil {
			burned <- err
			return
		}
		// At least 0.3 s of this thread's own CPU, within a deadline.
		deadline := time.Now().Add(10 * time.Second)
		for statCPU(task+"/stat") < 0.3 {
			if time.Now().After(deadline) {
				burned <- errors.New("the named thread got no CPU in 10 s")
				return
			}
		}
		burned <- nil
		<-release
	}()
	require.NoError(t, <-burned)
	defer close(release)

	jit := jvmJITCPU(pid)
	require.GreaterOrEqual(t, jit, 0.3)
	require.Less(t, jit, procCPU(pid), "the whole process used more than its one named thread")

	for _, c := range []string{"C1 CompilerThre", "C2 CompilerThre"} {
		require.True(t, jitThread(c), c)
	}
	for _, c := range []string{"data-plane-kafk", "GC Thread#0", "G1 Conc#0", "java", "chime"} {
		require.False(t, jitThread(c), c)
	}
}
