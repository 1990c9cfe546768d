// Package broker owns chime's embedded Kafka-compatible broker: a single-node
// kfake cluster (github.com/twmb/franz-go/pkg/kfake) that persists to a data
// directory, survives restarts and kill -9 with every record it
// acknowledged (trimming a stream never empties a partition: see Stream),
// compacts compacted topics, and refuses to share its directory with
// another running broker.
//
// It is what `chime dev` and the integration tests run instead of a real
// Kafka cluster; goka and franz-go talk to it unchanged. A Broker is a
// lifecycle.Part (New, then Start and Stop), which a chime process runs as
// the first part of its group; Start(opts) and Close are for tests and
// tools that want one at once.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/chime-sched/chime/infra/dirlock"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/internal/setting"
)

// DefaultCleanerBackoff is how often the broker considers compaction and
// retention when Options does not say.
const DefaultCleanerBackoff = 30 * time.Second

// Compaction of Options.Tables runs once what was written since the last
// pass is at least DirtyRatio of their bytes (and at least
// Options.MinDirtyBytes, DefaultMinDirtyBytes unless set):
// kfake reads and rewrites a compacted partition whole (and holds a map
// of all its keys), so passing every CleanerBackoff cost a
// third of a core with a million jobs in the scheduler's table. It is
// Kafka's own rule (min.cleanable.dirty.ratio, 0.5 by default): a table
// that only grows, as while jobs are created, is rewritten each time it
// doubles, not each time it grows by half.
const (
	DirtyRatio           = 0.5
	DefaultMinDirtyBytes = 64 << 20
)

// Options configures New and Start.
type Options struct {
	// DataDir holds the topics, records and group offsets. Required: a
	// broker that forgets everything on restart would break chime's
	// promise that nothing acknowledged is lost.
	DataDir string
	// Port is the TCP port on 127.0.0.1 to listen on. 0 listens on the
	// port the last broker on DataDir listened on while it is free
	// (PortFileName), else on a free one (Moved says which was taken).
	// Either way the port is kept for the next start.
	Port int
	// CleanerBackoff is the pause between compaction passes
	// (log.cleaner.backoff.ms); 0 means DefaultCleanerBackoff.
	CleanerBackoff time.Duration
	// Tables are the compacted topics: their growth decides when to
	// compact (DirtyRatio), and their files are linked aside during a
	// compaction so a kill in the middle loses nothing (compaction.go).
	// List every compacted topic. Empty (tests): every compacted topic is
	// compacted every CleanerBackoff, unprotected.
	Tables []string
	// MinDirtyBytes is the least growth of Tables that triggers a
	// compaction; 0 means DefaultMinDirtyBytes.
	MinDirtyBytes int64
	// Streams are trimmed every CleanerBackoff once their readers
	// consumed them, and past their retention (trim.go). The Streams and
	// Tables lose no other record: kfake's own retention is off, and
	// their retention settings are removed (see retentionConfigs).
	Streams []Stream
	// SyncWrites fsyncs every produced batch. Without it a killed process
	// loses nothing (writes are in the page cache), but a machine crash
	// can lose the last writes, as with Kafka's defaults.
	SyncWrites bool
	// SASL, when set, makes the broker require SASL/PLAIN with this
	// superuser from every client.
	SASL kafkaauth.Credential
	// Logf, if set, receives the broker's warnings and errors.
	Logf func(format string, args ...any)
	// Registerer, if set, gets the broker's metrics: records trimmed from
	// the streams and compactions of the tables.
	Registerer prometheus.Registerer
}

// validate applies the defaults to the options left unset and refuses
// the values the broker cannot work with, naming each.
func (o *Options) validate() error {
	if o.DataDir == "" {
		return errors.New("broker: Options.DataDir is required (the embedded broker always persists)")
	}
	var port error
	if o.Port < 0 || o.Port > 65535 {
		port = fmt.Errorf("broker: port %d out of range 0-65535", o.Port)
	}
	return errors.Join(
		port,
		setting.Positive("broker", "CleanerBackoff", &o.CleanerBackoff, DefaultCleanerBackoff),
		setting.Positive("broker", "MinDirtyBytes", &o.MinDirtyBytes, DefaultMinDirtyBytes),
	)
}

// Broker is the embedded broker, a lifecycle.Part: Start takes the data
// directory and listens, in the background; the broker is ready once it
// listens, and runs until Stop (or its context ends), then saves its state
// and releases the directory. A process runs it first and stops it last,
// after every part that writes to it has flushed.
type Broker struct {
	lifecycle.Base
	opts Options

	// Set by run before the broker is ready, read once it is.
	cluster *kfake.Cluster
	lock    *dirlock.Lock
	addrs   []string
	trim    *trimmer
	moved   int

	// trimmed and compactions count what the cleaner did, for metrics;
	// holds is each time a compaction held kfake's request loop (one
	// partition of a table at a time).
	trimmed, compactions atomic.Int64
	holds                prometheus.Histogram
}

var _ lifecycle.Part = (*Broker)(nil)

// New returns the broker on opts, not started yet. It refuses options the
// broker cannot work with.
func New(opts Options) (*Broker, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Broker{opts: opts, holds: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "chime_broker_compaction_stall_seconds",
		Help:    "Each time a compaction by the embedded broker held its request loop (a partition of a table at a time), every produce and fetch waiting meanwhile; the sum is the time the pipeline stood still.",
		Buckets: StallBuckets,
	})}, nil
}

// Start is New, then b.Start, then a wait until the broker listens: for
// tests and tools that want a running broker at once. Close stops it.
func Start(opts Options) (*Broker, error) {
	b, err := New(opts)
	if err != nil {
		return nil, err
	}
	if err := b.Start(context.Background()); err != nil {
		return nil, err
	}
	if lifecycle.Wait(context.Background(), b) != nil {
		return nil, b.Err() // why it did not start, as open said it
	}
	return b, nil
}

// Name implements lifecycle.Part.
func (b *Broker) Name() string { return "embedded broker" }

// Start implements lifecycle.Part: it takes the data directory's lock and
// starts a broker on it, loading whatever an earlier broker persisted
// there. The broker is ready once it listens (Addrs); one that cannot
// (the directory is another broker's, a fixed port is taken) stops with
// the reason (Err).
func (b *Broker) Start(ctx context.Context) error { return b.Go(ctx, b.run) }

func (b *Broker) run(ctx context.Context, ready func()) error {
	if err := b.open(); err != nil {
		return err
	}
	ready()
	b.compactLoop(ctx)
	b.trim.close()
	// kfake's Close saves its state synchronously; the lock must outlive
	// that write.
	b.cluster.Close()
	return b.lock.Release()
}

// open takes the lock and starts the cluster; on an error it leaves
// nothing held.
func (b *Broker) open() error {
	opts := b.opts
	// The lock comes first: opening the cluster already reads and rewrites
	// files in the directory.
	lock, err := lockDir(opts.DataDir)
	if err != nil {
		return err
	}
	restored, err := recoverCompaction(opts.DataDir)
	if err != nil {
		_ = lock.Release()
		return fmt.Errorf("broker: restoring the files of an interrupted compaction in %q: %w", opts.DataDir, err)
	}
	if restored > 0 {
		b.logf("broker: a compaction was interrupted; %d table partitions restored as they were before it", restored)
	}

	port, remembered := opts.Port, 0
	if port == 0 {
		if remembered, err = rememberedPort(opts.DataDir); err != nil {
			b.logf("broker: a free port instead of the one used before: %v", err)
		}
		port = remembered
	}
	kopts := []kfake.Opt{
		kfake.DataDir(opts.DataDir),
		kfake.ClusterID("chime"),
		// AllowAutoTopicCreation stays off: chime provisions every topic
		// (infra/topics). An auto-created topic gets cleanup.policy=delete
		// and the default partition count, which goka rejects for tables
		// and which silently breaks co-partitioning.
		// kfake's own cleaner would compact on every backoff whatever
		// changed; compactLoop decides instead.
		kfake.BrokerConfigs(brokerConfigs()),
	}
	if opts.SyncWrites {
		kopts = append(kopts, kfake.SyncWrites())
	}
	if opts.SASL.Enabled() {
		// Every client must authenticate: anyone on the host reaches
		// 127.0.0.1, and the log holds namespace keys' hashes and
		// signing secrets.
		kopts = append(kopts, kfake.EnableSASL(), kfake.Superuser("PLAIN", opts.SASL.User, opts.SASL.Password))
	}
	if opts.Logf != nil {
		kopts = append(kopts, kfake.WithLogger(logger{opts.Logf}))
	}
	// One port means one broker: a multi-node kfake shares one process
	// and one disk, so extra nodes add nothing but replication factor
	// bookkeeping.
	cluster, err := kfake.NewCluster(append(kopts, kfake.Ports(port))...)
	moved := 0
	if err != nil && remembered != 0 && errors.Is(err, syscall.EADDRINUSE) {
		// Another process took the port while the broker was down. Only a
		// fixed port (opts.Port) is worth failing for.
		moved = remembered
		cluster, err = kfake.NewCluster(append(kopts, kfake.Ports(0))...)
	}
	if err != nil {
		_ = lock.Release()
		return fmt.Errorf("broker: start on data dir %q: %w", opts.DataDir, err)
	}
	b.cluster, b.lock, b.addrs, b.moved = cluster, lock, cluster.ListenAddrs(), moved
	if err := rememberPort(opts.DataDir, portOf(b.addrs)); err != nil {
		b.logf("broker: the next start may listen on another port: remembering this one: %v", err)
	}
	if b.trim, err = newTrimmer(b.addrs, opts.SASL, opts.Streams, opts.Tables, b.logf); err != nil {
		cluster.Close()
		_ = lock.Release()
		return err
	}
	if err := b.registerMetrics(opts.Registerer); err != nil {
		b.trim.close()
		cluster.Close()
		_ = lock.Release()
		return err
	}
	return nil
}

// kfakeCleanerOff keeps kfake's own compaction ticker from doing anything
// in practice (a year).
const kfakeCleanerOff = 365 * 24 * time.Hour

// brokerConfigs are kfake's: compaction on our schedule (compactLoop), and
// no retention of its own (see retentionConfigs).
func brokerConfigs() map[string]string {
	cfg := map[string]string{
		"log.cleaner.backoff.ms": strconv.FormatInt(kfakeCleanerOff.Milliseconds(), 10),
	}
	for _, k := range retentionConfigs {
		cfg["log."+k] = "-1"
	}
	return cfg
}

// compactLoop trims the streams (trim.go) and compacts on our own schedule
// (kfake's ticker also starts only when a topic is created, not when
// compacted topics are loaded from disk), until ctx ends. With
// Options.Tables given, compaction waits for them to grow (DirtyRatio).
func (b *Broker) compactLoop(ctx context.Context) {
	tables := b.opts.Tables
	// Sub-millisecond would round to 0 ms, which kfake's ticker rejects.
	t := time.NewTicker(max(b.opts.CleanerBackoff, time.Millisecond))
	defer t.Stop()
	// The tables as loaded count as compacted: a restart does not rewrite
	// them all at once.
	clean := b.tableBytes(tables)
	var notBefore time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.trimStreams(ctx)
		// kfake's compaction applies the topics' retention settings too:
		// none may be left (see retentionConfigs).
		if err := b.trim.dropRetentionOverrides(ctx); err != nil {
			if ctx.Err() == nil {
				b.logf("broker: compaction skipped: %v", err)
			}
			continue
		}
		if len(tables) == 0 {
			b.compact()
			continue
		}
		size := b.tableBytes(tables)
		if dirty := size - clean; dirty >= b.opts.MinDirtyBytes && float64(dirty) >= DirtyRatio*float64(size) && !time.Now().Before(notBefore) {
			held, compacted, err := b.compactTables(ctx, tables)
			if err != nil {
				b.logf("broker: compaction skipped: %v", err)
				continue
			}
			notBefore = time.Now().Add(compactionSpacing(held))
			clean = compacted
		}
	}
}

// trimStreams deletes what the streams' readers consumed, and what is past
// their retention (trim.go).
func (b *Broker) trimStreams(ctx context.Context) {
	n, err := b.trim.trim(ctx)
	b.trimmed.Add(n)
	if err != nil && ctx.Err() == nil {
		b.logf("broker: trimming consumed records: %v", err)
	}
}

// compactTables compacts the tables a partition at a time, each with its
// files linked aside (compaction.go) so a kill in the middle loses
// nothing. It says how long it held kfake's request loop in all, and the
// bytes the tables held as each partition was compacted: what was written
// to a partition after its turn is still to compact.
// kfake compacts in that loop, serving no produce or fetch meanwhile: one
// pass over every partition held it 13-15 s with 3M jobs' rows on 2 cores,
// longer than the API's publish timeout. One partition at a time, it is
// held for that partition's rows, then left alone for as long as that took
// so the requests that waited go through: the pipeline slows while the
// tables are compacted instead of standing still.
func (b *Broker) compactTables(ctx context.Context, tables []string) (held time.Duration, compacted int64, err error) {
	var longest time.Duration
	var slowest string
	defer b.compactions.Add(1)
	for _, t := range tables {
		for _, p := range b.cluster.PartitionInfos(t) {
			took, err := b.compactPartition(t, p.Partition)
			held += took
			if err != nil {
				return held, compacted, err
			}
			if after := b.cluster.PartitionInfo(t, p.Partition); after != nil {
				compacted += after.NumBytes
			}
			if took > longest {
				longest, slowest = took, fmt.Sprintf("%s-%d", t, p.Partition)
			}
			select {
			case <-ctx.Done():
				return held, compacted, nil
			case <-time.After(took):
			}
		}
	}
	if longest >= slowCompaction {
		b.logf("broker: compacting the tables held the request loop %s in all, %s at once at most (%s); produce and fetch requests waited meanwhile",
			held.Round(time.Millisecond), longest.Round(time.Millisecond), slowest)
	}
	return held, compacted, nil
}

// compactPartition compacts one partition of a table with its files linked
// aside, counts the time it held the request loop, and says how long that
// was.
func (b *Broker) compactPartition(topic string, partition int32) (time.Duration, error) {
	if err := b.protect(topic, partition); err != nil {
		_ = b.unprotect()
		return 0, err
	}
	took := b.hold(func() { b.cluster.CompactPartition(topic, partition) })
	return took, b.unprotect()
}

// hold runs fn, a compaction in kfake's request loop, and records and
// returns how long it held the loop.
func (b *Broker) hold(fn func()) time.Duration {
	start := time.Now()
	fn()
	took := time.Since(start)
	b.holds.Observe(took.Seconds())
	return took
}

// compact runs kfake's compaction pass over every compacted topic at once
// (without Options.Tables: tests), counts it and the time it held the
// request loop.
func (b *Broker) compact() {
	b.hold(b.cluster.Compact)
	b.compactions.Add(1)
}

// StallBuckets are the bounds, in seconds, of
// chime_broker_compaction_stall_seconds: from a small table's partition
// (milliseconds) to a whole pass over millions of rows, as upstream kfake
// compacts (13-15 s).
var StallBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}

// slowCompaction is how long a compaction may take before it is logged.
const slowCompaction = time.Second

// compactionStallShare bounds the share of the time the tables'
// compactions may stall the broker: kfake compacts in its request loop,
// and with millions of rows a pass over the tables holds it for seconds
// in all (13-15 s for 3M jobs' rows on 2 cores; at most 2-5 s of it at
// once since the pass goes a partition at a time: compactTables), every
// produce and fetch slower meanwhile. After a pass that held the loop d,
// the next waits d/compactionStallShare; small tables (milliseconds) are
// compacted as soon as they grow (DirtyRatio), as before.
const compactionStallShare = 0.05

// compactionSpacing is how long after a compaction that took took the
// next may start.
func compactionSpacing(took time.Duration) time.Duration {
	return time.Duration(float64(took) / compactionStallShare)
}

func (b *Broker) logf(format string, args ...any) {
	if b.opts.Logf != nil {
		b.opts.Logf(format, args...)
	}
}

// tableBytes is the bytes the given topics hold.
func (b *Broker) tableBytes(topics []string) int64 {
	var n int64
	for _, t := range topics {
		for _, p := range b.cluster.PartitionInfos(t) {
			n += p.NumBytes
		}
	}
	return n
}

// Addrs returns the host:port the broker listens on (127.0.0.1 only), once
// it is ready. It stays valid after it stopped (kfake's own ListenAddrs
// would block forever then).
func (b *Broker) Addrs() []string {
	return append([]string(nil), b.addrs...)
}

// Moved returns the port the broker listened on before, when Options.Port
// was 0 and another process had taken it, so the broker listens on a new
// one (Addrs): whoever was given the old address must be given the new.
// It returns 0 when the broker listens where it did before, or had no
// port to go back to.
func (b *Broker) Moved() int { return b.moved }

// portOf is the port of the first of addrs ("127.0.0.1:port").
func portOf(addrs []string) int {
	if len(addrs) == 0 {
		return 0
	}
	_, p, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// DataDir returns the directory the broker persists to.
func (b *Broker) DataDir() string { return b.opts.DataDir }

// Close stops the broker (Stop), which flushes its state to disk and
// releases the data directory, and says whether releasing failed. It is
// safe to call more than once.
func (b *Broker) Close() error {
	b.Stop()
	return b.Err()
}

type logger struct {
	logf func(format string, args ...any)
}

// Logf forwards warnings and errors only: kfake's info level logs every
// request.
func (l logger) Logf(level kfake.LogLevel, msg string, args ...any) {
	if level == kfake.LogLevelNone || level > kfake.LogLevelWarn {
		return
	}
	l.logf("kfake "+level.String()+": "+msg, args...)
}
