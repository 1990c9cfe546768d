package main

// chimeProc runs `chime dev` as a child process for the end-to-end and
// soak phases (and points at a deployed role's API elsewhere): its start on
// free ports and a fresh state dir, its stop and kill -9, its API, metrics
// and profiles, its CPU and memory, and a Kafka admin on its broker.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/freeport"
)

// chimeProc is a `chime dev` child process.
type chimeProc struct {
	bin, dir        string
	apiAddr, broker string
	metricsAddr     string
	extra           []string
	cmd             *exec.Cmd
	logFile         *os.File
	hc              *http.Client
	exited          chan struct{}
}

func freePort() int {
	p, err := freeport.Get()
	if err != nil {
		fail("%v", err)
	}
	return p
}

// startChime starts `chime dev` on a new state dir and waits until its API
// is ready.
func startChime(ctx context.Context, bin string, extra ...string) *chimeProc {
	dir, err := os.MkdirTemp("", "chime-bench-e2e-")
	if err != nil {
		fail("%v", err)
	}
	c := &chimeProc{
		bin: bin, dir: dir, extra: extra,
		apiAddr:     "127.0.0.1:" + strconv.Itoa(freePort()),
		broker:      "127.0.0.1:" + strconv.Itoa(freePort()),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(freePort()),
		hc:          &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 2 * time.Minute},
	}
	c.start(ctx)
	return c
}

func (c *chimeProc) start(ctx context.Context) {
	lf, err := os.OpenFile(filepath.Join(c.dir, "chime.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fail("%v", err)
	}
	c.logFile = lf
	_, port, _ := net.SplitHostPort(c.broker)
	args := append([]string{"dev"}, c.extra...)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(),
		"CHIME_STATE_DIR="+filepath.Join(c.dir, "state"),
		"CHIME_API_ADDR="+c.apiAddr,
		"CHIME_EMBEDDED_BROKER_PORT="+port,
		"CHIME_ADMIN_TOKEN="+e2eAdmin,
		"CHIME_METRICS_ADDR="+c.metricsAddr,
		"CHIME_BROKERS=",
		"CHIME_CLICKHOUSE_DSN=",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fail("start %s: %v", c.bin, err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.exited) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-c.exited:
			fail("chime dev exited at start; its log: %s\n%s", lf.Name(), c.tail())
		default:
		}
		if st, _ := c.call(ctx, "GET", "/readyz", nil); st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fail("chime dev not ready in 3m; its log: %s\n%s", lf.Name(), c.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *chimeProc) tail() string {
	b, _ := os.ReadFile(c.logFile.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (c *chimeProc) pid() int { return c.cmd.Process.Pid }

// cpu is chime's CPU seconds; the local ClickHouse is a child process and
// is counted apart (clickhouseCPU).
func (c *chimeProc) cpu() float64 { return procCPU(c.pid()) }

func (c *chimeProc) clickhouseCPU() float64 {
	var s float64
	for _, p := range procChildren(c.pid()) {
		s += max(0, procCPU(p))
	}
	return s
}

func (c *chimeProc) clickhouseRSS() int64 {
	var s int64
	for _, p := range procChildren(c.pid()) {
		r, _ := procMem(p)
		s += r
	}
	return s
}

func (c *chimeProc) call(ctx context.Context, method, path string, body []byte) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.apiAddr+path, bytes.NewReader(body))
	if err != nil {
		fail("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// metric reads one unlabelled gauge or counter from /metrics (-1 when
// it is not there).
func (c *chimeProc) metric(ctx context.Context, name string) float64 {
	for _, l := range c.scrape(ctx)[name] {
		if l.labels == "" {
			return l.value
		}
	}
	return -1
}

// profile takes a CPU profile of chime for d into path, in the background;
// wait for it with the returned function.
func (c *chimeProc) profile(path string, d time.Duration) func() {
	return c.profileAfter(path, 0, d)
}

// profileAfter is profile starting after a delay.
func (c *chimeProc) profileAfter(path string, after, d time.Duration) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(after)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.metricsAddr, int(d.Seconds()))
		res, err := c.hc.Get(url)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %v\n", err)
			return
		}
		defer res.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %v\n", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, res.Body)
	}()
	return func() { <-done }
}

// snapshot saves one of chime's runtime profiles (heap, allocs, goroutine)
// into path.
func (c *chimeProc) snapshot(name, path string) {
	res, err := c.hc.Get("http://" + c.metricsAddr + "/debug/pprof/" + name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	defer res.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, res.Body)
}

// histogramQuantile estimates quantile q of an unlabelled Prometheus
// histogram from /metrics (the upper bound of the bucket it falls in).
func (c *chimeProc) histogramQuantile(ctx context.Context, name string, q float64) float64 {
	return c.scrape(ctx).quantileSince(scrape{}, name, q)
}

// stop ends chime with SIGTERM (so a CPU profile is written) and removes its
// state unless keep.
func (c *chimeProc) stop(keep bool) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.logFile.Close()
	if keep {
		fmt.Fprintf(os.Stderr, "  chime's state and log kept in %s\n", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

// kill9 kills chime (and, by its parent-death signal, its ClickHouse).
func (c *chimeProc) kill9() {
	_ = c.cmd.Process.Kill()
	<-c.exited
	c.logFile.Close()
}

// credential is the embedded broker's SASL credential, which chime dev
// keeps in its state dir.
func (c *chimeProc) credential() kafkaauth.Credential {
	cred, err := kafkaauth.Load(filepath.Join(c.dir, "state", "kafka-credential"))
	if errors.Is(err, fs.ErrNotExist) {
		// A chime from before the embedded broker required SASL: the
		// harness also measures older builds, to compare.
		return kafkaauth.Credential{}
	}
	if err != nil {
		fail("chime dev's Kafka credential: %v", err)
	}
	return cred
}

func (c *chimeProc) admin() *kadm.Client {
	cl, err := kgo.NewClient(append(c.credential().Kgo(), kgo.SeedBrokers(c.broker))...)
	if err != nil {
		fail("%v", err)
	}
	return kadm.NewClient(cl)
}
