// Package kafkacluster runs Apache Kafka itself, from the jars `make
// kafka-jars` copies out of Maven Central (see pom.xml beside this file): a
// KRaft cluster of one or more combined broker+controller nodes on
// 127.0.0.1, each a `java kafka.Kafka` child process with its own data
// directory, on free ports. chime's tests run against it as well as against
// the embedded broker (kafkatest.EnvBrokers), tests of broker faults kill
// and restart its nodes, and `chime-kafka` serves it to a shell.
package kafkacluster

import (
	"github.com/chime-sched/chime/internal/freeport"

	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvLibs names the environment variable that points tests at the folder of
// Kafka's jars; without it they look in DefaultLibs under the module root.
const EnvLibs = "CHIME_KAFKA_LIBS"

// Version is the Kafka release pom.xml pins; the Makefile copies its jars
// into .tools/kafka-<Version>/libs.
const Version = "4.4.0"

// DefaultLibs is where `make kafka-jars` puts the jars, relative to the
// module root.
var DefaultLibs = filepath.Join(".tools", "kafka-"+Version, "libs")

// Options configure Start.
type Options struct {
	// Libs is the folder of Kafka's jars (required).
	Libs string
	// Dir holds each node's configuration, data and log (required).
	Dir string
	// Nodes is the number of combined broker+controller nodes (default 1).
	// Topics default to replication min(3, Nodes) and min.insync.replicas
	// min(2, Nodes), as a production cluster would be set.
	Nodes int
	// HeapMB is each JVM's heap (default 512).
	HeapMB int
	// Java is the java binary (default "java" on PATH).
	Java string
	// Logf receives progress lines; nil drops them.
	Logf func(format string, args ...any)
}

// Cluster is a running KRaft cluster.
type Cluster struct {
	opts      Options
	clusterID string
	nodes     []*node
}

type node struct {
	id         int
	dir        string
	port, ctrl int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start formats and starts the cluster and returns once every node answers
// as a broker of it. On error, whatever started is stopped.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Libs == "" || o.Dir == "" {
		return nil, errors.New("kafkacluster: Libs and Dir are required")
	}
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.HeapMB <= 0 {
		o.HeapMB = 512
	}
	if o.Java == "" {
		o.Java = "java"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if _, err := os.Stat(o.Libs); err != nil {
		return nil, fmt.Errorf("kafkacluster: Kafka's jars: %w (run `make kafka-jars`)", err)
	}
	c := &Cluster{opts: o, clusterID: newClusterID()}
	ports, err := freeport.GetN(2 * o.Nodes)
	if err != nil {
		return nil, fmt.Errorf("kafkacluster: %w", err)
	}
	for i := range o.Nodes {
		n := &node{id: i + 1, dir: filepath.Join(o.Dir, "node"+strconv.Itoa(i+1)), port: ports[2*i], ctrl: ports[2*i+1]}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := c.format(ctx, n); err != nil {
			return nil, err
		}
	}
	for i := range c.nodes {
		if err := c.startNode(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, len(c.nodes)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns every node's broker address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
	}
	return out
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

func (c *Cluster) voters() string {
	var v []string
	for _, n := range c.nodes {
		v = append(v, fmt.Sprintf("%d@127.0.0.1:%d", n.id, n.ctrl))
	}
	return strings.Join(v, ",")
}

// properties is each node's server.properties. Timeouts are Kafka's
// defaults except where a test cluster must differ: no initial rebalance
// delay (each test starts groups of its own), and fast segment rolls for
// compacted topics come from the topics chime creates.
func (c *Cluster) properties(n *node) string {
	nodes := len(c.nodes)
	repl, isr := min(3, nodes), min(2, nodes)
	lines := []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(n.id),
		"controller.quorum.voters=" + c.voters(),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctrl),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d", n.port),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=" + filepath.Join(n.dir, "data"),
		"auto.create.topics.enable=false",
		"default.replication.factor=" + strconv.Itoa(repl),
		"min.insync.replicas=" + strconv.Itoa(isr),
		"offsets.topic.replication.factor=" + strconv.Itoa(repl),
		"transaction.state.log.replication.factor=" + strconv.Itoa(repl),
		"transaction.state.log.min.isr=" + strconv.Itoa(isr),
		"group.initial.rebalance.delay.ms=0",
		// Tests delete their topics when they end; a shared test
		// cluster must not keep their files around.
		"delete.topic.enable=true",
		"log.cleaner.backoff.ms=1000",
		"num.partitions=1",
	}
	return strings.Join(lines, "\n") + "\n"
}

const log4j = `status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = info
`

func (c *Cluster) format(ctx context.Context, n *node) error {
	if err := os.MkdirAll(filepath.Join(n.dir, "data"), 0o700); err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	if err := os.WriteFile(c.propsPath(n), []byte(c.properties(n)), 0o600); err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(log4j), 0o600); err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	cmd := exec.CommandContext(ctx, c.opts.Java, append(c.jvmArgs(n, 256), "kafka.tools.StorageTool",
		"format", "-t", c.clusterID, "-c", c.propsPath(n), "--ignore-formatted")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkacluster: format node %d: %w\n%s", n.id, err, out)
	}
	return nil
}

func (c *Cluster) propsPath(n *node) string { return filepath.Join(n.dir, "server.properties") }

func (c *Cluster) jvmArgs(n *node, heapMB int) []string {
	return []string{
		fmt.Sprintf("-Xmx%dm", heapMB), fmt.Sprintf("-Xms%dm", min(heapMB, 256)),
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
		// Two cores: the JIT and GC threads of several JVMs compete
		// with the tests.
		"-XX:CICompilerCount=2", "-XX:ParallelGCThreads=1", "-XX:ConcGCThreads=1",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.dir, "log4j2.properties"),
		"-cp", filepath.Join(c.opts.Libs, "*"),
	}
}

// startNode starts node i's JVM, its output appended to the node's log.
func (c *Cluster) startNode(i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("kafkacluster: node %d is running", n.id)
		}
	}
	logf, err := os.OpenFile(filepath.Join(n.dir, "kafka.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	cmd := exec.Command(c.opts.Java, append(c.jvmArgs(n, c.opts.HeapMB), "kafka.Kafka", c.propsPath(n))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a test's Ctrl-C does not reach it before
	// Close does, and Kill takes the whole JVM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("kafkacluster: start node %d: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	c.opts.Logf("kafkacluster: node %d (pid %d) on 127.0.0.1:%d", n.id, cmd.Process.Pid, n.port)
	return nil
}

// Kill sends SIGKILL to node i (0-based) and waits until it is gone.
func (c *Cluster) Kill(i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	return nil
}

// Restart starts node i again on its data directory and ports (after Kill).
func (c *Cluster) Restart(i int) error { return c.startNode(i) }

// WaitReady waits until at least want brokers are registered and every
// node that is running answers metadata requests.
func (c *Cluster) WaitReady(ctx context.Context, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for {
		for _, n := range c.nodes {
			n.mu.Lock()
			done := n.done
			n.mu.Unlock()
			select {
			case <-done:
				return fmt.Errorf("kafkacluster: node %d exited while starting; its log:\n%s", n.id, c.tail(n, 40))
			default:
			}
		}
		bs, err := adm.ListBrokers(ctx)
		if err == nil && len(bs) >= want {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("%d of %d brokers registered", len(bs), want)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkacluster: not ready: %v (%w); node 1's log:\n%s", last, ctx.Err(), c.tail(c.nodes[0], 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last lines of node n's log, for errors.
func (c *Cluster) tail(n *node, lines int) string {
	f, err := os.Open(filepath.Join(n.dir, "kafka.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		all = append(all, sc.Text())
		if len(all) > 4*lines {
			all = all[len(all)-lines:]
		}
	}
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// Close stops every node: SIGTERM for a clean shutdown, SIGKILL after 20 s.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.mu.Unlock()
		select {
		case <-done:
		default:
			if cmd != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			}
		}
	}
	for _, n := range c.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.mu.Unlock()
		if cmd == nil {
			continue
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// FindLibs returns the jars folder: $CHIME_KAFKA_LIBS, or DefaultLibs under
// the nearest folder above the working directory that holds go.mod. It
// returns "" when neither has jars.
func FindLibs() string {
	if p := os.Getenv(EnvLibs); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, DefaultLibs)
			if m, _ := filepath.Glob(filepath.Join(p, "kafka_2.13-*.jar")); len(m) > 0 {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// newClusterID is a random cluster ID as Kafka's Uuid.randomUuid makes
// them: 16 random bytes in URL-safe base64, drawn again when the text
// starts with '-', which the storage tool's argument parser takes for an
// option ("--cluster-id: expected one argument"; one format in 64 failed
// so).
func newClusterID() string {
	id := make([]byte, 16)
	for {
		_, _ = rand.Read(id)
		if s := base64.RawURLEncoding.EncodeToString(id); !strings.HasPrefix(s, "-") {
			return s
		}
	}
}
