// Package config owns the settings every chime role shares (where Kafka is,
// how topics are named and provisioned, where local state lives, logging)
// and how they are read: defaults, then CHIME_* environment variables, then
// command-line flags. It never reads the process environment itself; cmd/
// passes os.Getenv, tests pass a map lookup.
//
// docs/configuration.md lists every setting; keep it in step (a test
// checks it names each one).
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/chime-sched/chime/schema"
)

// Scheduler storage back ends.
const (
	StorageLevelDB = "leveldb"
	StorageMemory  = "memory"
)

// Config is the configuration of every chime role.
type Config struct {
	// Brokers are the Kafka seed brokers; empty runs the embedded broker.
	Brokers []string
	// EmbeddedBrokerPort is the port of the embedded broker on 127.0.0.1
	// when Brokers is empty; 0 picks a free port.
	EmbeddedBrokerPort int
	// TopicPrefix goes in front of every topic and group name.
	TopicPrefix string
	// Partitions of every topic chime creates; the co-partitioned ones
	// (commands, ticks, scheduler table) must keep this count forever.
	Partitions int32
	// Replication of created topics, capped by the number of brokers when
	// topics are provisioned.
	Replication int16
	// StateDir holds local state: goka's LevelDB tables and the embedded
	// broker's data.
	StateDir string
	// ClientID is the Kafka client.id, for broker logs and quotas.
	ClientID string
	// SchedulerStorage is StorageLevelDB or StorageMemory.
	SchedulerStorage string
	// KafkaTargetTopics are the topics, besides chime's own, that jobs with
	// a Kafka target may write to.
	KafkaTargetTopics []string
	// LogLevel is the minimum level logged.
	LogLevel slog.Level
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		TopicPrefix:      schema.DefaultPrefix,
		Partitions:       12,
		Replication:      3,
		StateDir:         "./.chime",
		ClientID:         "chime",
		SchedulerStorage: StorageLevelDB,
		LogLevel:         slog.LevelInfo,
	}
}

// Embedded reports whether chime runs its own broker.
func (c Config) Embedded() bool { return len(c.Brokers) == 0 }

// Topics returns chime's topic and group names under TopicPrefix.
func (c Config) Topics() schema.Topics { return schema.NewTopics(c.TopicPrefix) }

// BrokerDataDir is where the embedded broker keeps its data.
func (c Config) BrokerDataDir() string { return filepath.Join(c.StateDir, "broker") }

// setting is one configuration value with its two sources.
type setting struct {
	env, flag string
	usage     string // flag help; a `quoted` word names the value
	def       func(Config) string
	apply     func(c *Config, v string) error
}

var settings = []setting{
	{
		env: "CHIME_BROKERS", flag: "brokers",
		usage: "Kafka seed brokers as comma-separated `host:port` list; empty runs the embedded broker",
		def:   func(c Config) string { return strings.Join(c.Brokers, ",") },
		apply: func(c *Config, v string) error {
			list := splitList(v)
			for _, b := range list {
				if err := checkHostPort(b); err != nil {
					return err
				}
			}
			c.Brokers = list
			return nil
		},
	},
	{
		env: "CHIME_EMBEDDED_BROKER_PORT", flag: "embedded-broker-port",
		usage: "`port` of the embedded broker on 127.0.0.1 when no brokers are given; 0 picks a free one",
		def:   func(c Config) string { return strconv.Itoa(c.EmbeddedBrokerPort) },
		apply: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return errors.New("must be a port number from 0 to 65535")
			}
			c.EmbeddedBrokerPort = n
			return nil
		},
	},
	{
		env: "CHIME_TOPIC_PREFIX", flag: "topic-prefix",
		usage: "`prefix` of every topic and consumer group name, so several installations can share a cluster",
		def:   func(c Config) string { return c.TopicPrefix },
		apply: func(c *Config, v string) error {
			if v == "" {
				return fmt.Errorf("must not be empty (the default is %q)", schema.DefaultPrefix)
			}
			// The longest name chime derives adds 19 characters; Kafka
			// allows 249.
			if err := checkTopicChars(v, 200); err != nil {
				return err
			}
			c.TopicPrefix = v
			return nil
		},
	},
	{
		env: "CHIME_PARTITIONS", flag: "partitions",
		usage: "`count` of partitions of every topic chime creates; cannot change once the topics exist",
		def:   func(c Config) string { return strconv.Itoa(int(c.Partitions)) },
		apply: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n <= 0 {
				return errors.New("must be a positive integer")
			}
			c.Partitions = int32(n)
			return nil
		},
	},
	{
		env: "CHIME_REPLICATION", flag: "replication",
		usage: "replication `factor` of topics chime creates, capped by the number of brokers",
		def:   func(c Config) string { return strconv.Itoa(int(c.Replication)) },
		apply: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil || n <= 0 {
				return fmt.Errorf("must be a positive integer up to %d", math.MaxInt16)
			}
			c.Replication = int16(n)
			return nil
		},
	},
	{
		env: "CHIME_STATE_DIR", flag: "state-dir",
		usage: "`directory` for local state: scheduler tables and the embedded broker's data",
		def:   func(c Config) string { return c.StateDir },
		apply: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.StateDir = v
			return nil
		},
	},
	{
		env: "CHIME_CLIENT_ID", flag: "client-id",
		usage: "Kafka client.id `name` shown in broker logs and used for quotas",
		def:   func(c Config) string { return c.ClientID },
		apply: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.ClientID = v
			return nil
		},
	},
	{
		env: "CHIME_SCHEDULER_STORAGE", flag: "scheduler-storage",
		usage: "scheduler table `storage`: leveldb (on disk, fast restarts) or memory (rebuilt from Kafka at each start)",
		def:   func(c Config) string { return c.SchedulerStorage },
		apply: func(c *Config, v string) error {
			switch v {
			case StorageLevelDB, StorageMemory:
				c.SchedulerStorage = v
				return nil
			}
			return fmt.Errorf("must be %q or %q", StorageLevelDB, StorageMemory)
		},
	},
	{
		env: "CHIME_KAFKA_TARGET_TOPICS", flag: "kafka-target-topics",
		usage: "comma-separated `topics` that jobs with a Kafka target may write to, besides chime's own",
		def:   func(c Config) string { return strings.Join(c.KafkaTargetTopics, ",") },
		apply: func(c *Config, v string) error {
			var out []string
			for _, t := range splitList(v) {
				if err := checkTopicName(t); err != nil {
					return err
				}
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
			c.KafkaTargetTopics = out
			return nil
		},
	},
	{
		env: "CHIME_LOG_LEVEL", flag: "log-level",
		usage: "minimum log `level`: debug, info, warn or error",
		def:   func(c Config) string { return strings.ToLower(c.LogLevel.String()) },
		apply: func(c *Config, v string) error {
			switch strings.ToLower(v) {
			case "debug":
				c.LogLevel = slog.LevelDebug
			case "info":
				c.LogLevel = slog.LevelInfo
			case "warn", "warning":
				c.LogLevel = slog.LevelWarn
			case "error":
				c.LogLevel = slog.LevelError
			default:
				return errors.New("must be debug, info, warn or error")
			}
			return nil
		},
	},
}

// Load reads the configuration: Default, overridden by the CHIME_*
// variables getenv returns (an empty value counts as unset), overridden by
// the flags in args. It registers its flags on fs (nil means a new
// ContinueOnError set named "chime") and parses args with it, so a role can
// add its own flags to fs first; positional arguments stay in fs.Args().
// A bad value is reported with where it came from:
//
//	CHIME_PARTITIONS="x": must be a positive integer
func Load(getenv func(string) string, args []string, fs *flag.FlagSet) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if fs == nil {
		fs = flag.NewFlagSet("chime", flag.ContinueOnError)
	}
	cfg := Default()
	flagVals := make([]*string, len(settings))
	for i, s := range settings {
		flagVals[i] = fs.String(s.flag, s.def(cfg), s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var errs []error
	for i, s := range settings {
		// A flag replaces the variable entirely, so a bad variable it
		// overrides is not an error.
		if given[s.flag] {
			v := *flagVals[i]
			if err := s.apply(&cfg, strings.TrimSpace(v)); err != nil {
				errs = append(errs, fmt.Errorf("--%s=%q: %w", s.flag, v, err))
			}
			continue
		}
		if v := getenv(s.env); v != "" {
			if err := s.apply(&cfg, strings.TrimSpace(v)); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", s.env, v, err))
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:9092)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 1 to 65535", s)
	}
	return nil
}

// checkTopicName applies Kafka's rules for topic names.
func checkTopicName(t string) error {
	if t == "." || t == ".." {
		return fmt.Errorf("topic %q is not allowed by Kafka", t)
	}
	return checkTopicChars(t, 249)
}

func checkTopicChars(s string, maxLen int) error {
	if len(s) > maxLen {
		return fmt.Errorf("%q is %d characters long, at most %d allowed", s, len(s), maxLen)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q contains %q; Kafka names allow only letters, digits, '.', '_' and '-'", s, r)
		}
	}
	return nil
}
