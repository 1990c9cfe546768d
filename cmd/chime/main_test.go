package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The tests run the chime binary's main in a child process (this test
// binary re-executed), so a kill -9 hits the whole of `chime dev`: the
// embedded broker and the scheduler with its LevelDB storage.
func TestMain(m *testing.M) {
	if os.Getenv("CHIME_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type devProc struct {
	cmd    *exec.Cmd
	exited chan error
	// stopped is set when chime dev logs its clean stop (startDev).
	stopped *atomic.Bool
}

func (p *devProc) stoppedCleanly() bool { return p.stopped != nil && p.stopped.Load() }

// startDev starts `chime dev` and waits until its scheduler is ready.
func startDev(t *testing.T, stateDir string, port int) *devProc {
	t.Helper()
	ready := make(chan struct{})
	var once sync.Once
	stopped := new(atomic.Bool)
	p := startChild(t, nil, func(line string) {
		if strings.Contains(line, "scheduler ready") {
			once.Do(func() { close(ready) })
		}
		if strings.Contains(line, `msg="stopped cleanly"`) {
			stopped.Store(true)
		}
	}, "dev", "--state-dir", stateDir, "--embedded-broker-port", fmt.Sprint(port), "--partitions", "4", "--addr", "127.0.0.1:0")
	p.stopped = stopped
	select {
	case <-ready:
	case err := <-p.exited:
		t.Fatalf("chime dev exited before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("chime dev not ready within 60s")
	}
	return p
}

// startChild runs this test binary as `chime args...`, hands every stderr
// line to onLine, and shows the child's last log lines if the test fails
// (e.g. the race report behind an exit status 66).
func startChild(t *testing.T, stdout io.Writer, onLine func(string), args ...string) *devProc {
	t.Helper()
	return startChildEnv(t, nil, stdout, onLine, args...)
}

// startChildEnv is startChild with env added to the child's environment.
func startChildEnv(t *testing.T, env []string, stdout io.Writer, onLine func(string), args ...string) *devProc {
	t.Helper()
	return startChildOf(t, "", env, stdout, onLine, args...)
}

// startChildOf is startChildEnv running program, a chime binary
// (buildChime); "" runs this test binary as chime.
func startChildOf(t *testing.T, program string, env []string, stdout io.Writer, onLine func(string), args ...string) *devProc {
	t.Helper()
	if program == "" {
		program, env = os.Args[0], append([]string{"CHIME_RUN_MAIN=1"}, env...)
	}
	cmd := exec.Command(program, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = stdout
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// Registered before the kill, so it runs after it (cleanups run last
	// first), and before the test's TempDir is removed.
	if dir := stateDirOf(args, env); dir != "" {
		t.Cleanup(func() { waitUntilNoProcessNames(t, dir) })
	}
	p := &devProc{cmd: cmd, exited: make(chan error, 1)}
	var mu sync.Mutex
	var lines []string
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			onLine(sc.Text())
		}
	}()
	go func() {
		<-scanned // Wait must not close the pipe before it is read out
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("chime %s stderr (last lines):\n%s", args[0], strings.Join(lines[max(0, len(lines)-150):], "\n"))
		}
	})
	return p
}

// stateDirOf is the state dir a child's arguments or environment give
// it ("" if none).
func stateDirOf(args, env []string) string {
	for i, a := range args {
		if a == "--state-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "CHIME_STATE_DIR="); ok {
			return v
		}
	}
	return ""
}

// waitUntilNoProcessNames waits until no process's command line names
// dir. Killing chime dev does not stop its local ClickHouse at once: the
// kernel kills it once chime dev is dead (Pdeathsig, infra/clickhouse),
// and until then it may still write its parts under the state dir, so
// the test's TempDir removal failed now and then ("unlinkat ...
// directory not empty").
func waitUntilNoProcessNames(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for processNames(dir) {
		if time.Now().After(deadline) {
			t.Errorf("a process still names %s 30s after the test's chime was killed", dir)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processNames reports whether the command line of a process other than
// this one holds dir. A zombie's is empty: it holds no files.
func processNames(dir string) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if e.Name() == self || e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(dir)) {
			return true
		}
	}
	return false
}

// buildChime builds the chime binary, without the test binary's
// instrumentation (-race, coverage), for a test that measures the
// process itself.
func buildChime(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chime")
	// go test puts its own GOROOT/bin first on the PATH of the test
	// binary, so "go" is the toolchain that runs the test.
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func TestDevSurvivesKill9AndStopsCleanly(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(stateDir, 0o755)) // as an older chime left it
	port := freeport.For(t)
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	first := startDevAPI(t, stateDir, port)
	dev := first.devProc
	// The jobs' namespace exists, as a service using the SDK creates it
	// over the API first: the scheduler refuses jobs of unknown namespaces.
	st, out := first.call(t, "PUT", "/v1/namespaces/acme", readAdminToken(t, stateDir), `{}`)
	require.Equal(t, 201, st, "%v", out)

	// The embedded broker requires SASL: a client without the credential
	// from the state dir cannot publish a command (a local user could
	// otherwise add a namespace key).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	anon, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestRetries(1), kgo.RetryTimeout(3*time.Second))
	require.NoError(t, err)
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	err = anon.ProduceSync(actx, &kgo.Record{Topic: schema.NewTopics("").NamespaceCommands(), Key: []byte("acme"), Value: []byte("x")}).FirstErr()
	acancel()
	anon.Close()
	require.Error(t, err, "a client without the credential may not produce")
	cred, err := kafkaauth.Load(filepath.Join(stateDir, config.KafkaCredentialFile))
	require.NoError(t, err)

	p, err := producer.New(producer.Brokers(brokers), producer.KgoOptions(cred.Kgo()...))
	require.NoError(t, err)
	fireAt := time.Now().Add(3 * time.Second)
	const jobs = 20
	for i := range jobs {
		_, err := p.Schedule(ctx, &chimev1.JobSpec{
			Namespace: "acme", Id: fmt.Sprintf("job-%d", i),
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(fireAt)}},
			Target:   &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}},
		})
		require.NoError(t, err) // acknowledged by Kafka
	}
	p.Close()

	// kill -9 right after the acks, before anything fired.
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGKILL))
	<-dev.exited

	dev = startDev(t, stateDir, port)
	cl, err := kgo.NewClient(append(cred.Kgo(), kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(schema.NewTopics("").Due()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < jobs && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			rec := new(chimev1.Due)
			require.NoError(t, proto.Unmarshal(r.Value, rec))
			for _, d := range schema.DuesOf(rec) {
				require.False(t, d.FireAt.AsTime().Before(d.ScheduledAt.AsTime()), "never called early")
				seen[d.IdempotencyKey] = true
			}
		})
	}
	require.Len(t, seen, jobs, "every acknowledged job fired after kill -9 and restart")

	// SIGTERM stops chime dev cleanly.
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-dev.exited:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("chime dev did not stop within 60s of SIGTERM")
	}
	require.True(t, dev.stoppedCleanly(), "chime dev logs its clean stop")

	// Nothing in the state dir is readable by other users: it holds the
	// broker's log (keys, signing secrets) and the admin token.
	require.NoError(t, filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("%s is %s: readable by others", path, fi.Mode().Perm())
		}
		return nil
	}))
}

func TestUsageAndBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "Usage"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"scheduler", "--partitions", "x"}, 1, "partitions"},
		{[]string{"scheduler", "extra"}, 1, "unexpected arguments"},
		{[]string{"broker", "--brokers", "kafka-1:9092"}, 1, "chime broker runs the embedded broker, and CHIME_BROKERS (--brokers) names other brokers: unset it"},
	}
	for _, tt := range tests {
		var out, errOut strings.Builder
		code := run(tt.args, func(string) (string, bool) { return "", false }, &out, &errOut)
		require.Equal(t, tt.code, code, "args %q: %s", tt.args, errOut.String())
		require.Contains(t, errOut.String(), tt.err)
	}
}
