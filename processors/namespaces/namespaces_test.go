package namespaces_test

import (
	"context"
	"crypto/sha256"

	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func marshal(t *testing.T, cmd *chimev1.NamespaceCommand) []byte {
	b, err := proto.Marshal(cmd)
	require.NoError(t, err)
	return b
}

func TestApply(t *testing.T) {
	t.Parallel()
	key := sha256.Sum256([]byte("secret-key"))
	put := &chimev1.NamespaceCommand{CommandId: "c1", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{
		MaxConcurrency: 8, SigningSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	}}}
	cfg, rej := namespaces.Apply("acme", nil, marshal(t, put), now)
	require.Nil(t, rej)
	require.EqualValues(t, 8, cfg.MaxConcurrency)
	require.EqualValues(t, 1, cfg.Version)

	add := &chimev1.NamespaceCommand{CommandId: "c2", Namespace: "acme", Command: &chimev1.NamespaceCommand_AddKey{AddKey: &chimev1.AddKey{KeyHash: key[:]}}}
	cfg, rej = namespaces.Apply("acme", cfg, marshal(t, add), now)
	require.Nil(t, rej)
	require.Len(t, cfg.KeyHashes, 1)
	// A put keeps the keys.
	cfg, _ = namespaces.Apply("acme", cfg, marshal(t, put), now)
	require.Len(t, cfg.KeyHashes, 1)
	require.EqualValues(t, 3, cfg.Version)
	require.True(t, cfg.KeyCreated[schema.KeyID(key[:])].AsTime().Equal(now), "the key's time survives a put")

	// A rotation: the old secret signs beside the new one for the
	// overlap, across puts; a rotation without overlap drops it at once.
	const fresh = "whsec_c2Vjb25kLXNlY3JldC1rZXktMjQtYnl0ZXM="
	rotate := func(secret string, overlap time.Duration) []byte {
		return marshal(t, &chimev1.NamespaceCommand{CommandId: "r", Namespace: "acme", Command: &chimev1.NamespaceCommand_RotateSigningSecret{
			RotateSigningSecret: &chimev1.RotateSigningSecret{Secret: secret, Overlap: durationpb.New(overlap)}}})
	}
	cfg, rej = namespaces.Apply("acme", cfg, rotate(fresh, time.Hour), now)
	require.Nil(t, rej)
	require.Equal(t, fresh, cfg.SigningSecret)
	require.Equal(t, []string{fresh, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, schema.SigningSecretsAt(cfg, now.Add(59*time.Minute)))
	require.Equal(t, []string{fresh}, schema.SigningSecretsAt(cfg, now.Add(time.Hour)), "the overlap ended")
	kept, _ := namespaces.Apply("acme", cfg, marshal(t, &chimev1.NamespaceCommand{CommandId: "p", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{SigningSecret: fresh}}}), now)
	require.Len(t, schema.SigningSecretsAt(kept, now), 2, "a put keeps the overlap")
	cfg, _ = namespaces.Apply("acme", cfg, rotate("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0), now)
	require.Len(t, schema.SigningSecretsAt(cfg, now), 1)

	revoke := &chimev1.NamespaceCommand{CommandId: "c3", Namespace: "acme", Command: &chimev1.NamespaceCommand_RevokeKey{RevokeKey: &chimev1.RevokeKey{KeyHash: key[:]}}}
	cfg, _ = namespaces.Apply("acme", cfg, marshal(t, revoke), now)
	require.Empty(t, cfg.KeyHashes)
	require.Empty(t, cfg.KeyCreated)

	tests := []struct {
		name  string
		key   string
		raw   []byte
		field string
	}{
		{"garbage", "acme", []byte{0xff, 0x01}, ""},
		{"key mismatch", "other", marshal(t, put), "namespace"},
		{"bad secret", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{SigningSecret: "nope"}}}), "put.signing_secret"},
		{"bad rate", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{Breaker: &chimev1.BreakerConfig{FailureRateThreshold: 150}}}}), "put.breaker.failure_rate_threshold"},
		{"bad rotated secret", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_RotateSigningSecret{RotateSigningSecret: &chimev1.RotateSigningSecret{Secret: "whsec_x"}}}), "rotate_signing_secret.secret"},
		{"overlap too long", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_RotateSigningSecret{RotateSigningSecret: &chimev1.RotateSigningSecret{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Overlap: durationpb.New(31 * 24 * time.Hour)}}}), "rotate_signing_secret.overlap"},
		{"short key hash", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_AddKey{AddKey: &chimev1.AddKey{KeyHash: []byte("x")}}}), "add_key.key_hash"},
		{"cool-off order", "acme", marshal(t, &chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{Breaker: &chimev1.BreakerConfig{CoolOff: durationpb.New(time.Minute), MaxCoolOff: durationpb.New(time.Second)}}}}), "put.breaker.max_cool_off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, rej := namespaces.Apply(tt.key, nil, tt.raw, now)
			require.Nil(t, cfg)
			require.NotNil(t, rej)
			require.Equal(t, tt.field, rej.Field)
			require.NotEmpty(t, rej.Reason)
		})
	}
}

func TestEffectiveNamespaceFillsDefaults(t *testing.T) {
	t.Parallel()
	d := schema.EffectiveNamespace("x", nil)
	require.EqualValues(t, 5, d.Retry.MaxAttempts)
	require.EqualValues(t, 32, d.MaxConcurrency)
	require.EqualValues(t, 3, d.Breaker.HalfOpenProbes)
	e := schema.EffectiveNamespace("x", &chimev1.NamespaceConfig{Retry: &chimev1.RetryPolicy{MaxAttempts: 2}, Breaker: &chimev1.BreakerConfig{MinRequests: 7}})
	require.EqualValues(t, 2, e.Retry.MaxAttempts)
	require.Equal(t, time.Second, e.Retry.InitialInterval.AsDuration())
	require.EqualValues(t, 7, e.Breaker.MinRequests)
	require.EqualValues(t, 50, e.Breaker.FailureRateThreshold)
}

// TestProcessorAndView: a command on the topic becomes a row the view
// serves, against a real broker.
func TestProcessorAndView(t *testing.T) {
	t.Parallel()
	c := kafkatest.New(t)
	topics := schema.NewTopics(kafkatest.UniquePrefix(t))
	c.Provision(t, topics, 4)
	reg := prometheus.NewRegistry()
	p, err := namespaces.New(namespaces.Config{Config: processors.Config{Client: processors.Client{Brokers: c.Brokers()}, Topics: topics, Registerer: reg}})
	require.NoError(t, err)
	v, err := views.NewNamespaces(processors.Client{Brokers: c.Brokers(), ClientID: "test-view"}, topics)
	require.NoError(t, err)
	lifecycletest.Start(t, p, v)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...),
		kgo.RecordPartitioner(producer.GokaPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	cmd := &chimev1.NamespaceCommand{CommandId: "c1", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{
		RateLimit: &chimev1.RateLimit{PerSecond: 50, Burst: 10},
	}}}
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NamespaceCommands(), Key: []byte("acme"), Value: marshal(t, cmd)}).FirstErr())

	require.Eventually(t, func() bool {
		cfg, _ := v.Get("acme")
		return cfg != nil && cfg.GetRateLimit().GetPerSecond() == 50
	}, 60*time.Second, 20*time.Millisecond)
	eff := v.Effective("acme")
	require.EqualValues(t, 10, eff.RateLimit.Burst)
	require.EqualValues(t, 5, eff.Retry.MaxAttempts, "defaults fill what the namespace did not set")
	require.EqualValues(t, 5, v.Effective("unknown").Retry.MaxAttempts)

	// A command that does not decode is rejected, and counted so.
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NamespaceCommands(), Key: []byte("acme"), Value: []byte{0xff}}).FirstErr())
	commands := func() map[string]float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				out[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
		return out
	}
	kafkatest.WaitFor(t, 30*time.Second, "the rejection counted", func() bool {
		return commands()["chime_namespaces_commands_total/rejected"] == 1
	})
	require.Equal(t, map[string]float64{"chime_namespaces_commands_total/accepted": 1, "chime_namespaces_commands_total/rejected": 1}, commands())

	// A command near the broker's record limit is rejected with a bounded
	// copy: a rejection carrying all of it would not fit in a record, and
	// the processor would fail on it at every restart, with every command
	// behind it waiting.
	huge := make([]byte, 999_880)
	huge[0] = 0xff
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NamespaceCommands(), Key: []byte("acme"), Value: huge}).FirstErr())
	cmd.CommandId, cmd.GetPut().RateLimit.PerSecond = "c2", 60
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NamespaceCommands(), Key: []byte("acme"), Value: marshal(t, cmd)}).FirstErr())
	kafkatest.WaitFor(t, 60*time.Second, "the command after the huge one applied", func() bool {
		cfg, _ := v.Get("acme")
		return cfg.GetRateLimit().GetPerSecond() == 60
	})
	require.Equal(t, map[string]float64{"chime_namespaces_commands_total/accepted": 2, "chime_namespaces_commands_total/rejected": 2}, commands())
	rc, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.ConsumeTopics(topics.Rejections()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer rc.Close()
	var rejections []*chimev1.Rejection
	kafkatest.WaitFor(t, 30*time.Second, "both rejections published", func() bool {
		fctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		rc.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			rej := new(chimev1.Rejection)
			require.NoError(t, proto.Unmarshal(r.Value, rej))
			rejections = append(rejections, rej)
		})
		return len(rejections) >= 2
	})
	require.Equal(t, schema.MaxRejectedCommand, len(rejections[1].GetCommand()), "the copy of the command is bounded")
	require.EqualValues(t, len(huge), rejections[1].GetCommandSize())
}

// TestProcessorAndViewAuthenticate: against a broker that requires
// SASL/PLAIN, as chime dev's does, the processor and the view connect with
// the credential their Client carries (nothing else gives them one).
func TestProcessorAndViewAuthenticate(t *testing.T) {
	t.Parallel()
	cred := kafkaauth.Credential{User: "chime", Password: "test-secret"}
	c := kafkatest.New(t, kafkatest.WithSASL(cred))
	topics := c.Topics()
	c.Provision(t, topics, 2)
	client := processors.Client{Brokers: c.Brokers(), SASL: cred}
	p, err := namespaces.New(namespaces.Config{Config: processors.Config{Client: client, Topics: topics}})
	require.NoError(t, err)
	v, err := views.NewNamespaces(client, topics)
	require.NoError(t, err)
	lifecycletest.Start(t, p, v)

	cmd := &chimev1.NamespaceCommand{CommandId: "c1", Namespace: "acme", Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{MaxConcurrency: 7}}}
	cl := c.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: topics.NamespaceCommands(), Key: []byte("acme"), Value: marshal(t, cmd)}).FirstErr())
	kafkatest.WaitFor(t, 30*time.Second, "the view serves the row the processor wrote", func() bool {
		cfg, _ := v.Get("acme")
		return cfg.GetMaxConcurrency() == 7
	})
}

func TestEffectiveNamespaceReplacesDurationsWhole(t *testing.T) {
	t.Parallel()
	e := schema.EffectiveNamespace("x", &chimev1.NamespaceConfig{
		Breaker:       &chimev1.BreakerConfig{SlowCallDuration: durationpb.New(100 * time.Millisecond)},
		AllowedHosts:  []string{"example.com"},
		SigningSecret: "whsec_x",
	})
	require.Equal(t, 100*time.Millisecond, e.Breaker.SlowCallDuration.AsDuration(), "not 5.1s")
	require.Equal(t, 30*time.Second, e.Breaker.Window.AsDuration())
	require.Equal(t, []string{"example.com"}, e.AllowedHosts)
	require.Equal(t, "whsec_x", e.SigningSecret)
}
