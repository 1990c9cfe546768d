// Package namespaces owns the namespace-config processor: the goka group
// whose table holds each namespace's configuration (retry policy, rate
// limit, concurrency, relevancy window, signing secret, allowed hosts,
// breaker thresholds) and its API key hashes. Dispatchers, the breaker and
// the API read the table through views.Namespaces (a schema.NamespaceSource).
package namespaces

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// Config configures the processor: what every processor shares
// (processors.Config; Client.ClientID defaults to DefaultClientID, and the
// Registerer, if set, gets the commands by result) and its storage. A
// field left at its zero value takes the default named on it; a negative
// one is refused by New.
type Config struct {
	processors.Config
	Storage storage.Builder // nil = in memory

	extraOptions []goka.ProcessorOption
}

// DefaultClientID is Config.ClientID's default.
const DefaultClientID = "chime-namespaces"

// validate applies the defaults to the fields left unset and refuses the
// values the processor cannot work with, naming each.
func (c *Config) validate() error {
	if c.Storage == nil {
		c.Storage = memstore.Builder()
	}
	return c.Config.Validate("namespaces", DefaultClientID)
}

// Processor is the namespace-config processor.
type Processor struct {
	lifecycle.Base
	cfg                Config
	accepted, rejected prometheus.Counter

	runner processors.Runner
}

// New builds the processor. It does not connect until Start.
func New(cfg Config) (*Processor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	commands := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_namespaces_commands_total",
		Help: "Namespace commands processed, by result (accepted, rejected: see the rejections topic).",
	}, []string{"result"})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(commands)
	}
	return &Processor{cfg: cfg, accepted: commands.WithLabelValues("accepted"), rejected: commands.WithLabelValues("rejected")}, nil
}

// Graph declares the processor: commands in, the config table, rejections
// out.
func (p *Processor) Graph() *goka.GroupGraph {
	t := p.cfg.Topics
	return goka.DefineGroup(goka.Group(t.NamespaceGroup()),
		goka.Input(goka.Stream(t.NamespaceCommands()), new(schema.BytesCodec), p.onCommand),
		goka.Persist(new(schema.NamespaceConfigCodec)),
		goka.Output(goka.Stream(t.Rejections()), new(schema.RejectionCodec)),
	)
}

// Name implements lifecycle.Part.
func (p *Processor) Name() string { return "namespace-config processor" }

// Start runs the processor until Stop or ctx ends, restarting it after
// failures. It is ready (Started) once it has recovered its partitions
// the first time.
func (p *Processor) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

func (p *Processor) run(ctx context.Context, ready func()) error {
	return p.runner.Run(ctx, "namespaces", p.cfg.Logger, ready, func() (*goka.Processor, error) {
		opts := append(processors.ProcessorOptions(p.cfg.Config), p.cfg.extraOptions...)
		opts = append(opts, goka.WithStorageBuilder(p.cfg.Storage), goka.WithNilHandling(goka.NilProcess))
		return goka.NewProcessor(p.cfg.Brokers, p.Graph(), opts...)
	})
}

// Ready implements lifecycle.Part: the processor runs with its partitions
// recovered now.
func (p *Processor) Ready() error {
	if err := p.Base.Ready(); err != nil {
		return err
	}
	return p.runner.Recovered()
}

func (p *Processor) onCommand(ctx goka.Context, msg any) {
	raw, _ := msg.([]byte)
	cur, _ := ctx.Value().(*chimev1.NamespaceConfig)
	next, rej := Apply(ctx.Key(), cur, raw, p.cfg.Now())
	if rej != nil {
		rej.EventId = "ns-" + strconv.Itoa(int(ctx.Partition())) + "-" + strconv.FormatInt(ctx.Offset(), 10)
		rej.Topic, rej.Partition, rej.Offset = string(ctx.Topic()), ctx.Partition(), ctx.Offset()
		ctx.Emit(goka.Stream(p.cfg.Topics.Rejections()), ctx.Key(), rej)
		p.cfg.Logger.Info("namespace command rejected", "namespace", ctx.Key(), "reason", rej.GetReason())
		p.rejected.Inc()
		return
	}
	p.accepted.Inc()
	if next != nil {
		ctx.SetValue(next)
	}
}

// Apply is the processor's decision, pure for tests: the new row (nil =
// unchanged) or a rejection.
func Apply(key string, cur *chimev1.NamespaceConfig, raw []byte, now time.Time) (*chimev1.NamespaceConfig, *chimev1.Rejection) {
	cmd := new(chimev1.NamespaceCommand)
	reject := func(field, reason string) (*chimev1.NamespaceConfig, *chimev1.Rejection) {
		return nil, command.Reject(command.Refusal{CommandID: cmd.GetCommandId(), Namespace: cmd.GetNamespace(), Field: field, Reason: reason, At: now, Raw: raw})
	}
	if err := schema.UnmarshalInput(raw, cmd); err != nil {
		return reject("", fmt.Sprintf("command does not decode as chime.v1.NamespaceCommand: %v", err))
	}
	if err := schema.ValidateNamespaceCommand(cmd); err != nil {
		ve := err.(*schema.ValidationError)
		return reject(ve.Field, err.Error())
	}
	if cmd.GetNamespace() != key {
		return reject("namespace", fmt.Sprintf("record key %q does not match the command's namespace %q; publish with the namespace as key", key, cmd.GetNamespace()))
	}
	next := &chimev1.NamespaceConfig{Namespace: key}
	if cur != nil {
		next = proto.Clone(cur).(*chimev1.NamespaceConfig)
	}
	switch c := cmd.GetCommand().(type) {
	case *chimev1.NamespaceCommand_Put:
		// Keys, their times and a rotation's overlap are the
		// processor's, not the put's.
		kept := next
		next = proto.Clone(c.Put).(*chimev1.NamespaceConfig)
		next.Namespace = key
		next.KeyHashes, next.KeyCreated, next.Version = kept.GetKeyHashes(), kept.GetKeyCreated(), kept.GetVersion()
		next.PreviousSigningSecret, next.PreviousSigningSecretUntil = kept.GetPreviousSigningSecret(), kept.GetPreviousSigningSecretUntil()
	case *chimev1.NamespaceCommand_AddKey:
		h := c.AddKey.GetKeyHash()
		if slices.ContainsFunc(next.KeyHashes, func(k []byte) bool { return bytes.Equal(k, h) }) {
			return nil, nil
		}
		next.KeyHashes = append(next.KeyHashes, h)
		if next.KeyCreated == nil {
			next.KeyCreated = map[string]*timestamppb.Timestamp{}
		}
		next.KeyCreated[schema.KeyID(h)] = timestamppb.New(now)
	case *chimev1.NamespaceCommand_RevokeKey:
		h := c.RevokeKey.GetKeyHash()
		next.KeyHashes = slices.DeleteFunc(next.KeyHashes, func(k []byte) bool { return bytes.Equal(k, h) })
		delete(next.KeyCreated, schema.KeyID(h))
	case *chimev1.NamespaceCommand_RotateSigningSecret:
		r := c.RotateSigningSecret
		next.PreviousSigningSecret, next.PreviousSigningSecretUntil = "", nil
		if overlap := r.GetOverlap().AsDuration(); overlap > 0 && next.GetSigningSecret() != "" {
			next.PreviousSigningSecret = next.GetSigningSecret()
			next.PreviousSigningSecretUntil = timestamppb.New(now.Add(overlap))
		}
		next.SigningSecret = r.GetSecret()
	}
	next.Version++
	next.UpdatedAt = timestamppb.New(now)
	return next, nil
}
