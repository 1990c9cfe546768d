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
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/bodybudget"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

// DefaultStateDir is where chime keeps its state unless told otherwise.
const DefaultStateDir = "./.chime"

// AdminTokenFile is the file in the state dir that holds the admin token
// chime dev generated (and chime client reads).
const AdminTokenFile = "admin-token"

// KafkaCredentialFile is the file in the state dir that holds the SASL/PLAIN
// credential ("user:password", 0600) the embedded broker requires,
// generated at its first start.
const KafkaCredentialFile = "kafka-credential"

// KafkaBrokersFile is the file in the state dir where a process that
// started the embedded broker writes its address ("127.0.0.1:port"), at
// every start: other processes on the machine, and Go services with the
// producer, read it instead of the log line.
const KafkaBrokersFile = "kafka-brokers"

// Scheduler storage back ends.
const (
	StorageDisk = "disk"
	// storageLevelDB is what StorageDisk was called while it was LevelDB;
	// existing configurations keep working.
	storageLevelDB = "leveldb"
	StorageMemory  = "memory"
)

// Config is the configuration of every chime role.
type Config struct {
	// Brokers are the Kafka seed brokers; empty runs the embedded broker.
	Brokers []string
	// EmbeddedBrokerPort is the port of the embedded broker on 127.0.0.1
	// when Brokers is empty; 0 reuses the port of its last start while it
	// is free, else picks a free one.
	EmbeddedBrokerPort int
	// TopicPrefix goes in front of every topic and group name.
	TopicPrefix string
	// Partitions of every topic chime creates; the co-partitioned ones
	// (commands, ticks, scheduler table) must keep this count forever.
	Partitions int32
	// Replication of created topics, capped by the number of brokers when
	// topics are provisioned.
	Replication int16
	// StateDir holds local state: the scheduler's table and the embedded
	// broker's data.
	StateDir string
	// ClientID is the Kafka client.id, for broker logs and quotas.
	ClientID string
	// InstanceID makes the process a static member of chime's consumer
	// groups under this name; empty derives one from the host and the
	// state directory (see infra/groups).
	InstanceID string
	// SessionTimeout is how long a silent process keeps its partitions:
	// the failover time after a kill -9.
	SessionTimeout time.Duration
	// KafkaSASLUser and KafkaSASLPassword authenticate chime's Kafka
	// clients (SASL/PLAIN). With the embedded broker and no user set, a
	// generated credential kept in the state dir is used (kafkaauth).
	KafkaSASLUser, KafkaSASLPassword string
	// QuotaRequests and QuotaJobs are each namespace's request and job
	// creation quotas per second on one API process (quota.Limits;
	// quota.Unlimited: none).
	QuotaRequests, QuotaJobs float64
	// QuotaPending is the jobs a namespace may have that have not ended
	// (quota.Limits.PendingJobs; quota.Unlimited: none).
	QuotaPending float64
	// MaxNamespaces is how many namespaces may exist
	// (quota.Limits.Namespaces; quota.Unlimited: no limit).
	MaxNamespaces float64
	// JobRetention is how long the scheduler keeps a finished job's row
	// (schema.DefaultJobRetention by default).
	JobRetention time.Duration
	// SchedulerStorage is StorageDisk or StorageMemory.
	SchedulerStorage string
	// KafkaTargetTopics are the topics, besides chime's own, that jobs with
	// a Kafka target may write to.
	KafkaTargetTopics []string
	// DispatcherAllowCIDRs are address ranges the dispatcher may call even
	// though its SSRF guard refuses them (an internal service network).
	DispatcherAllowCIDRs []netip.Prefix
	// DispatcherAllowLoopback allows callbacks to 127.0.0.0/8 and ::1;
	// nil leaves it to the role (allowed in `chime dev` only).
	DispatcherAllowLoopback *bool
	// LogLevel is the minimum level logged.
	LogLevel slog.Level
	// APIAddr is where the HTTP API listens (host:port).
	APIAddr string
	// BodyBudget bounds the request body bytes the process's API and
	// query server hold at once (bodybudget.Budget).
	BodyBudget int64
	// MetricsAddr, if set, serves /metrics (Prometheus) for roles without
	// the API; the API serves the same metrics on its own /metrics.
	MetricsAddr string
	// AdminToken is the API's admin bearer token; empty means none (chime
	// dev then generates one and keeps it in the state dir).
	AdminToken string
	// QueryAddr is where a scheduler serves its job reads to the API
	// processes (host:port); port 0 reuses the port of its last start
	// while it is free (QueryPortPath), else picks a free one.
	QueryAddr string
	// QueryAdvertisedAddr is the host[:port] the API processes reach
	// that server at, advertised in the scheduler's group membership;
	// empty: the address it listens on (the host name if it listens on
	// every interface). No port, or 0: the one it listens on.
	QueryAdvertisedAddr string
	// QuerySecret signs the job reads (views/jobquery); empty: the one in
	// QueryCredentialPath, generated at first start.
	QuerySecret string
	// ClickHouseDSN names the analytics ClickHouse server and database
	// (clickhouse://user:password@host:9000/chime); empty runs a local
	// server with its data in ClickHouseDataDir and its credential in
	// ClickHouseCredentialPath. Load puts ClickHousePassword into it.
	ClickHouseDSN string
	// ClickHousePassword is the password of the DSN's user, given apart so
	// the DSN can be shown and shared without it (as the password in
	// ClickHouseCredentialPath of a `chime dev` whose ClickHouse is shared).
	ClickHousePassword string
	// AnalyticsRetentionDays is how long analytics rows are kept; 0 means
	// the default, 90.
	AnalyticsRetentionDays int
	// CPUProfile, if set, is a file the role writes a pprof CPU profile of
	// its whole run to (written when it stops).
	CPUProfile string
}

// MinAdminTokenLen keeps admin tokens out of guessing range.
const MinAdminTokenLen = 16

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		TopicPrefix:      schema.DefaultPrefix,
		Partitions:       12,
		Replication:      3,
		StateDir:         DefaultStateDir,
		ClientID:         "chime",
		SchedulerStorage: StorageDisk,
		JobRetention:     schema.DefaultJobRetention,
		SessionTimeout:   groups.DefaultSessionTimeout,
		QuotaRequests:    quota.DefaultRequestsPerSecond,
		QuotaJobs:        quota.DefaultJobsPerSecond,
		QuotaPending:     quota.DefaultPendingJobs,
		MaxNamespaces:    quota.DefaultMaxNamespaces,
		LogLevel:         slog.LevelInfo,
		APIAddr:          "127.0.0.1:8080",
		BodyBudget:       bodybudget.Default,
		QueryAddr:        "127.0.0.1:0",
	}
}

// Embedded reports whether chime runs its own broker.
func (c Config) Embedded() bool { return len(c.Brokers) == 0 }

// Topics returns chime's topic and group names under TopicPrefix.
func (c Config) Topics() schema.Topics { return schema.NewTopics(c.TopicPrefix) }

// BrokerDataDir is where the embedded broker keeps its data.
func (c Config) BrokerDataDir() string { return filepath.Join(c.StateDir, "broker") }

// KafkaCredentialPath is the embedded broker's credential file.
func (c Config) KafkaCredentialPath() string { return filepath.Join(c.StateDir, KafkaCredentialFile) }

// KafkaBrokersPath is the embedded broker's address file.
func (c Config) KafkaBrokersPath() string { return filepath.Join(c.StateDir, KafkaBrokersFile) }

// QueryCredentialFile is the file in the state dir that holds the query
// secret ("chime:<secret>", 0600) when CHIME_QUERY_SECRET is unset,
// generated by whichever process needs it first.
const QueryCredentialFile = "query-credential"

// QueryCredentialPath is the query secret's file.
func (c Config) QueryCredentialPath() string { return filepath.Join(c.StateDir, QueryCredentialFile) }

// QueryPortPath keeps the port the query server listened on, for the next
// start: a restarted scheduler advertises the same address, and a static
// member whose join metadata is unchanged rejoins without a rebalance.
func (c Config) QueryPortPath() string { return filepath.Join(c.StateDir, "query.port") }

// ClickHouseDataDir is where the local ClickHouse keeps its data.
func (c Config) ClickHouseDataDir() string { return filepath.Join(c.StateDir, "clickhouse") }

// ClickHouseCredentialPath is the file that holds the local ClickHouse's
// generated credential ("user:password", 0600).
func (c Config) ClickHouseCredentialPath() string {
	return filepath.Join(c.StateDir, "clickhouse-credential")
}

// setting is one configuration value with its two sources.
type setting struct {
	env, flag string
	usage     string // flag help; a `quoted` word names the value
	def       func(Config) string
	apply     func(c *Config, v string) error
	// secret values are not repeated in error messages.
	secret bool
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
		usage: "`port` of the embedded broker on 127.0.0.1 when no brokers are given; 0 reuses the port of its last start while it is free, else picks a free one",
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
		env: "CHIME_INSTANCE_ID", flag: "instance-id",
		usage: "static consumer group member `name` of this process (letters, digits, '.', '_', '-'); " +
			"a restart under the same name gets its partitions back at once. Empty derives one from the host name and the state directory",
		def: func(c Config) string { return c.InstanceID },
		apply: func(c *Config, v string) error {
			if err := (groups.Membership{InstanceID: v}).Validate(); err != nil {
				return err
			}
			c.InstanceID = v
			return nil
		},
	},
	{
		env: "CHIME_KAFKA_SASL_USER", flag: "kafka-sasl-user",
		usage: "`user` chime's Kafka clients authenticate as (SASL/PLAIN); empty: no SASL, except on the embedded broker, which always requires it (its generated credential is in <state dir>/kafka-credential)",
		def:   func(c Config) string { return c.KafkaSASLUser },
		apply: func(c *Config, v string) error { c.KafkaSASLUser = v; return nil },
	},
	{
		env: "CHIME_KAFKA_SASL_PASSWORD", flag: "kafka-sasl-password",
		usage: "`password` for CHIME_KAFKA_SASL_USER (prefer the variable to the flag: flags show in ps)",
		def:   func(Config) string { return "" },
		apply: func(c *Config, v string) error { c.KafkaSASLPassword = v; return nil },
	},
	{
		env: "CHIME_QUOTA_REQUESTS", flag: "quota-requests",
		usage: "requests per `second` one namespace's keys may make to one API process (bursts of twice as many; -1: no quota; the admin token has none)",
		def:   func(c Config) string { return strconv.FormatFloat(c.QuotaRequests, 'g', -1, 64) },
		apply: func(c *Config, v string) error { return parseQuota(&c.QuotaRequests, v) },
	},
	{
		env: "CHIME_QUOTA_JOBS", flag: "quota-jobs",
		usage: "jobs per `second` one namespace's keys may create through one API process (bursts of ten seconds' worth, at least one full batch; -1: no quota)",
		def:   func(c Config) string { return strconv.FormatFloat(c.QuotaJobs, 'g', -1, 64) },
		apply: func(c *Config, v string) error { return parseQuota(&c.QuotaJobs, v) },
	},
	{
		env: "CHIME_QUOTA_PENDING", flag: "quota-pending",
		usage: "`jobs` one namespace may have that have not ended (scheduled, paused or firing); creating more answers 429 (-1: no quota; the admin token has none)",
		def:   func(c Config) string { return strconv.FormatFloat(c.QuotaPending, 'f', -1, 64) },
		apply: func(c *Config, v string) error { return parseQuota(&c.QuotaPending, v) },
	},
	{
		env: "CHIME_MAX_NAMESPACES", flag: "max-namespaces",
		usage: "`namespaces` that may exist; creating one more answers 403 (-1: no limit)",
		def:   func(c Config) string { return strconv.FormatFloat(c.MaxNamespaces, 'f', -1, 64) },
		apply: func(c *Config, v string) error { return parseQuota(&c.MaxNamespaces, v) },
	},
	{
		env: "CHIME_SESSION_TIMEOUT", flag: "session-timeout",
		usage: "`duration` a process that stopped answering keeps its partitions before the others take them over (Kafka's allowed range applies, 6s to 30m by default)",
		def:   func(c Config) string { return c.SessionTimeout.String() },
		apply: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return errors.New("must be a duration such as 6s")
			}
			if err := (groups.Membership{SessionTimeout: d}).Validate(); err != nil {
				return err
			}
			c.SessionTimeout = d
			return nil
		},
	},
	{
		env: "CHIME_SCHEDULER_STORAGE", flag: "scheduler-storage",
		usage: "scheduler table `storage`: disk (rows on disk, fast restarts) or memory (rebuilt from Kafka at each start)",
		def:   func(c Config) string { return c.SchedulerStorage },
		apply: func(c *Config, v string) error {
			switch v {
			case StorageDisk, StorageMemory:
				c.SchedulerStorage = v
				return nil
			case storageLevelDB:
				c.SchedulerStorage = StorageDisk
				return nil
			}
			return fmt.Errorf("must be %q or %q", StorageDisk, StorageMemory)
		},
	},
	{
		env: "CHIME_JOB_RETENTION", flag: "job-retention",
		usage: "`duration` a completed, cancelled or dead job stays readable, its id taken, before the scheduler removes its row (at least 1m)",
		def:   func(c Config) string { return c.JobRetention.String() },
		apply: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < schema.MinJobRetention {
				return fmt.Errorf("must be a duration of at least %s, such as 1h or 168h", schema.MinJobRetention)
			}
			c.JobRetention = d
			return nil
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
		env: "CHIME_DISPATCHER_ALLOW_CIDRS", flag: "dispatcher-allow-cidrs",
		usage: "comma-separated `CIDRs` or addresses the dispatcher may call although its SSRF guard refuses them",
		def: func(c Config) string {
			var out []string
			for _, p := range c.DispatcherAllowCIDRs {
				out = append(out, p.String())
			}
			return strings.Join(out, ",")
		},
		apply: func(c *Config, v string) error {
			var out []netip.Prefix
			for _, s := range splitList(v) {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					a, aerr := netip.ParseAddr(s)
					if aerr != nil {
						return fmt.Errorf("%q is not a CIDR (10.1.2.0/24) or an address", s)
					}
					p = netip.PrefixFrom(a, a.BitLen())
				}
				out = append(out, p.Masked())
			}
			c.DispatcherAllowCIDRs = out
			return nil
		},
	},
	{
		env: "CHIME_DISPATCHER_ALLOW_LOOPBACK", flag: "dispatcher-allow-loopback",
		usage: "`true` or false: allow callbacks to loopback addresses; unset allows them in chime dev only",
		def: func(c Config) string {
			if c.DispatcherAllowLoopback == nil {
				return ""
			}
			return strconv.FormatBool(*c.DispatcherAllowLoopback)
		},
		apply: func(c *Config, v string) error {
			if v == "" {
				c.DispatcherAllowLoopback = nil
				return nil
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("must be true or false")
			}
			c.DispatcherAllowLoopback = &b
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
	{
		env: "CHIME_API_ADDR", flag: "addr",
		usage: "`host:port` the HTTP API listens on; an empty host listens on every interface",
		def:   func(c Config) string { return c.APIAddr },
		apply: func(c *Config, v string) error {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8080)", v)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return fmt.Errorf("%q: port must be a number from 0 to 65535", v)
			}
			c.APIAddr = v
			return nil
		},
	},
	{
		env: "CHIME_BODY_BUDGET", flag: "body-budget",
		usage: "`bytes` of request bodies the process holds at once, across its API and query server; beyond it an authenticated request with a body answers 503 (unauthenticated bodies are never read)",
		def:   func(c Config) string { return strconv.FormatInt(c.BodyBudget, 10) },
		apply: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1<<20 {
				return fmt.Errorf("must be a number of bytes, at least %d (one body of the largest the API takes)", 1<<20)
			}
			c.BodyBudget = n
			return nil
		},
	},
	{
		env: "CHIME_METRICS_ADDR", flag: "metrics-addr",
		usage: "`host:port` to serve /metrics on for roles without the API (the API serves /metrics itself); empty: off",
		def:   func(c Config) string { return c.MetricsAddr },
		apply: func(c *Config, v string) error {
			if v == "" {
				c.MetricsAddr = ""
				return nil
			}
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:8080)", v)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return fmt.Errorf("%q: port must be a number from 0 to 65535", v)
			}
			c.MetricsAddr = v
			return nil
		},
	},
	{
		env: "CHIME_ADMIN_TOKEN", flag: "admin-token", secret: true,
		usage: "bearer `token` of the API's administrator; prefer the variable, flags show in process lists",
		def:   func(c Config) string { return c.AdminToken },
		apply: func(c *Config, v string) error {
			if len(v) < MinAdminTokenLen {
				return fmt.Errorf("is %d characters long; use at least %d (e.g. openssl rand -hex 32)", len(v), MinAdminTokenLen)
			}
			c.AdminToken = v
			return nil
		},
	},
	{
		env: "CHIME_QUERY_ADDR", flag: "query-addr",
		usage: "`host:port` a scheduler (chime scheduler, chime dev) serves job reads to the API processes on; port 0 reuses the last start's port while it is free",
		def:   func(c Config) string { return c.QueryAddr },
		apply: func(c *Config, v string) error {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:0, or 10.0.0.5:7070 for API processes on other hosts)", v)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return fmt.Errorf("%q: port must be a number from 0 to 65535", v)
			}
			c.QueryAddr = v
			return nil
		},
	},
	{
		env: "CHIME_QUERY_ADVERTISED_ADDR", flag: "query-advertised-addr",
		usage: "`host[:port]` the API processes reach the scheduler's job reads at (advertised in its group membership); empty: the address it listens on",
		def:   func(c Config) string { return c.QueryAdvertisedAddr },
		apply: func(c *Config, v string) error {
			host, port, err := net.SplitHostPort(v)
			if err != nil {
				host, port = v, "0"
			}
			if n, err := strconv.Atoi(port); host == "" || strings.ContainsAny(host, " /") || err != nil || n < 0 || n > 65535 {
				return fmt.Errorf("%q is not host or host:port (e.g. sched-1.internal or 10.0.0.5:7070)", v)
			}
			c.QueryAdvertisedAddr = v
			return nil
		},
	},
	{
		env: "CHIME_QUERY_SECRET", flag: "query-secret", secret: true,
		usage: "shared `secret` that signs the API processes' job reads to the schedulers (at least 16 characters); empty: the one in <state dir>/query-credential, generated at first start",
		def:   func(c Config) string { return c.QuerySecret },
		apply: func(c *Config, v string) error {
			if len(v) < signature.MinSecretLen {
				return fmt.Errorf("is %d characters long; use at least %d (e.g. openssl rand -hex 32), the same on every chime api and chime scheduler", len(v), signature.MinSecretLen)
			}
			c.QuerySecret = v
			return nil
		},
	},
	{
		env: "CHIME_CLICKHOUSE_DSN", flag: "clickhouse-dsn", secret: true,
		usage: "analytics ClickHouse `dsn` (clickhouse://user:password@host:9000/chime); empty runs a local server under the state dir",
		def:   func(c Config) string { return c.ClickHouseDSN },
		apply: func(c *Config, v string) error {
			u, err := url.Parse(v)
			if err != nil || u.Host == "" {
				return errors.New("is not a URL such as clickhouse://127.0.0.1:9000/chime")
			}
			switch u.Scheme {
			case "clickhouse", "tcp", "http", "https":
			default:
				return fmt.Errorf("scheme %q: use clickhouse:// (native protocol), tcp://, http:// or https://", u.Scheme)
			}
			c.ClickHouseDSN = v
			return nil
		},
	},
	{
		env: "CHIME_CLICKHOUSE_PASSWORD", flag: "clickhouse-password", secret: true,
		usage: "`password` of the user CHIME_CLICKHOUSE_DSN names, if the DSN holds none (prefer the variable: flags show in ps)",
		def:   func(Config) string { return "" },
		apply: func(c *Config, v string) error { c.ClickHousePassword = v; return nil },
	},
	{
		env: "CHIME_ANALYTICS_RETENTION_DAYS", flag: "analytics-retention-days",
		usage: "`days` analytics rows are kept in ClickHouse",
		def: func(c Config) string {
			if c.AnalyticsRetentionDays == 0 {
				return "90"
			}
			return strconv.Itoa(c.AnalyticsRetentionDays)
		},
		apply: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 36500 {
				return errors.New("must be a whole number of days from 1 to 36500")
			}
			c.AnalyticsRetentionDays = n
			return nil
		},
	},
	{
		env: "CHIME_CPU_PROFILE", flag: "cpuprofile",
		usage: "`file` to write a pprof CPU profile of the whole run to, when the role stops",
		def:   func(c Config) string { return c.CPUProfile },
		apply: func(c *Config, v string) error {
			c.CPUProfile = v
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
				errs = append(errs, fmt.Errorf("--%s=%q: %w", s.flag, s.shown(v), err))
			}
			continue
		}
		if v := getenv(s.env); v != "" {
			if err := s.apply(&cfg, strings.TrimSpace(v)); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", s.env, s.shown(v), err))
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := cfg.withClickHousePassword(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// withClickHousePassword puts ClickHousePassword into ClickHouseDSN. The
// errors repeat neither value: both may hold a password.
func (c *Config) withClickHousePassword() error {
	if c.ClickHousePassword == "" {
		return nil
	}
	if c.ClickHouseDSN == "" {
		return fmt.Errorf("CHIME_CLICKHOUSE_PASSWORD (--clickhouse-password) is set without CHIME_CLICKHOUSE_DSN (--clickhouse-dsn): "+
			"it is the password of the DSN's user; a local ClickHouse (no DSN) uses the credential in %s", c.ClickHouseCredentialPath())
	}
	u, err := url.Parse(c.ClickHouseDSN)
	if err != nil {
		return errors.New("CHIME_CLICKHOUSE_DSN does not parse") // refused by its own check first
	}
	if u.User == nil || u.User.Username() == "" {
		return errors.New("CHIME_CLICKHOUSE_DSN names no user for CHIME_CLICKHOUSE_PASSWORD (--clickhouse-password): write clickhouse://USER@host:port/database")
	}
	if _, ok := u.User.Password(); ok {
		return errors.New("CHIME_CLICKHOUSE_DSN and CHIME_CLICKHOUSE_PASSWORD both hold a password: give it in one of them")
	}
	u.User = url.UserPassword(u.User.Username(), c.ClickHousePassword)
	c.ClickHouseDSN = u.String()
	return nil
}

// shown is v as error messages may repeat it.
func (s setting) shown(v string) string {
	if s.secret {
		return "<redacted>"
	}
	return v
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

func parseQuota(dst *float64, v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || (f < 0 && f != quota.Unlimited) || f == 0 {
		return errors.New("must be a positive number, or -1 for no quota")
	}
	*dst = f
	return nil
}
