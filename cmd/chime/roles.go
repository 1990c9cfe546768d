package main

import (
	"context"
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
	// sasl is what every Kafka client of the process authenticates with
	// (none against a cluster without SASL): each component's Config
	// gets it from here.
	sasl kafkaauth.Credential
	// membership is the process's part in chime's consumer groups.
	membership groups.Membership
}

// role adds a role's parts to g, the process's group, in stages after the
// process's own parts; runRole runs the group. A role that adds no part
// (chime topics) did its work while building, and the process ends.
//
// Every process builds its group the same way (runRole): the embedded
// broker when there is one, then the metrics server and the group
// membership, then the role's stages; Run stops them in reverse. The role
// adds to the group runRole made, rather than running one of its own, so
// that one group orders every stop: the role's parts flush to the broker
// and leave their consumer groups before it goes. What a role opens before
// the group runs (a store, Kafka clients) it adds as a lifecycle.Closer at
// once, so the group closes it in order, or on any failure after.
type role func(e *env, g *lifecycle.Group) error

func runRole(ctx context.Context, p proc, name string, r role) (err error) {
	fs := flag.NewFlagSet("chime "+name, flag.ContinueOnError)
	fs.SetOutput(p.stderr)
	cfg, err := config.Load(p.getenv, p.args, fs)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chime %s: unexpected arguments %q", name, fs.Args())
	}
	log := slog.New(slog.NewTextHandler(p.stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("role", name)
	if err := securePrivateDir(cfg.StateDir, log); err != nil {
		return err
	}
	tuneMemory(ctx, p.getenv)
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	e := &env{cfg: cfg, log: log, out: p.stdout, registry: newRegistry()}
	releaseIdentity := e.joinIdentity()
	defer releaseIdentity()
	g := &lifecycle.Group{Logger: log}
	defer func() {
		g.Stop() // when Run did not: the role failed, or had no parts
		if err == nil && ctx.Err() != nil {
			// Operators (and scripts) see that a stop on a signal was
			// clean, not a crash.
			log.Info("stopped cleanly")
		}
	}()
	if err := e.connect(ctx, g); err != nil {
		return err
	}
	e.registry.MustRegister(newLagCollector(e.brokers, e.sasl, chimeGroups(cfg)...))
	own, err := e.processParts(ctx)
	if err != nil {
		return err
	}
	// Started before the role builds its parts: /metrics answers from the
	// start, and a signal meanwhile still hands the partitions over.
	if err := g.Add(own...).Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // a signal while starting: a clean stop, as Run's
		}
		return err
	}
	n := len(g.Parts())
	if err := r(e, g); err != nil {
		return err
	}
	if len(g.Parts()) == n {
		return nil
	}
	return g.Run(ctx)
}

// processParts are the parts of the process beside its role's: the
// metrics server (with --metrics-addr) and the group membership.
func (e *env) processParts(ctx context.Context) ([]lifecycle.Part, error) {
	parts := []lifecycle.Part{e.leaveOnSignal(ctx)}
	metrics, err := newMetricsServer(e)
	if err != nil {
		return nil, err
	}
	if metrics != nil {
		parts = append(parts, metrics)
	}
	return parts, nil
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

// connect starts the embedded broker when no brokers are configured, as
// the first part of g, and makes sure every topic exists as chime needs it.
func (e *env) connect(ctx context.Context, g *lifecycle.Group) error {
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
		b, err := broker.New(broker.Options{
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
		// Started at once, before anything else: every other part is
		// built with its address, and the topics are provisioned on it
		// first. Being the group's first part, it stops last, once every
		// part writing to it has flushed.
		if err := g.Add(b).Start(ctx); err != nil {
			return err
		}
		e.brokers = b.Addrs()
		e.logEmbeddedBroker(b, cred, fromEnv)
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
func (e *env) logEmbeddedBroker(b *broker.Broker, cred kafkaauth.Credential, fromEnv bool) {
	addr := strings.Join(e.brokers, ",")
	if was := b.Moved(); was != 0 {
		e.log.Warn("embedded broker moved to another port: the one it had is taken by another process",
			"was", fmt.Sprintf("127.0.0.1:%d", was), "addr", addr,
			"hint", "give its clients the new address; --embedded-broker-port pins one")
	}
	// The file's path, or the variables it came from: never the password.
	credential, password := e.cfg.KafkaCredentialPath(), "$(cut -d: -f2 "+e.cfg.KafkaCredentialPath()+")"
	if fromEnv {
		credential, password = "CHIME_KAFKA_SASL_USER, CHIME_KAFKA_SASL_PASSWORD", "<this process's>"
	}
	e.log.Info("embedded broker started", "addr", addr, "data_dir", b.DataDir(),
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

func roleTopics(e *env, _ *lifecycle.Group) error {
	for _, t := range e.cfg.Topics().All() {
		fmt.Fprintf(e.out, "%s\t%s\n", t.Name, t.Cleanup)
	}
	return nil
}

func roleScheduler(e *env, g *lifecycle.Group) error {
	rm, err := newReadModels(e, false)
	if err != nil {
		return err
	}
	sr, err := newScheduler(e, rm)
	if err != nil {
		return err
	}
	g.Add(sr.store).Add(rm.parts()...).Add(sr.parts()...)
	sr.logReady(e, g)
	return nil
}

// schedulerRole is a scheduler with its query server (views/jobquery),
// which serves the rows of the partitions it owns to the API processes.
type schedulerRole struct {
	s *scheduler.Scheduler
	// query serves the query server on its socket, advertised (in the
	// scheduler's group membership) as queryAddr.
	query     lifecycle.Part
	queryAddr string
	// store closes the scheduler's table store on disk, marking it clean
	// (a Closer, which the role adds to its group before the scheduler).
	store lifecycle.Part
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
	sr := &schedulerRole{queryAddr: addr}
	release := func() {}
	cfg := e.schedulerConfig()
	cfg.Membership.Advertise = addr
	cfg.Namespaces = rm.namespaces
	if e.cfg.SchedulerStorage == config.StorageDisk {
		local, err := scheduler.OpenLocalState(filepath.Join(e.cfg.StateDir, "scheduler"), e.log)
		if err != nil {
			ln.Close()
			return nil, err
		}
		release = func() {
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
		release()
		return nil, err
	}
	sr.query = jobquery.Listen(server, ln)
	sr.store = lifecycle.Closer("scheduler table store", release)
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
// processors and the dispatcher (and the local ClickHouse); then the
// sink. The API reads jobs from the scheduler's own table (partitions
// another scheduler process owns, from that one's query server).
func roleDev(e *env, g *lifecycle.Group) error {
	e.log.Info("chime dev: all roles in one process", "brokers", strings.Join(e.brokers, ","), "state_dir", e.cfg.StateDir)
	rm, err := newReadModels(e, true)
	if err != nil {
		return err
	}
	sr, err := newScheduler(e, rm)
	if err != nil {
		return err
	}
	g.Add(sr.store) // closed after the scheduler, or if the rest fails
	// The API reads analytics from the ClickHouse the sink opens (the
	// local one when no DSN is configured).
	ch := newAnalyticsSource()
	a, err := newAPI(e, true, ch, rm, sr)
	if err != nil {
		return err
	}
	g.Add(a.clients) // closed after the API
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
	// The local ClickHouse starts beside the processors, as it did
	// inside the sink: its start (a second or more) does not hold up the
	// scheduler. The sink, which needs it, comes after.
	server, local := analyticsServer(e, true)
	procs := append(sr.parts(), nsp, brk, d)
	if local != nil {
		procs = append(procs, local)
	}
	g.Add(append(rm.parts(), a.parts...)...).
		Add(procs...).
		Add(newSinkPart(e, true, server, ch.set))
	sr.logReady(e, g)
	a.logReady(g)
	return nil
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
