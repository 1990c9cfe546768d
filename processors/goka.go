package processors

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/rcrowley/go-metrics"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/schema"
)

// SaramaConfig returns the sarama configuration every chime goka component
// consumes with, authenticating with c.SASL. goka's defaults are wrong for
// us: streams must start at the oldest offset (a command published before
// the group first ran is still a command).
func SaramaConfig(c Client) *sarama.Config {
	cfg := goka.DefaultConfig()
	cfg.ClientID = c.ClientID
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	// A fetch returns as soon as a record arrives (Fetch.Min is one byte);
	// the wait only bounds how often an idle consumer asks again. Every
	// chime process runs a dozen goka consumers, so 50 ms cost an idle
	// chime dev 3% of a core.
	cfg.Consumer.MaxWaitTime = schema.IdleFetchWait
	// A consumer whose fetches wait for a batch (BatchedInput) asks as
	// the others do while nothing comes: after a fetch with no records,
	// for one byte and up to IdleFetchWait (chime's sarama fork,
	// third_party/sarama/CHIME.md). Its batch wait (20 or 100 ms) made it
	// ask 10 to 50 times a second with nothing to read: most of an idle
	// chime dev's CPU.
	cfg.Consumer.Fetch.IdleWait = schema.IdleFetchWait
	cfg.Consumer.Fetch.Default = 4 << 20
	// No sarama producer: processors produce through franz-go
	// (producer.go).
	cfg.Metadata.RefreshFrequency = 30 * time.Second
	withSASL(cfg, c.SASL)
	return cfg
}

// withSASL makes cfg authenticate with cred (none: unchanged).
func withSASL(cfg *sarama.Config, cred kafkaauth.Credential) {
	if !cred.Enabled() {
		return
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.User = cred.User
	cfg.Net.SASL.Password = cred.Password
}

// withMembership applies m (infra/groups) to a sarama configuration.
func withMembership(cfg *sarama.Config, m groups.Membership) {
	cfg.Consumer.Group.Session.Timeout = m.Session()
	cfg.Consumer.Group.Heartbeat.Interval = m.Heartbeat()
	cfg.Consumer.Group.Rebalance.Timeout = groups.DefaultRebalanceTimeout
	// sarama waits this long before retrying a join that failed (the
	// coordinator still rebalancing); its 2 s default added to takeovers.
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 250 * time.Millisecond
	cfg.Consumer.Group.InstanceId = m.InstanceID
	// goka's co-partitioning strategy sends no assignment user data, so
	// sarama sends this configured one at every join.
	cfg.Consumer.Group.Member.UserData = m.UserData()
}

func init() {
	// sarama records client metrics (histograms per request) in
	// go-metrics; chime exposes its own, and the recording cost CPU on
	// every request, busy or idle.
	metrics.UseNilMetrics = true
}

// TopicManagerConfig makes goka fail on a topic that does not match what it
// needs instead of silently carrying on; topics are provisioned up front by
// infra/topics, so goka never has to create one.
func TopicManagerConfig(replication int) *goka.TopicManagerConfig {
	tm := goka.NewTopicManagerConfig()
	tm.Table.Replication = replication
	tm.Stream.Replication = replication
	tm.MismatchBehavior = goka.TMConfigMismatchBehaviorFail
	return tm
}

// Hasher is goka's partitioner hash (FNV-1a 32), named so that every chime
// component that must agree with goka refers to the same function.
func Hasher() hash.Hash32 { return fnv.New32a() }

// PartitionOf is schema.PartitionOf: the partition goka's producer
// writes key to in a topic of n partitions.
func PartitionOf(key string, n int32) int32 { return schema.PartitionOf(key, n) }

// ProcessorOptions are the goka options shared by every chime processor,
// from its validated Config. Each builder gets its own sarama config:
// goka's builders write the client ID into the config they are given
// while clients built from it read it. c.Membership decides how the
// processor's consumer group member behaves (session timeout, static
// membership).
func ProcessorOptions(c Config) []goka.ProcessorOption {
	// A processor's own sarama consumer reads its table partitions only
	// while recovering them after an assignment, and closing it waits for
	// the fetch in flight: with the idle wait, every takeover paid it.
	recoverCfg := SaramaConfig(c.Client)
	recoverCfg.Consumer.MaxWaitTime = RecoveryFetchWait
	return []goka.ProcessorOption{
		goka.WithClientID(c.ClientID),
		goka.WithConsumerGroupBuilder(groupBuilder(c, nil, nil)),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(recoverCfg)),
		goka.WithProducerBuilder(ProducerBuilder(c.Client)),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(SaramaConfig(c.Client), TopicManagerConfig(c.Replication))),
		goka.WithHasher(Hasher),
		goka.WithLogger(slogLogger{c.Logger}),
	}
}

// RecoveryFetchWait bounds the fetch wait of the consumer a processor
// recovers its table partitions with.
const RecoveryFetchWait = 100 * time.Millisecond

// BatchedInput is the option of a processor whose inputs can wait: its
// consumer group's fetches are answered once the broker holds
// schema.BatchedFetchBytes for it, or after wait, instead of with the
// first record. At a steady trickle a fetch per few records made most of
// such a processor's CPU per record (the breaker: about 40 µs an outcome
// at 2,000 a second, where draining a backlog costs 3 µs;
// docs/capacity.md). Given after ProcessorOptions, it replaces their
// consumer group builder.
func BatchedInput(c Config, wait time.Duration) goka.ProcessorOption {
	return goka.WithConsumerGroupBuilder(BatchedGroupBuilder(c, nil, wait))
}

// BatchedGroupBuilder builds a processor's consumer group with
// BatchedInput's fetches; wrap, if set, wraps the handler goka consumes
// with (the scheduler's commit gate).
func BatchedGroupBuilder(c Config, wrap func(sarama.ConsumerGroupHandler) sarama.ConsumerGroupHandler, wait time.Duration) goka.ConsumerGroupBuilder {
	return groupBuilder(c, wrap, func(cfg *sarama.Config) { batchedFetches(cfg, wait) })
}

// batchedFetches makes cfg's fetches wait for schema.BatchedFetchBytes, or
// wait, while records come (Fetch.IdleWait: not while none do).
func batchedFetches(cfg *sarama.Config, wait time.Duration) {
	cfg.Consumer.Fetch.Min = schema.BatchedFetchBytes
	cfg.Consumer.MaxWaitTime = wait
}

// groupBuilder builds a processor's consumer group from c, its sarama
// configuration changed by tune if set; wrap, if set, wraps the handler
// goka consumes with.
func groupBuilder(c Config, wrap func(sarama.ConsumerGroupHandler) sarama.ConsumerGroupHandler, tune func(*sarama.Config)) goka.ConsumerGroupBuilder {
	groupCfg := SaramaConfig(c.Client)
	withMembership(groupCfg, c.Membership)
	if tune != nil {
		tune(groupCfg)
	}
	return rejoining(goka.ConsumerGroupBuilderWithConfig(groupCfg), wrap)
}

// rejoining wraps goka's consumer group so that a rebalance does not end
// Consume: goka waits a fixed 5 s after Consume returns before it joins
// again (processor.go, rebalanceLoop), and the group's coordinator waits
// for that rejoin, so every takeover, even by a process that kept all its
// partitions, took 5 s longer than the session timeout. sarama calls the
// handler's Setup and Cleanup for each generation within one Consume, as
// goka expects; an error (a failed join, a partition processor's error
// returned by Cleanup) still ends Consume and so the processor.
func rejoining(build goka.ConsumerGroupBuilder, wrap func(sarama.ConsumerGroupHandler) sarama.ConsumerGroupHandler) goka.ConsumerGroupBuilder {
	return func(brokers []string, group, clientID string) (sarama.ConsumerGroup, error) {
		g, err := build(brokers, group, clientID)
		if err != nil {
			return nil, err
		}
		return rejoiningGroup{ConsumerGroup: g, wrap: wrap}, nil
	}
}

type rejoiningGroup struct {
	sarama.ConsumerGroup
	wrap func(sarama.ConsumerGroupHandler) sarama.ConsumerGroupHandler
}

// rejoinPause keeps a Consume that ends at once from spinning.
const rejoinPause = 250 * time.Millisecond

func (g rejoiningGroup) Consume(ctx context.Context, topics []string, h sarama.ConsumerGroupHandler) error {
	if g.wrap != nil {
		h = g.wrap(h)
	}
	for {
		started := time.Now()
		if err := g.ConsumerGroup.Consume(ctx, topics, h); err != nil || ctx.Err() != nil {
			return err
		}
		if time.Since(started) < rejoinPause {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(rejoinPause):
			}
		}
	}
}

// ViewOptions are the goka options shared by every chime view, from its
// validated Client.
func ViewOptions(c Client) []goka.ViewOption {
	return []goka.ViewOption{
		goka.WithViewClientID(c.ClientID),
		goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(SaramaConfig(c))),
		goka.WithViewTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(SaramaConfig(c), TopicManagerConfig(c.Replication))),
		goka.WithViewHasher(Hasher),
		goka.WithViewLogger(slogLogger{c.Logger}),
		goka.WithViewAutoReconnect(),
	}
}

// slogLogger adapts slog to goka's logger; goka's chatter goes to debug.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Print(v ...any)                 { s.l.Debug(fmt.Sprint(v...)) }
func (s slogLogger) Println(v ...any)               { s.l.Debug(fmt.Sprint(v...)) }
func (s slogLogger) Printf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }

// SignalReady calls ready once p has recovered its partitions for the
// first time, from goka's state signals (no polling); it returns when
// ctx ends first. Run it beside p.Run, with a ctx that ends with it.
func SignalReady(ctx context.Context, p *goka.Processor, ready func()) {
	for {
		select {
		case <-p.StateReader().WaitForState(goka.ProcStateRunning):
		case <-ctx.Done():
			return
		}
		// Running once every partition's processor runs.
		if err := p.WaitForReadyContext(ctx); err != nil {
			return
		}
		if p.Recovered() {
			ready()
			return
		}
		// A rebalance began meanwhile, or p stopped: wait for its next
		// run (or ctx).
	}
}

// ErrRecovering is what a processor's Ready answers while it recovers its
// partitions (at start, and after each rebalance).
var ErrRecovering = errors.New("recovering its partitions")

// Runner runs a goka processor under Supervise, building a new one after
// each failure, and answers for the one running now: the part shared by
// the breaker and namespace processors (the scheduler adds its own
// storage around it).
type Runner struct {
	mu   sync.Mutex
	proc *goka.Processor
}

// Run builds a processor with build and runs it until ctx ends, again
// (under Supervise, as name) when it fails; ready is called once the
// first one has recovered its partitions.
func (r *Runner) Run(ctx context.Context, name string, logger *slog.Logger, ready func(), build func() (*goka.Processor, error)) error {
	return Supervise(ctx, name, logger, func(ctx context.Context) error {
		proc, err := build()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r.mu.Lock()
		r.proc = proc
		r.mu.Unlock()
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go SignalReady(pctx, proc, ready)
		return proc.Run(pctx)
	})
}

// Recovered answers ErrRecovering unless the processor running now has
// its partitions recovered.
func (r *Runner) Recovered() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || !r.proc.Recovered() {
		return ErrRecovering
	}
	return nil
}

// Processor is the processor running now, nil before the first.
func (r *Runner) Processor() *goka.Processor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}
