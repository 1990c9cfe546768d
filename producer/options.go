package producer

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Option configures a Producer in New.
type Option interface {
	apply(*config)
}

type option func(*config)

func (o option) apply(c *config) { o(c) }

type config struct {
	brokers         []string
	prefix          string
	clientID        string
	now             func() time.Time
	sasl            plain.Auth
	kgoOpts         []kgo.Opt
	checkNamespaces bool
}

// Brokers sets the seed brokers ("host:port"). Required.
func Brokers(addrs []string) Option {
	return option(func(c *config) { c.brokers = append([]string(nil), addrs...) })
}

// TopicPrefix sets the installation's topic prefix, as in [schema.NewTopics];
// "" (the default) means [schema.DefaultPrefix].
func TopicPrefix(prefix string) Option {
	return option(func(c *config) { c.prefix = prefix })
}

// ClientID sets the Kafka client ID the brokers log and quota by.
// Default: "chime-producer".
func ClientID(id string) Option {
	return option(func(c *config) { c.clientID = id })
}

// Clock sets the clock that stamps issued_at, command IDs and validation's
// notion of now. Default: time.Now.
func Clock(now func() time.Time) Option {
	return option(func(c *config) { c.now = now })
}

// SASLPlain authenticates to the brokers with SASL/PLAIN as user. The
// embedded broker of `chime dev` requires it, with the credential that
// chime dev keeps in <state dir>/kafka-credential as "user:password" (the
// broker's address is in <state dir>/kafka-brokers); a cluster that
// authenticates with PLAIN takes its own. PLAIN
// sends the password as it is: beyond the local machine, add TLS with
// KgoOptions(kgo.DialTLSConfig(...)).
//
// User and password both empty (say, from unset environment variables)
// mean no authentication; one without the other makes New fail. This
// mechanism is tried before any other passed with KgoOptions(kgo.SASL(...)).
func SASLPlain(user, password string) Option {
	return option(func(c *config) { c.sasl = plain.Auth{User: user, Pass: password} })
}

// CheckNamespaces makes the producer refuse a job (an Upsert: Schedule,
// ScheduleAsync, ScheduleMany, or one given to Publish) whose namespace
// chime does not know, with an error wrapping [ErrUnknownNamespace],
// before anything is published. Without it the scheduler holds such a job
// for a minute (its view of the namespaces may lag the API's), then
// rejects it on the rejections topic, and the caller never hears of it.
//
// The producer reads chime's namespace table (the topic
// [schema.Topics.NamespaceTable], one partition of it) the first time it
// publishes for a namespace, and remembers those it found: namespaces are
// never deleted. It needs read access to that topic. The namespace must be
// created over the API first (PUT /v1/namespaces/{ns}, which answers once
// the table holds it).
func CheckNamespaces() Option {
	return option(func(c *config) { c.checkNamespaces = true })
}

// KgoOptions passes options to the underlying franz-go client: TLS, SASL,
// logging, hooks, linger and batch tuning. They are applied after the
// producer's defaults and before what chime depends on, so they cannot change
// the partitioner or acks=all; disabling idempotent writes makes New fail.
func KgoOptions(opts ...kgo.Opt) Option {
	return option(func(c *config) { c.kgoOpts = append(c.kgoOpts, opts...) })
}

// At 100k commands/s, 5 ms of linger collects about 60 commands per
// partition of 8 while keeping a lone synchronous Schedule fast; the buffer
// lets ScheduleMany run ahead of the acks. On a 2-core machine against kfake
// (BenchmarkScheduleAsync) linger 1-10 ms, a 50k or 100k buffer and
// compression none, snappy (kept: the default) or lz4 all measured 220k-370k
// commands/s, within noise of one another.
const (
	defaultClientID    = "chime-producer"
	defaultLinger      = 5 * time.Millisecond
	defaultMaxBuffered = 100_000
)

func newConfig(opts []Option) (config, error) {
	c := config{clientID: defaultClientID, now: time.Now}
	for _, o := range opts {
		o.apply(&c)
	}
	if len(c.brokers) == 0 {
		return c, errors.New("producer: no brokers: pass producer.Brokers([]string{\"host:9092\"})")
	}
	for i, b := range c.brokers {
		if b == "" {
			return c, fmt.Errorf("producer: Brokers: address %d is empty", i)
		}
	}
	if c.now == nil {
		return c, errors.New("producer: Clock: nil clock (omit the option to use time.Now)")
	}
	switch {
	case c.sasl.User == "" && c.sasl.Pass != "":
		return c, errors.New("producer: SASLPlain: a password without a user: pass both (for chime dev, user:password from <state dir>/kafka-credential), or neither for no authentication")
	case c.sasl.User != "" && c.sasl.Pass == "":
		return c, fmt.Errorf("producer: SASLPlain: user %q without a password: pass both (for chime dev, user:password from <state dir>/kafka-credential), or neither for no authentication", c.sasl.User)
	}
	return c, nil
}

// kgoOpts lists the client's options in the order that makes chime's
// requirements win over whatever KgoOptions passed.
func (c config) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ClientID(c.clientID),
		kgo.ProducerLinger(defaultLinger),
		kgo.MaxBufferedRecords(defaultMaxBuffered),
	}
	if c.sasl.User != "" {
		opts = append(opts, kgo.SASL(c.sasl.AsMechanism()))
	}
	opts = append(opts, c.kgoOpts...)
	return append(opts,
		// Every replica in sync must have the command before it counts as
		// published; it is also what idempotent writes require.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// goka (through sarama) puts a key on int32(fnv1a(key)) % n, negated
		// if negative. Any other partitioner splits a job across partitions.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))),
	)
}

// fnv32a is the hash goka.DefaultHasher builds (hash/fnv's New32a).
func fnv32a(key []byte) uint32 {
	h := fnv.New32a()
	_, _ = h.Write(key)
	return h.Sum32()
}

// GokaPartitioner is the partitioner every franz-go producer writing into a
// topic goka reads must use: sarama's FNV-1a key hash, as goka computes it.
// Anything else splits a key's state across partitions without an error.
func GokaPartitioner() kgo.Partitioner {
	return kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))
}
