package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
)

// The kill -9 test re-executes this test binary; these variables tell the
// child what to do.
const (
	envChildDir      = "CHIME_BROKER_TEST_CHILD_DIR"
	envChildRecords  = "CHIME_BROKER_TEST_CHILD_RECORDS"
	envChildScenario = "CHIME_BROKER_TEST_CHILD_SCENARIO"
	childTopic       = "killed"
	childGroup       = "killed-readers"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		n, _ := strconv.Atoi(os.Getenv(envChildRecords))
		run := func() error { return runChild(dir, n) }
		if os.Getenv(envChildScenario) == "keep" {
			run = func() error { return runKeepChild(dir) }
		}
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		select {} // wait for SIGKILL
	}
	os.Exit(m.Run())
}

// runChild starts a broker, produces n records with acks=all and says
// "ready": from then on every record is acknowledged and must survive.
func runChild(dir string, n int) error {
	b, err := broker.Start(broker.Options{DataDir: dir})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, childTopic); err != nil {
		return err
	}
	for i := range n {
		r := &kgo.Record{Topic: childTopic, Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "produce:", err)
				os.Exit(3)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	// A committed offset is acknowledged state too: half way on partition 0.
	offs := make(kadm.Offsets)
	offs.Add(kadm.Offset{Topic: childTopic, Partition: 0, At: int64(n / 6), LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, childGroup, offs); err != nil {
		return err
	}
	fmt.Printf("ready %d\n", os.Getpid())
	return nil
}

type testBundle struct {
	dir string
	b   *broker.Broker
}

func setup(t *testing.T, opts broker.Options) *testBundle {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	b, err := broker.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return &testBundle{dir: opts.DataDir, b: b}
}

func newClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, addrs []string, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(newClient(t, addrs)).CreateTopic(ctxT(t), partitions, 1, configs, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

func produce(t *testing.T, addrs []string, recs ...*kgo.Record) {
	t.Helper()
	cl := newClient(t, addrs)
	require.NoError(t, cl.ProduceSync(ctxT(t), recs...).FirstErr())
	cl.Close()
}

// readAll reads topic from the start until it has want records or the
// deadline passes.
func readAll(t *testing.T, addrs []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx := ctxT(t)
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records from %s", len(got), want, topic)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// endOffsets sums the high watermarks of topic, i.e. how many records were
// ever written.
func endOffsets(t *testing.T, addrs []string, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(newClient(t, addrs)).ListEndOffsets(ctxT(t), topic)
	require.NoError(t, err)
	require.NoError(t, offs.Error())
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// checkFor calls fn every interval until it returns nil, failing the test
// with fn's last error once wait has passed.
func checkFor(t *testing.T, wait, interval time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", wait, err)
		}
		time.Sleep(interval)
	}
}

// readToEnd reads every record of a one-partition topic up to its high
// watermark. Unlike readAll it does not need to know how many records the
// log holds, which compaction changes.
func readToEnd(ctx context.Context, addrs []string, topic string) ([]*kgo.Record, error) {
	return readPartitionToEnd(ctx, addrs, topic, 0)
}

// readPartitionToEnd is readToEnd for one partition of a topic.
func readPartitionToEnd(ctx context.Context, addrs []string, topic string, partition int32) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s-%d: %v", topic, partition, end.Err)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 || got[len(got)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return got, fmt.Errorf("read %s up to offset %d: %w", topic, end.Offset, err)
		}
		if err := fs.Err(); err != nil {
			return got, err
		}
		got = append(got, fs.Records()...)
	}
	return got, nil
}

func TestStartValidatesOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts broker.Options
		want string
	}{
		{"no data dir", broker.Options{}, "DataDir is required"},
		{"negative port", broker.Options{Port: -1}, "port -1 out of range"},
		{"port too large", broker.Options{Port: 70000}, "port 70000 out of range"},
		{"negative backoff", broker.Options{CleanerBackoff: -time.Second}, "broker: CleanerBackoff is -1s: must be positive, or 0 for the default 30s"},
		{"negative dirty bytes", broker.Options{MinDirtyBytes: -1}, "broker: MinDirtyBytes is -1: must be positive, or 0 for the default 67108864"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name != "no data dir" {
				tc.opts.DataDir = t.TempDir()
			}
			_, err := broker.Start(tc.opts)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	tb := setup(t, broker.Options{})
	addrs := tb.b.Addrs()
	require.Len(t, addrs, 1)
	require.True(t, strings.HasPrefix(addrs[0], "127.0.0.1:"), addrs[0])
}

func TestSecondStartOnSameDirFails(t *testing.T) {
	t.Parallel()
	tb := setup(t, broker.Options{})

	_, err := broker.Start(broker.Options{DataDir: tb.dir})
	require.ErrorContains(t, err, tb.dir)
	require.ErrorContains(t, err, "process "+strconv.Itoa(os.Getpid()))

	// Close releases the lock: the same directory starts again.
	addrs := tb.b.Addrs()
	require.NoError(t, tb.b.Close())
	require.NoError(t, tb.b.Close(), "Close is idempotent")
	require.Equal(t, addrs, tb.b.Addrs(), "Addrs still answers after Close")
	b2, err := broker.Start(broker.Options{DataDir: tb.dir})
	require.NoError(t, err)
	require.NoError(t, b2.Close())
}

// TestBrokerIsAPart: as a lifecycle part the broker is ready once it
// listens and releases its directory when stopped; one that cannot start
// (its directory is another broker's) stops before it is ready and says
// why, leaving nothing held.
func TestBrokerIsAPart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := broker.New(broker.Options{DataDir: dir})
	require.NoError(t, err)
	require.Equal(t, "embedded broker", b.Name())
	require.ErrorIs(t, b.Ready(), lifecycle.ErrStarting)
	lifecycletest.Start(t, b)
	require.NoError(t, b.Ready())
	cl := newClient(t, b.Addrs())
	require.NoError(t, cl.Ping(ctxT(t)), "ready means listening")

	second, err := broker.New(broker.Options{DataDir: dir})
	require.NoError(t, err)
	require.NoError(t, second.Start(t.Context()))
	require.ErrorContains(t, lifecycle.Wait(ctxT(t), second), "embedded broker stopped before it was ready")
	require.ErrorContains(t, second.Err(), dir)

	b.Stop()
	require.NoError(t, b.Err())
	require.ErrorIs(t, b.Ready(), lifecycle.ErrStopped)
	again := setup(t, broker.Options{DataDir: dir})
	require.NotEmpty(t, again.b.Addrs(), "the stopped broker released its directory")
}

// TestPortIsKeptAcrossRestarts: a broker started without a fixed port
// comes back on the port it had, so the address its clients were given
// stays good; if another process took that port it listens on another and
// says which it lost (Moved); a fixed port is used as given. Whatever it
// listens on is kept for the next start.
func TestPortIsKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		earlier  bool   // a broker ran on the data dir and was closed
		portFile string // what the port file holds, if not the earlier broker's port
		taken    bool   // another process listens on the earlier broker's port
		fixed    bool   // Options.Port is set
		want     string // the port the broker listens on: "earlier", "fixed" or "new"
		wantLog  string
	}{
		{name: "first start", want: "new"},
		{name: "restart", earlier: true, want: "earlier"},
		{name: "restart, the port taken meanwhile", earlier: true, taken: true, want: "new"},
		{name: "restart with a fixed port", earlier: true, fixed: true, want: "fixed"},
		{name: "port file not a port", portFile: "nope\n", want: "new", wantLog: "not a port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			earlier := 0
			if tt.earlier {
				b, err := broker.Start(broker.Options{DataDir: dir})
				require.NoError(t, err)
				earlier = portOf(t, b)
				require.NoError(t, b.Close())
			}
			if tt.portFile != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, broker.PortFileName), []byte(tt.portFile), 0o600))
			}
			if tt.taken {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(earlier)))
				if err == nil {
					t.Cleanup(func() { ln.Close() })
				} else {
					require.ErrorIs(t, err, syscall.EADDRINUSE, "taken by another test meanwhile is as good")
				}
			}
			var mu sync.Mutex
			var logs []string
			opts := broker.Options{DataDir: dir, Logf: func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, fmt.Sprintf(f, a...))
			}}
			if tt.fixed {
				opts.Port = freeport.For(t)
			}
			b, err := broker.Start(opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })

			got := portOf(t, b)
			switch tt.want {
			case "earlier":
				require.Equal(t, earlier, got)
			case "fixed":
				require.Equal(t, opts.Port, got)
			case "new":
				require.NotEqual(t, earlier, got)
			}
			if tt.taken {
				require.Equal(t, earlier, b.Moved(), "Moved names the port that was taken")
			} else {
				require.Zero(t, b.Moved())
			}
			raw, err := os.ReadFile(filepath.Join(dir, broker.PortFileName))
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(got)+"\n", string(raw), "the port is kept for the next start")
			mu.Lock()
			defer mu.Unlock()
			if tt.wantLog != "" {
				require.Contains(t, strings.Join(logs, "\n"), tt.wantLog)
			}
		})
	}

	t.Run("a fixed port that is taken is an error", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		_, err = broker.Start(broker.Options{DataDir: t.TempDir(), Port: ln.Addr().(*net.TCPAddr).Port})
		require.ErrorIs(t, err, syscall.EADDRINUSE)
	})
}

func portOf(t *testing.T, b *broker.Broker) int {
	t.Helper()
	_, p, err := net.SplitHostPort(b.Addrs()[0])
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

func TestAutoTopicCreationIsOff(t *testing.T) {
	t.Parallel()
	tb := setup(t, broker.Options{})
	cl := newClient(t, tb.b.Addrs(), kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(1))

	err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "not-provisioned", Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)

	topics, err := kadm.NewClient(cl).ListTopics(ctxT(t))
	require.NoError(t, err)
	require.False(t, topics.Has("not-provisioned"))
}

func TestRecordsAndGroupOffsetsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{DataDir: dir})
	require.NoError(t, err)
	const (
		topic = "orders"
		group = "readers"
		n     = 200
	)
	createTopic(t, b.Addrs(), topic, 4, nil)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 17)), Value: []byte(strconv.Itoa(i))})
	}
	produce(t, b.Addrs(), recs...)

	// Commit offsets through a real group member, the way goka and the
	// dispatchers do.
	cl := newClient(t, b.Addrs(), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx := ctxT(t)
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		seen += len(fs.Records())
	}
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))
	committed := cl.CommittedOffsets()
	cl.Close()
	require.NoError(t, b.Close())

	b, err = broker.Start(broker.Options{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	got := readAll(t, b.Addrs(), topic, n)
	require.Len(t, got, n)
	values := map[string]bool{}
	for _, r := range got {
		values[string(r.Value)] = true
	}
	require.Len(t, values, n)

	fetched, err := kadm.NewClient(newClient(t, b.Addrs())).FetchOffsets(ctxT(t), group)
	require.NoError(t, err)
	require.NoError(t, fetched.Error())
	var total int64
	fetched.Each(func(o kadm.OffsetResponse) {
		require.Equal(t, committed[topic][o.Partition].Offset, o.At, "partition %d", o.Partition)
		total += o.At
	})
	require.EqualValues(t, n, total)
}

func TestCompactionRunsAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := broker.Options{DataDir: dir, CleanerBackoff: 100 * time.Millisecond}
	b, err := broker.Start(opts)
	require.NoError(t, err)
	const topic = "table"
	compact := "compact"
	createTopic(t, b.Addrs(), topic, 1, map[string]*string{"cleanup.policy": &compact})
	require.NoError(t, b.Close())

	// Only after the restart do we write: kfake's own compaction ticker
	// is not running now, ours must be.
	b, err = broker.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	const keys, rounds = 5, 6
	for round := range rounds {
		var recs []*kgo.Record
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(k)), Value: []byte(strconv.Itoa(round))})
		}
		produce(t, b.Addrs(), recs...) // one batch per round
	}
	require.EqualValues(t, keys*rounds, endOffsets(t, b.Addrs(), topic))

	// kfake, like Kafka with its active segment, never compacts the last
	// batch and compacts the rest among themselves: the newest value per
	// key survives twice, from the last two rounds.
	checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		got, err := readToEnd(t.Context(), b.Addrs(), topic)
		if err != nil {
			return err
		}
		if len(got) != 2*keys {
			return fmt.Errorf("log holds %d records, want %d after compaction", len(got), 2*keys)
		}
		for i, r := range got {
			if want := strconv.Itoa(rounds - 2 + i/keys); string(r.Value) != want {
				return fmt.Errorf("record %d (key %s) has value %s, want %s", i, r.Key, r.Value, want)
			}
		}
		return nil
	})
}

// With Tables given, compaction waits until they have grown by
// MinDirtyBytes (and DirtyRatio of their size): below it the log is left
// as written.
func TestCompactionWaitsForTablesToGrow(t *testing.T) {
	t.Parallel()
	const topic = "table"
	compact := "compact"
	write := func(b *broker.Broker, rounds int) {
		for range rounds {
			var recs []*kgo.Record
			for k := range 5 {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(k)), Value: bytes.Repeat([]byte{'x'}, 200)})
			}
			produce(t, b.Addrs(), recs...)
		}
	}
	records := func(b *broker.Broker) int {
		got, err := readToEnd(t.Context(), b.Addrs(), topic)
		require.NoError(t, err)
		return len(got)
	}

	idleReg, busyReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	idle := setup(t, broker.Options{CleanerBackoff: 20 * time.Millisecond, Tables: []string{topic}, MinDirtyBytes: 1 << 30, Registerer: idleReg})
	createTopic(t, idle.b.Addrs(), topic, 1, map[string]*string{"cleanup.policy": &compact})
	write(idle.b, 6)
	time.Sleep(300 * time.Millisecond) // passes that must not compact
	require.Equal(t, 30, records(idle.b), "below the dirty threshold nothing is compacted")
	require.Zero(t, counter(t, idleReg, "chime_broker_compactions_total"))

	busy := setup(t, broker.Options{CleanerBackoff: 20 * time.Millisecond, Tables: []string{topic}, MinDirtyBytes: 500, Registerer: busyReg}) // batches compress to ~150 bytes
	createTopic(t, busy.b.Addrs(), topic, 1, map[string]*string{"cleanup.policy": &compact})
	write(busy.b, 6)
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := records(busy.b); n >= 30 {
			return fmt.Errorf("log holds %d records, want fewer after a compaction", n)
		}
		return nil
	})
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if counter(t, busyReg, "chime_broker_compactions_total") == 0 {
			return fmt.Errorf("chime_broker_compactions_total is 0 after a compaction")
		}
		if _, held := stalls(t, busyReg); held <= 0 {
			return fmt.Errorf("chime_broker_compaction_stall_seconds adds up to 0 after a compaction")
		}
		return nil
	})
	holds, _ := stalls(t, idleReg)
	require.Zero(t, holds)
}

// The tables are compacted a partition at a time (kfake holds its request
// loop for each): every partition of every table is compacted, and each
// keeps the newest value of every key.
func TestEveryPartitionOfEveryTableIsCompacted(t *testing.T) {
	t.Parallel()
	tables := []string{"table-a", "table-b"}
	const partitions, keys = 3, 5
	compact := "compact"
	reg := prometheus.NewRegistry()
	tb := setup(t, broker.Options{CleanerBackoff: 20 * time.Millisecond, Tables: tables, MinDirtyBytes: 500, Registerer: reg})
	cl := newClient(t, tb.b.Addrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range tables {
		createTopic(t, tb.b.Addrs(), topic, partitions, map[string]*string{"cleanup.policy": &compact})
	}
	// Rounds of every key to every partition until each partition holds
	// fewer records than were written to it: a pass may start while rounds
	// are written, so how many it takes is not known in advance.
	rounds := 0
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		var recs []*kgo.Record
		for _, topic := range tables {
			for p := range int32(partitions) {
				for k := range keys {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(strconv.Itoa(k)),
						Value: []byte(fmt.Sprintf("%d %s", rounds, bytes.Repeat([]byte{'x'}, 200)))})
				}
			}
		}
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			return err
		}
		rounds++
		for _, topic := range tables {
			for p := range int32(partitions) {
				got, err := readPartitionToEnd(t.Context(), tb.b.Addrs(), topic, p)
				if err != nil {
					return err
				}
				if len(got) >= keys*rounds {
					return fmt.Errorf("%s-%d holds the %d records written to it, want fewer after a compaction", topic, p, len(got))
				}
				newest := map[string]string{}
				for _, r := range got {
					newest[string(r.Key)] = strings.Fields(string(r.Value))[0]
				}
				for k := range keys {
					if v := newest[strconv.Itoa(k)]; v != strconv.Itoa(rounds-1) {
						return fmt.Errorf("%s-%d: key %d reads round %q, want the last, %d", topic, p, k, v, rounds-1)
					}
				}
			}
		}
		return nil
	})
	require.Positive(t, counter(t, reg, "chime_broker_compactions_total"))
	holds, _ := stalls(t, reg)
	require.GreaterOrEqual(t, holds, uint64(len(tables)*partitions), "the request loop is held once per partition")
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(tb.dir, "compaction")); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("a partition's files are still linked aside: %v", err)
		}
		return nil
	})
}

func TestKill9LosesNothingAndFreesTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 500

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildRecords+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		require.Equal(t, fmt.Sprintf("ready %d\n", cmd.Process.Pid), line)
	case <-time.After(60 * time.Second):
		t.Fatal("child broker did not get ready in 60s")
	}

	// While the child lives, its lock keeps us out and names it.
	_, err = broker.Start(broker.Options{DataDir: dir})
	require.ErrorContains(t, err, "process "+strconv.Itoa(cmd.Process.Pid))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	killed = true
	werr := cmd.Wait()
	require.Error(t, werr)
	require.Contains(t, werr.Error(), "killed")
	_, err = os.Stat(filepath.Join(dir, broker.LockFileName))
	require.NoError(t, err, "the lock file stays; only the flock died with the process")

	b, err := broker.Start(broker.Options{DataDir: dir})
	require.NoError(t, err, "the lock must not survive kill -9")
	t.Cleanup(func() { _ = b.Close() })
	require.EqualValues(t, n, endOffsets(t, b.Addrs(), childTopic))
	got := readAll(t, b.Addrs(), childTopic, n)
	values := map[string]bool{}
	for _, r := range got {
		values[string(r.Value)] = true
	}
	require.Len(t, values, n)

	fetched, err := kadm.NewClient(newClient(t, b.Addrs())).FetchOffsets(ctxT(t), childGroup)
	require.NoError(t, err)
	o, ok := fetched.Lookup(childTopic, 0)
	require.True(t, ok, "committed offset lost")
	require.EqualValues(t, n/6, o.At)
}

// kfake compacts by deleting a partition's segment files and writing the
// survivors anew. A broker killed in between finds the files it linked
// aside before compacting, and puts them back: every record is there.
func TestInterruptedCompactionLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const topic = "chime.table"
	compact := "compact"
	b, err := broker.Start(broker.Options{DataDir: dir, Tables: []string{topic}})
	require.NoError(t, err)
	createTopic(t, b.Addrs(), topic, 2, map[string]*string{"cleanup.policy": &compact})
	for round := range 6 {
		var recs []*kgo.Record
		for k := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(k)), Value: []byte(strconv.Itoa(round))})
		}
		produce(t, b.Addrs(), recs...)
	}
	before, err := readToEnd(t.Context(), b.Addrs(), topic) // partition 0
	require.NoError(t, err)
	require.NotEmpty(t, before)
	require.NoError(t, b.Close())

	// The state a kill leaves: files linked aside, the marker written,
	// the live segment files already deleted, a new one half written.
	for p := range 2 {
		live := filepath.Join(dir, "partitions", topic+"-"+strconv.Itoa(p))
		saved := filepath.Join(dir, "compaction", topic+"-"+strconv.Itoa(p))
		require.NoError(t, os.MkdirAll(saved, 0o755))
		ents, err := os.ReadDir(live)
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".dat") || strings.HasSuffix(e.Name(), ".idx") {
				require.NoError(t, os.Link(filepath.Join(live, e.Name()), filepath.Join(saved, e.Name())))
				require.NoError(t, os.Remove(filepath.Join(live, e.Name())))
			}
		}
		require.NoError(t, os.WriteFile(filepath.Join(live, "0.dat"), []byte("half a batch"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compaction", "PENDING"), nil, 0o644))

	var logged []string
	b, err = broker.Start(broker.Options{DataDir: dir, Tables: []string{topic}, Logf: func(f string, a ...any) {
		logged = append(logged, fmt.Sprintf(f, a...))
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoDirExists(t, filepath.Join(dir, "compaction"))
	require.Contains(t, strings.Join(logged, "\n"), "2 table partitions restored")
	got, err := readToEnd(t.Context(), b.Addrs(), topic)
	require.NoError(t, err)
	require.Len(t, got, len(before), "every record written before the interrupted compaction")
	for i := range got {
		require.Equal(t, string(before[i].Value), string(got[i].Value))
	}
}

// TestConsumedStreamsAreTrimmed holds the trim to the lowest offset any
// group committed on a partition, and to nothing while a reader has not
// committed: records not consumed by every reader are never deleted.
func TestConsumedStreamsAreTrimmed(t *testing.T) {
	t.Parallel()
	const topic, reader, other = "stream", "reader", "someone-else"
	reg := prometheus.NewRegistry()
	tb := setup(t, broker.Options{
		CleanerBackoff: 20 * time.Millisecond,
		Streams:        []broker.Stream{{Topic: topic, Readers: []string{reader}}},
		Registerer:     reg,
	})
	addrs := tb.b.Addrs()
	createTopic(t, addrs, topic, 2, nil)
	pcl := newClient(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 100 {
		require.NoError(t, pcl.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte(strconv.Itoa(i))}).FirstErr())
	}
	adm := kadm.NewClient(newClient(t, addrs))
	commit := func(group string, at int64) {
		t.Helper()
		offs := make(kadm.Offsets)
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctxT(t), group, offs)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	startIs := func(want int64) {
		t.Helper()
		checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			offs, err := adm.ListStartOffsets(ctxT(t), topic)
			if err != nil {
				return err
			}
			o, _ := offs.Lookup(topic, 0)
			if o.Offset != want {
				return fmt.Errorf("log start offset %d, want %d", o.Offset, want)
			}
			return nil
		})
	}

	// Another group consumed 40, the reader nothing: nothing may go. The
	// pause gives a wrong trim a dozen passes to happen.
	commit(other, 40)
	time.Sleep(250 * time.Millisecond)
	startIs(0)
	// The reader is behind the other group: the trim stops at the reader.
	commit(reader, 20)
	startIs(20)
	// Now the other group is behind.
	commit(reader, 70)
	startIs(40)
	commit(other, 100)
	startIs(70)
	got := readAll(t, addrs, topic, 30)
	require.Equal(t, "70", string(got[0].Value), "the first record kept is the first one the reader has not committed")
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := counter(t, reg, "chime_broker_trimmed_records_total"); n != 70 {
			return fmt.Errorf("chime_broker_trimmed_records_total %v, want 70", n)
		}
		return nil
	})
}

// counter is the value of the counter name in reg (0 if absent).
// stalls reads chime_broker_compaction_stall_seconds: how many times a
// compaction held the request loop, and for how long in all.
func stalls(t *testing.T, reg *prometheus.Registry) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "chime_broker_compaction_stall_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
