package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The end-to-end phases call a receiver in another process, as users run
// chime: `chime-bench receiver` (this binary again) serves POST /hook on a
// keep-alive net/http server on 127.0.0.1 and records, per job id, when the
// first call arrived and how many calls came. Every system measured in a
// run (chime, the no-scheduler ceiling) calls the same receiver, so its cost
// is the same for all of them.

// receiverMain runs the receiver process: it prints its address on stdout
// and serves until stdin closes (the benchmark exits or kills it).
func receiverMain() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("receiver: %v", err)
	}
	r := &recorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", r.hook)
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, req *http.Request) {
		n, err := strconv.Atoi(req.URL.Query().Get("n"))
		if err != nil || n < 0 {
			http.Error(w, "n", http.StatusBadRequest)
			return
		}
		r.reset(n)
	})
	mux.HandleFunc("GET /results", r.results)
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, r.calls.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println(l.Addr().String())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	_ = srv.Serve(l)
}

// recorder keeps per-id first arrival (Unix ns) and call counts.
type recorder struct {
	mu    sync.RWMutex
	first []atomic.Int64
	count []atomic.Int32
	calls atomic.Int64
	// stray counts calls whose id is out of range or missing.
	stray atomic.Int64
}

func (r *recorder) reset(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.first = make([]atomic.Int64, n)
	r.count = make([]atomic.Int32, n)
	r.calls.Store(0)
	r.stray.Store(0)
}

// hook parses {"id":N,...} with a scan, not encoding/json: the receiver's
// cost is part of every system's run, and the same for all.
func (r *recorder) hook(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	var buf [256]byte
	n, _ := io.ReadFull(req.Body, buf[:])
	_, _ = io.Copy(io.Discard, req.Body)
	id := parseID(buf[:n])
	r.calls.Add(1)
	r.mu.RLock()
	if id >= 0 && id < len(r.count) {
		if r.count[id].Add(1) == 1 {
			r.first[id].Store(now)
		}
	} else {
		r.stray.Add(1)
	}
	r.mu.RUnlock()
	// The soak's failing callbacks: ?fail=1 always, ?trip=1 during the
	// first 10 s of every minute (so a breaker trips once a minute).
	q := req.URL.RawQuery
	if q == "fail=1" || q == "trip=1" && time.Now().Second() < 10 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func parseID(b []byte) int {
	s := string(b)
	i := strings.Index(s, `"id":`)
	if i < 0 {
		return -1
	}
	i += len(`"id":`)
	for i < len(s) && (s[i] == ' ' || s[i] == '"') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(s[i:j])
	if err != nil {
		return -1
	}
	return n
}

// results streams: stray calls (int64), then per id its first arrival
// (int64) and count (int32), little endian.
func (r *recorder) results(w http.ResponseWriter, _ *http.Request) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	bw := bufio.NewWriter(w)
	_ = binary.Write(bw, binary.LittleEndian, r.stray.Load())
	for i := range r.count {
		_ = binary.Write(bw, binary.LittleEndian, r.first[i].Load())
		_ = binary.Write(bw, binary.LittleEndian, r.count[i].Load())
	}
	_ = bw.Flush()
}

// receiverProc is the receiver child process, seen from the benchmark.
type receiverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	hc    *http.Client
}

func startReceiverProc() *receiverProc {
	self, err := os.Executable()
	if err != nil {
		fail("receiver: %v", err)
	}
	cmd := exec.Command(self, "receiver")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fail("receiver: %v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail("receiver: %v", err)
	}
	if err := cmd.Start(); err != nil {
		fail("receiver: %v", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		fail("receiver: no address: %v", err)
	}
	return &receiverProc{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(line), hc: &http.Client{Timeout: time.Minute}}
}

func (r *receiverProc) url() string { return "http://" + r.addr + "/hook" }

func (r *receiverProc) pid() int { return r.cmd.Process.Pid }

func (r *receiverProc) reset(n int) {
	res, err := r.hc.Post("http://"+r.addr+"/reset?n="+strconv.Itoa(n), "", nil)
	if err != nil || res.StatusCode != http.StatusOK {
		fail("receiver reset: %v", err)
	}
	res.Body.Close()
}

func (r *receiverProc) calls() int64 {
	res, err := r.hc.Get("http://" + r.addr + "/count")
	if err != nil {
		fail("receiver count: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// arrivals reads the per-id results of the current run.
type arrivals struct {
	stray int64
	first []int64 // Unix ns, 0 = never called
	count []int32
}

func (r *receiverProc) results(n int) arrivals {
	res, err := r.hc.Get("http://" + r.addr + "/results")
	if err != nil {
		fail("receiver results: %v", err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	a := arrivals{first: make([]int64, n), count: make([]int32, n)}
	if err := binary.Read(br, binary.LittleEndian, &a.stray); err != nil {
		fail("receiver results: %v", err)
	}
	for i := range n {
		if err := binary.Read(br, binary.LittleEndian, &a.first[i]); err != nil {
			fail("receiver results: %v", err)
		}
		if err := binary.Read(br, binary.LittleEndian, &a.count[i]); err != nil {
			fail("receiver results: %v", err)
		}
	}
	return a
}

func (r *receiverProc) close() {
	r.stdin.Close()
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

// waitCalls waits until the receiver has had n calls, or for within; it
// returns early if ctx ends.
func (r *receiverProc) waitCalls(ctx context.Context, n int64, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if r.calls() >= n {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r.calls() >= n
}
