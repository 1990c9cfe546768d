package config_test

import (
	"bytes"
	"flag"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/config"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	return fs
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(nil), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, config.Config{
		TopicPrefix:      "chime.",
		Partitions:       12,
		Replication:      3,
		StateDir:         "./.chime",
		ClientID:         "chime",
		SchedulerStorage: config.StorageDisk,
		JobRetention:     7 * 24 * time.Hour,
		SessionTimeout:   6 * time.Second,
		QuotaRequests:    200,
		QuotaJobs:        2000,
		QuotaPending:     100000,
		MaxNamespaces:    10000,
		LogLevel:         slog.LevelInfo,
		APIAddr:          "127.0.0.1:8080",
		BodyBudget:       64 << 20,
		QueryAddr:        "127.0.0.1:0",
	}, cfg)
	require.Equal(t, config.Default(), cfg)
	require.True(t, cfg.Embedded())
	require.Equal(t, "chime.due", cfg.Topics().Due())
	require.Equal(t, filepath.Join(".chime", "broker"), cfg.BrokerDataDir())
}

func TestLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, cfg config.Config)
	}{
		{
			name: "every variable",
			env: map[string]string{
				"CHIME_BROKERS":               " k1:9092, k2:9093 ,",
				"CHIME_EMBEDDED_BROKER_PORT":  "19092",
				"CHIME_TOPIC_PREFIX":          "prod_",
				"CHIME_PARTITIONS":            "24",
				"CHIME_REPLICATION":           "2",
				"CHIME_STATE_DIR":             "/var/lib/chime",
				"CHIME_CLIENT_ID":             "chime-eu",
				"CHIME_SCHEDULER_STORAGE":     "memory",
				"CHIME_JOB_RETENTION":         "1h",
				"CHIME_INSTANCE_ID":           "chime-eu-1",
				"CHIME_SESSION_TIMEOUT":       "10s",
				"CHIME_QUOTA_REQUESTS":        "50.5",
				"CHIME_QUOTA_JOBS":            "-1",
				"CHIME_QUOTA_PENDING":         "5000",
				"CHIME_MAX_NAMESPACES":        "-1",
				"CHIME_KAFKA_TARGET_TOPICS":   "billing.events,audit,billing.events",
				"CHIME_LOG_LEVEL":             "DEBUG",
				"CHIME_API_ADDR":              "0.0.0.0:8081",
				"CHIME_BODY_BUDGET":           "16777216",
				"CHIME_ADMIN_TOKEN":           "0123456789abcdef0123",
				"CHIME_QUERY_ADDR":            "10.0.0.5:7070",
				"CHIME_QUERY_ADVERTISED_ADDR": "sched-1.internal",
				"CHIME_QUERY_SECRET":          "query-secret-0123456789",
			},
			check: func(t *testing.T, cfg config.Config) {
				require.Equal(t, config.Config{
					Brokers:             []string{"k1:9092", "k2:9093"},
					EmbeddedBrokerPort:  19092,
					TopicPrefix:         "prod_",
					Partitions:          24,
					Replication:         2,
					StateDir:            "/var/lib/chime",
					ClientID:            "chime-eu",
					InstanceID:          "chime-eu-1",
					SessionTimeout:      10 * time.Second,
					QuotaRequests:       50.5,
					QuotaJobs:           -1,
					QuotaPending:        5000,
					MaxNamespaces:       -1,
					SchedulerStorage:    config.StorageMemory,
					JobRetention:        time.Hour,
					KafkaTargetTopics:   []string{"billing.events", "audit"},
					LogLevel:            slog.LevelDebug,
					APIAddr:             "0.0.0.0:8081",
					BodyBudget:          16 << 20,
					AdminToken:          "0123456789abcdef0123",
					QueryAddr:           "10.0.0.5:7070",
					QueryAdvertisedAddr: "sched-1.internal",
					QuerySecret:         "query-secret-0123456789",
				}, cfg)
				require.False(t, cfg.Embedded())
				require.Equal(t, "prod_due", cfg.Topics().Due())
			},
		},
		{
			name: "flags override variables",
			env: map[string]string{
				"CHIME_BROKERS":    "k1:9092",
				"CHIME_PARTITIONS": "24",
				"CHIME_LOG_LEVEL":  "debug",
			},
			args: []string{"--partitions=6", "-log-level", "warn", "--state-dir", "/tmp/x"},
			check: func(t *testing.T, cfg config.Config) {
				require.Equal(t, []string{"k1:9092"}, cfg.Brokers)
				require.EqualValues(t, 6, cfg.Partitions)
				require.Equal(t, slog.LevelWarn, cfg.LogLevel)
				require.Equal(t, "/tmp/x", cfg.StateDir)
			},
		},
		{
			name: "an empty brokers flag selects the embedded broker over the variable",
			env:  map[string]string{"CHIME_BROKERS": "k1:9092"},
			args: []string{"--brokers="},
			check: func(t *testing.T, cfg config.Config) {
				require.True(t, cfg.Embedded())
			},
		},
		{
			name: "a flag hides a bad variable",
			env:  map[string]string{"CHIME_PARTITIONS": "lots"},
			args: []string{"--partitions=3"},
			check: func(t *testing.T, cfg config.Config) {
				require.EqualValues(t, 3, cfg.Partitions)
			},
		},
		{
			name: "an empty variable counts as unset",
			env:  map[string]string{"CHIME_TOPIC_PREFIX": "", "CHIME_PARTITIONS": ""},
			check: func(t *testing.T, cfg config.Config) {
				require.Equal(t, "chime.", cfg.TopicPrefix)
				require.EqualValues(t, 12, cfg.Partitions)
			},
		},
		{
			name: "positional arguments are left to the caller",
			args: []string{"--replication=1", "extra"},
			check: func(t *testing.T, cfg config.Config) {
				require.EqualValues(t, 1, cfg.Replication)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(env(tc.env), tc.args, newFlagSet())
			require.NoError(t, err)
			tc.check(t, cfg)
		})
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want []string // every line expected in the error
	}{
		{"partitions not a number", map[string]string{"CHIME_PARTITIONS": "x"}, nil,
			[]string{`CHIME_PARTITIONS="x": must be a positive integer`}},
		{"partitions zero", nil, []string{"--partitions=0"},
			[]string{`--partitions="0": must be a positive integer`}},
		{"partitions beyond int32", map[string]string{"CHIME_PARTITIONS": "3000000000"}, nil,
			[]string{`CHIME_PARTITIONS="3000000000": must be a positive integer`}},
		{"replication beyond int16", nil, []string{"--replication=40000"},
			[]string{`--replication="40000": must be a positive integer up to 32767`}},
		{"broker without port", map[string]string{"CHIME_BROKERS": "k1:9092,localhost"}, nil,
			[]string{`CHIME_BROKERS="k1:9092,localhost": "localhost" is not host:port (e.g. 127.0.0.1:9092)`}},
		{"broker with bad port", nil, []string{"--brokers=k1:99999"},
			[]string{`--brokers="k1:99999": "k1:99999": port must be a number from 1 to 65535`}},
		{"embedded port", map[string]string{"CHIME_EMBEDDED_BROKER_PORT": "-1"}, nil,
			[]string{`CHIME_EMBEDDED_BROKER_PORT="-1": must be a port number from 0 to 65535`}},
		{"prefix with slash", map[string]string{"CHIME_TOPIC_PREFIX": "a/b"}, nil,
			[]string{`CHIME_TOPIC_PREFIX="a/b": "a/b" contains '/'; Kafka names allow only letters, digits, '.', '_' and '-'`}},
		{"empty prefix flag", nil, []string{"--topic-prefix="},
			[]string{`--topic-prefix="": must not be empty (the default is "chime.")`}},
		{"storage", map[string]string{"CHIME_SCHEDULER_STORAGE": "rocksdb"}, nil,
			[]string{`CHIME_SCHEDULER_STORAGE="rocksdb": must be "disk" or "memory"`}},
		{"short job retention", map[string]string{"CHIME_JOB_RETENTION": "30s"}, nil,
			[]string{`CHIME_JOB_RETENTION="30s": must be a duration of at least 1m0s, such as 1h or 168h`}},
		{"target topic", nil, []string{"--kafka-target-topics=ok,.."},
			[]string{`--kafka-target-topics="ok,..": topic ".." is not allowed by Kafka`}},
		{"target topic too long", map[string]string{"CHIME_KAFKA_TARGET_TOPICS": strings.Repeat("a", 250)}, nil,
			[]string{`is 250 characters long, at most 249 allowed`}},
		{"quota", map[string]string{"CHIME_QUOTA_JOBS": "0"}, nil,
			[]string{`CHIME_QUOTA_JOBS="0": must be a positive number, or -1 for no quota`}},
		{"log level", map[string]string{"CHIME_LOG_LEVEL": "verbose"}, nil,
			[]string{`CHIME_LOG_LEVEL="verbose": must be debug, info, warn or error`}},
		{"empty state dir", nil, []string{"--state-dir="},
			[]string{`--state-dir="": must not be empty`}},
		{"every problem at once", map[string]string{"CHIME_PARTITIONS": "x", "CHIME_LOG_LEVEL": "loud"}, []string{"--replication=-1"},
			[]string{`CHIME_PARTITIONS="x"`, `--replication="-1"`, `CHIME_LOG_LEVEL="loud"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(env(tc.env), tc.args, newFlagSet())
			require.Error(t, err)
			for _, want := range tc.want {
				require.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestLoadFlagErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Load(env(nil), []string{"--no-such-flag"}, newFlagSet())
	require.ErrorContains(t, err, "flag provided but not defined: -no-such-flag")

	_, err = config.Load(env(nil), []string{"-h"}, newFlagSet())
	require.ErrorIs(t, err, flag.ErrHelp)

	// A nil flag set and getenv work too (defaults only).
	cfg, err := config.Load(nil, nil, nil)
	require.NoError(t, err)
	require.Equal(t, config.Default(), cfg)
}

func TestLoadLeavesRoomForRoleFlags(t *testing.T) {
	t.Parallel()
	fs := newFlagSet()
	listen := fs.String("listen", ":8080", "API address")
	cfg, err := config.Load(env(nil), []string{"--listen=:9090", "--partitions=4"}, fs)
	require.NoError(t, err)
	require.Equal(t, ":9090", *listen)
	require.EqualValues(t, 4, cfg.Partitions)
}

func TestHelpNamesVariablesAndDefaults(t *testing.T) {
	t.Parallel()
	fs := newFlagSet()
	var out bytes.Buffer
	fs.SetOutput(&out)
	_, err := config.Load(env(nil), []string{"-h"}, fs)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "-partitions count")
	require.Contains(t, out.String(), "(env CHIME_PARTITIONS)")
	require.Contains(t, out.String(), `(default "12")`)
}

// TestDocsListEverySetting keeps docs/configuration.md in step with Load:
// every flag Load registers must be documented with its variable and
// default.
func TestDocsListEverySetting(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)

	fs := newFlagSet()
	_, err = config.Load(env(nil), nil, fs)
	require.NoError(t, err)
	envName := regexp.MustCompile(`\(env (CHIME_[A-Z_]+)\)`)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		m := envName.FindStringSubmatch(f.Usage)
		require.NotNil(t, m, "flag %s names no variable", f.Name)
		row := docRow(string(doc), "`"+m[1]+"`")
		require.NotEmpty(t, row, "docs/configuration.md has no row for %s", m[1])
		require.Contains(t, row, "`--"+f.Name+"`")
		def := "(none)"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		require.Contains(t, row, def, "default of %s", m[1])
	})
	require.Equal(t, 32, n, "a setting was added or removed: update this test and the docs")
}

func docRow(doc, cell string) string {
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| "+cell+" ") {
			return line
		}
	}
	return ""
}

func TestAPISettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(nil), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.APIAddr)
	require.Empty(t, cfg.AdminToken)

	cfg, err = config.Load(env(map[string]string{"CHIME_API_ADDR": ":9090", "CHIME_ADMIN_TOKEN": "0123456789abcdef"}), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, ":9090", cfg.APIAddr)
	require.Equal(t, "0123456789abcdef", cfg.AdminToken)

	cfg, err = config.Load(env(nil), []string{"--addr", "127.0.0.1:0"}, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", cfg.APIAddr)

	_, err = config.Load(env(map[string]string{"CHIME_API_ADDR": "8080"}), nil, newFlagSet())
	require.ErrorContains(t, err, "CHIME_API_ADDR")
	_, err = config.Load(env(map[string]string{"CHIME_ADMIN_TOKEN": "short-secret"}), nil, newFlagSet())
	require.ErrorContains(t, err, "at least 16")
	require.NotContains(t, err.Error(), "short-secret", "the token is not repeated")
}

// TestQuerySettings: the scheduler's query server listens on loopback by
// default, advertises host or host:port, and its secret is long enough
// and never repeated.
func TestQuerySettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(nil), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:0", cfg.QueryAddr, "loopback, a free port remembered in the state dir")
	require.Empty(t, cfg.QueryAdvertisedAddr)
	require.Empty(t, cfg.QuerySecret, "the state dir's query-credential")
	require.Equal(t, filepath.Join(".chime", "query-credential"), cfg.QueryCredentialPath())

	for _, tc := range []struct {
		env  map[string]string
		want string // error; "" if accepted
	}{
		{map[string]string{"CHIME_QUERY_ADDR": ":7070", "CHIME_QUERY_ADVERTISED_ADDR": "sched-1.internal:7070", "CHIME_QUERY_SECRET": "0123456789abcdef"}, ""},
		{map[string]string{"CHIME_QUERY_ADVERTISED_ADDR": "10.0.0.5"}, ""},
		{map[string]string{"CHIME_QUERY_ADDR": "7070"}, `CHIME_QUERY_ADDR="7070": "7070" is not host:port`},
		{map[string]string{"CHIME_QUERY_ADDR": "h:70000"}, "port must be a number from 0 to 65535"},
		{map[string]string{"CHIME_QUERY_ADVERTISED_ADDR": ":7070"}, "is not host or host:port"},
		{map[string]string{"CHIME_QUERY_SECRET": "short-secret"}, "at least 16"},
	} {
		cfg, err := config.Load(env(tc.env), nil, newFlagSet())
		if tc.want != "" {
			require.ErrorContains(t, err, tc.want, "%v", tc.env)
			require.NotContains(t, err.Error(), "short-secret", "the secret is not repeated")
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		if v := tc.env["CHIME_QUERY_SECRET"]; v != "" {
			require.Equal(t, v, cfg.QuerySecret)
		}
	}
}

func TestDispatcherSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(nil), nil, newFlagSet())
	require.NoError(t, err)
	require.Nil(t, cfg.DispatcherAllowLoopback, "unset: the role decides")
	require.Empty(t, cfg.DispatcherAllowCIDRs)

	cfg, err = config.Load(env(map[string]string{
		"CHIME_DISPATCHER_ALLOW_CIDRS":    " 10.1.2.3/16, 192.168.7.9 ,",
		"CHIME_DISPATCHER_ALLOW_LOOPBACK": "false",
	}), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.168.7.9/32")}, cfg.DispatcherAllowCIDRs)
	require.NotNil(t, cfg.DispatcherAllowLoopback)
	require.False(t, *cfg.DispatcherAllowLoopback)

	cfg, err = config.Load(env(map[string]string{"CHIME_DISPATCHER_ALLOW_LOOPBACK": "false"}), []string{"--dispatcher-allow-loopback=true"}, newFlagSet())
	require.NoError(t, err)
	require.True(t, *cfg.DispatcherAllowLoopback, "the flag wins")

	_, err = config.Load(env(map[string]string{"CHIME_DISPATCHER_ALLOW_CIDRS": "10.1.2.0/24,nope"}), nil, newFlagSet())
	require.ErrorContains(t, err, `CHIME_DISPATCHER_ALLOW_CIDRS="10.1.2.0/24,nope": "nope" is not a CIDR`)
	_, err = config.Load(env(map[string]string{"CHIME_DISPATCHER_ALLOW_LOOPBACK": "maybe"}), nil, newFlagSet())
	require.ErrorContains(t, err, "must be true or false")
}

func TestLoadAnalyticsSettings(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(map[string]string{
		"CHIME_CLICKHOUSE_DSN":           "clickhouse://u:secret@ch1:9000/chime",
		"CHIME_ANALYTICS_RETENTION_DAYS": "30",
	}), nil, newFlagSet())
	require.NoError(t, err)
	require.Equal(t, "clickhouse://u:secret@ch1:9000/chime", cfg.ClickHouseDSN)
	require.Equal(t, 30, cfg.AnalyticsRetentionDays)
	require.Equal(t, filepath.Join(".chime", "clickhouse"), cfg.ClickHouseDataDir())

	_, err = config.Load(env(map[string]string{
		"CHIME_CLICKHOUSE_DSN":           "mysql://u:secret@ch1:9000/chime",
		"CHIME_ANALYTICS_RETENTION_DAYS": "0",
	}), nil, newFlagSet())
	require.ErrorContains(t, err, `scheme "mysql"`)
	require.NotContains(t, err.Error(), "secret", "the DSN may hold a password")
	require.ErrorContains(t, err, "CHIME_ANALYTICS_RETENTION_DAYS")
}

// TestClickHousePassword: a process sharing `chime dev`'s local ClickHouse
// takes the user in the DSN and the password from the credential file, as
// for the embedded broker's SASL credential.
func TestClickHousePassword(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(env(map[string]string{
		"CHIME_CLICKHOUSE_DSN":      "clickhouse://chime@127.0.0.1:9000/chime",
		"CHIME_CLICKHOUSE_PASSWORD": "s3cr/et@:",
	}), nil, newFlagSet())
	require.NoError(t, err)
	u, err := url.Parse(cfg.ClickHouseDSN)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	require.Equal(t, "chime", u.User.Username())
	require.Equal(t, "s3cr/et@:", pw, "the DSN carries the password")
	require.Equal(t, "127.0.0.1:9000", u.Host)
	require.Equal(t, filepath.Join(".chime", "clickhouse-credential"), cfg.ClickHouseCredentialPath())

	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no DSN", map[string]string{"CHIME_CLICKHOUSE_PASSWORD": "s3cret"},
			"CHIME_CLICKHOUSE_PASSWORD (--clickhouse-password) is set without CHIME_CLICKHOUSE_DSN"},
		{"no user", map[string]string{"CHIME_CLICKHOUSE_DSN": "clickhouse://127.0.0.1:9000/chime", "CHIME_CLICKHOUSE_PASSWORD": "s3cret"},
			"CHIME_CLICKHOUSE_DSN names no user"},
		{"two passwords", map[string]string{"CHIME_CLICKHOUSE_DSN": "clickhouse://chime:other@127.0.0.1:9000/chime", "CHIME_CLICKHOUSE_PASSWORD": "s3cret"},
			"both hold a password"},
	} {
		_, err := config.Load(env(tc.env), nil, newFlagSet())
		require.ErrorContains(t, err, tc.want, tc.name)
		require.NotContains(t, err.Error(), "s3cret", "%s: the password is not repeated", tc.name)
		require.NotContains(t, err.Error(), "other", "%s: the password is not repeated", tc.name)
	}
}
