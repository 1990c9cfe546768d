package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/views/jobquery"
)

// env is what every role starts from: the configuration, a logger, and a
// broker that is provisioned with every topic.
type env struct {
	cfg         config.Config
	log         *slog.Logger
	out         io.Writer
	brokers     []string
	registry    *prometheus.Registry
	replication int16          // of the scheduler table
	replicas    map[string]int // per table topic
	embedded    *broker.Broker
	// sasl is what every Kafka client of the process authenticates with
	// (none against a cluster without SASL): each component's Config
	// gets it from here.
	sasl kafkaauth.Credential
	// membership is the process's part in chime's consumer groups.
	membership groups.Membership
}

type role func(ctx context.Context, e *env) error

func runRole(ctx context.Context, name string, args []string, getenv func(string) string, stdout, stderr io.Writer, r role) (err error) {
	fs := flag.NewFlagSet("chime "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := config.Load(getenv, args, fs)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chime %s: unexpected arguments %q", name, fs.Args())
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("role", name)
	if err := securePrivateDir(cfg.StateDir, log); err != nil {
		return err
	}
	tuneMemory(ctx, getenv)
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	e := &env{cfg: cfg, log: log, out: stdout, registry: newRegistry()}
	releaseIdentity := e.joinIdentity()
	defer releaseIdentity()
	if err := e.connect(ctx); err != nil {
		return err
	}
	defer func() {
		if ctx.Err() != nil {
			e.leaveGroups()
		}
		e.close()
		if err == nil && ctx.Err() != nil {
			// Operators (and scripts) see that a stop on a signal was
			// clean, not a crash.
			log.Info("stopped cleanly")
		}
	}()
	e.registry.MustRegister(newLagCollector(e.brokers, e.sasl, chimeGroups(cfg)...))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveMetrics(gctx, e) })
	g.Go(func() error {
		err := r(gctx, e)
		if err == nil {
			err = errRoleDone // stop serving metrics too
		}
		return err
	})
	if err := g.Wait(); err != nil && !errors.Is(err, errRoleDone) {
		return err
	}
	return nil
}

// startCPUProfile profiles the role's whole run into path; the returned
// function stops and writes it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// errRoleDone ends a role's errgroup when the role itself returned.
var errRoleDone = errors.New("role done")

// connect starts the embedded broker when no brokers are configured, and
// makes sure every topic exists as chime needs it.
func (e *env) connect(ctx context.Context) error {
	e.brokers = e.cfg.Brokers
	cred := kafkaauth.Credential{User: e.cfg.KafkaSASLUser, Password: e.cfg.KafkaSASLPassword}
	if e.cfg.Embedded() {
		fromEnv := cred.Enabled()
		if !fromEnv {
			var err error
			if cred, err = kafkaauth.LoadOrCreate(e.cfg.KafkaCredentialPath()); err != nil {
				return err
			}
		}
		t := e.cfg.Topics()
		var streams []broker.Stream
		for _, sp := range t.All() {
			if len(sp.Readers) > 0 {
				streams = append(streams, broker.Stream{Topic: sp.Name, Readers: sp.Readers})
			}
		}
		b, err := broker.Start(broker.Options{
			DataDir:    e.cfg.BrokerDataDir(),
			Port:       e.cfg.EmbeddedBrokerPort,
			Tables:     []string{t.SchedulerTable(), t.BreakerTable(), t.NamespaceTable()},
			Streams:    streams,
			Logf:       func(f string, a ...any) { e.log.Warn(fmt.Sprintf(f, a...), "component", "broker") },
			SASL:       cred,
			Registerer: e.registry,
		})
		if err != nil {
			return fmt.Errorf("embedded broker: %w", err)
		}
		e.embedded = b
		e.brokers = b.Addrs()
		e.logEmbeddedBroker(cred, fromEnv)
	}
	// Before any client is made: every one of them authenticates with it.
	e.sasl = cred
	cl, err := kgo.NewClient(append(e.sasl.Kgo(), kgo.SeedBrokers(e.brokers...), kgo.ClientID(e.cfg.ClientID+"-admin"))...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	meta, err := adm.BrokerMetadata(cctx)
	if err != nil {
		return fmt.Errorf("cannot reach Kafka at %s: %w", strings.Join(e.brokers, ","), err)
	}
	if err := topics.Ensure(cctx, adm, e.cfg.Topics().All(), e.cfg.Partitions, min(e.cfg.Replication, int16(len(meta.Brokers))),
		topics.WithWarnf(func(f string, a ...any) { e.log.Warn(fmt.Sprintf(f, a...)) })); err != nil {
		return err
	}
	// goka insists that a table's replication equals its own setting, so
	// each component uses what its table topic really has, not what the
	// brokers up right now would allow.
	t := e.cfg.Topics()
	td, err := adm.ListTopics(cctx, t.SchedulerTable(), t.BreakerTable(), t.NamespaceTable())
	if err != nil {
		return fmt.Errorf("describing the table topics: %w", err)
	}
	e.replicas = map[string]int{}
	for name, d := range td {
		for _, p := range d.Partitions {
			e.replicas[name] = max(1, len(p.Replicas))
			break
		}
	}
	e.replication = int16(e.replicationOf(t.SchedulerTable()))
	return nil
}

// logEmbeddedBroker says where the embedded broker listens and how to
// authenticate to it, for whoever connects next: a chime process sharing
// it, or a service with the Go SDK (producer.Brokers, producer.SASLPlain).
// docs/operations.md shows the line; TestEmbeddedBrokerKeepsItsPort holds
// it to this.
func (e *env) logEmbeddedBroker(cred kafkaauth.Credential, fromEnv bool) {
	addr := strings.Join(e.brokers, ",")
	if was := e.embedded.Moved(); was != 0 {
		e.log.Warn("embedded broker moved to another port: the one it had is taken by another process",
			"was", fmt.Sprintf("127.0.0.1:%d", was), "addr", addr,
			"hint", "give its clients the new address; --embedded-broker-port pins one")
	}
	// The file's path, or the variables it came from: never the password.
	credential, password := e.cfg.KafkaCredentialPath(), "$(cut -d: -f2 "+e.cfg.KafkaCredentialPath()+")"
	if fromEnv {
		credential, password = "CHIME_KAFKA_SASL_USER, CHIME_KAFKA_SASL_PASSWORD", "<this process's>"
	}
	e.log.Info("embedded broker started", "addr", addr, "data_dir", e.embedded.DataDir(),
		"sasl_user", cred.User, "credential", credential,
		"hint", "other chime processes share it with CHIME_BROKERS="+addr+" CHIME_KAFKA_SASL_USER="+cred.User+
			" CHIME_KAFKA_SASL_PASSWORD="+password+"; Go services with producer.SASLPlain (SASL/PLAIN)")
}

// replicationOf is the replication factor of a table topic, as goka must
// be told it.
func (e *env) replicationOf(topic string) int {
	if r, ok := e.replicas[topic]; ok {
		return r
	}
	return max(1, int(e.replication))
}

func (e *env) close() {
	if e.embedded != nil {
		if err := e.embedded.Close(); err != nil {
			e.log.Error("closing embedded broker", "err", err)
		}
	}
}

// kafkaClient is how a goka component of this process connects: its
// client ID is the process's with suffix.
func (e *env) kafkaClient(suffix string, replication int, log *slog.Logger) processors.Client {
	return processors.Client{
		Brokers:     e.brokers,
		ClientID:    e.cfg.ClientID + suffix,
		Replication: replication,
		SASL:        e.sasl,
		Logger:      log,
	}
}

// processorConfig is what the goka processor named component shares with
// the others; replication is its table topic's.
func (e *env) processorConfig(component string, replication int) processors.Config {
	return processors.Config{
		Client:     e.kafkaClient("-"+component, replication, e.log.With("component", component)),
		Topics:     e.cfg.Topics(),
		Membership: e.membership,
		Registerer: e.registry,
	}
}

func (e *env) schedulerConfig() scheduler.Config {
	return scheduler.Config{
		Config:            e.processorConfig("scheduler", int(e.replication)),
		KafkaTargetTopics: e.cfg.KafkaTargetTopics,
		TerminalRetention: e.cfg.JobRetention,
	}
}

func roleTopics(_ context.Context, e *env) error {
	for _, t := range e.cfg.Topics().All() {
		fmt.Fprintf(e.out, "%s\t%s\n", t.Name, t.Cleanup)
	}
	return nil
}

// group is the role's lifecycle.Group: the parts it adds, started stage
// by stage and stopped in reverse.
func (e *env) group() *lifecycle.Group { return &lifecycle.Group{Logger: e.log} }

func roleScheduler(ctx context.Context, e *env) error {
	rm, err := newReadModels(e, false)
	if err != nil {
		return err
	}
	sr, err := newScheduler(e, rm)
	if err != nil {
		return err
	}
	defer sr.release() // after the group stopped the scheduler
	g := e.group().Add(rm.parts()...).Add(sr.parts()...)
	sr.logReady(e, g)
	return g.Run(ctx)
}

// schedulerRole is a scheduler with its query server (views/jobquery),
// which serves the rows of the partitions it owns to the API processes.
type schedulerRole struct {
	s *scheduler.Scheduler
	// query serves the query server on its socket, advertised (in the
	// scheduler's group membership) as queryAddr.
	query     lifecycle.Part
	queryAddr string
	// release marks the local state clean; call it after the scheduler
	// stopped.
	release func()
}

// newScheduler builds the scheduler role: its table on disk under the state
// dir (processors/jobstore) unless memory storage is configured, and its
// query server. It reads namespaces from rm, started before it.
func newScheduler(e *env, rm *readModels) (*schedulerRole, error) {
	secret, err := e.querySecret()
	if err != nil {
		return nil, err
	}
	ln, addr, err := listenQuery(e)
	if err != nil {
		return nil, err
	}
	sr := &schedulerRole{queryAddr: addr, release: func() {}}
	cfg := e.schedulerConfig()
	cfg.Membership.Advertise = addr
	cfg.Namespaces = rm.namespaces
	if e.cfg.SchedulerStorage == config.StorageDisk {
		local, err := scheduler.OpenLocalState(filepath.Join(e.cfg.StateDir, "scheduler"), e.log)
		if err != nil {
			ln.Close()
			return nil, err
		}
		sr.release = func() {
			if err := local.Close(); err != nil {
				e.log.Error("closing the scheduler's table store", "err", err)
			}
		}
		cfg.LocalState = local
	}
	var server *jobquery.Server
	if sr.s, err = scheduler.New(cfg); err == nil {
		server, err = jobquery.NewServer(jobquery.ServerConfig{Source: sr.s, Partitions: e.cfg.Partitions, Secret: secret,
			Logger: e.log.With("component", "scheduler-query")})
	}
	if err != nil {
		ln.Close()
		sr.release()
		return nil, err
	}
	sr.query = jobquery.Listen(server, ln)
	return sr, nil
}

// parts are the scheduler and its query server.
func (sr *schedulerRole) parts() []lifecycle.Part { return []lifecycle.Part{sr.s, sr.query} }

// logReady has g log when the scheduler is ready (operators and tests
// wait for the line).
func (sr *schedulerRole) logReady(e *env, g *lifecycle.Group) {
	s := sr.s
	g.OnReady(func() {
		e.log.Info("scheduler ready", "partitions", s.Partitions(), "pending_timers", s.PendingTimers(), "window_timers", s.WindowTimers(), "recovered_records", s.RecoveredRecords(), "query_addr", sr.queryAddr)
	}, s)
}

// roleDev runs every role in this process, in one group: first the read
// models (the namespace and breaker views, shared by every role) and the
// API, which listens at once; once the views have caught up, the
// processors, the dispatcher and the sink. The API reads jobs from the
// scheduler's own table (partitions another scheduler process owns, from
// that one's query server).
func roleDev(ctx context.Context, e *env) error {
	e.log.Info("chime dev: all roles in one process", "brokers", strings.Join(e.brokers, ","), "state_dir", e.cfg.StateDir)
	rm, err := newReadModels(e, true)
	if err != nil {
		return err
	}
	sr, err := newScheduler(e, rm)
	if err != nil {
		return err
	}
	defer sr.release() // after the group stopped the scheduler
	// The API reads analytics from the ClickHouse the sink opens (the
	// local one when no DSN is configured).
	ch := newAnalyticsSource()
	a, err := newAPI(e, true, ch, rm, sr)
	if err != nil {
		return err
	}
	defer a.close()
	brk, err := newBreaker(e, rm)
	if err != nil {
		return err
	}
	d, err := newDispatcher(e, true, rm)
	if err != nil {
		return err
	}
	nsp, err := newNamespaces(e)
	if err != nil {
		return err
	}
	g := e.group().
		Add(append(rm.parts(), a.parts...)...).
		Add(append(sr.parts(), nsp, brk, d, newSinkPart(e, true, ch.set))...)
	sr.logReady(e, g)
	a.logReady(g)
	return g.Run(ctx)
}

// newNamespaces builds the namespace-config processor.
func newNamespaces(e *env) (*namespaces.Processor, error) {
	return namespaces.New(namespaces.Config{
		Config: e.processorConfig("namespaces", e.replicationOf(e.cfg.Topics().NamespaceTable())),
	})
}

// securePrivateDir creates dir readable by its owner only, and takes group
// and other permissions away from one an older chime created 0755.
func securePrivateDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("state dir %s is readable by others (%s) and cannot be made private: %w", dir, fi.Mode().Perm(), err)
		}
		log.Warn("state dir was readable by other users; made it private (0700)", "dir", dir, "was", fi.Mode().Perm().String())
	}
	return nil
}
