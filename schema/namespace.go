package schema

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// NamespaceDefaults is the configuration of a namespace that set nothing:
// every field of NamespaceConfig has its default here and nowhere else.
func NamespaceDefaults() *chimev1.NamespaceConfig {
	return &chimev1.NamespaceConfig{
		Retry: &chimev1.RetryPolicy{
			MaxAttempts:     5,
			InitialInterval: durationpb.New(time.Second),
			MaxInterval:     durationpb.New(5 * time.Minute),
			Multiplier:      2,
			Jitter:          0.5,
			MaxElapsed:      durationpb.New(24 * time.Hour),
		},
		// No rate limit unless set (per_second 0).
		RateLimit:       &chimev1.RateLimit{},
		MaxConcurrency:  32,
		Spread:          1,   // one shard: the namespace's own due partition
		RelevancyWindow: nil, // no window: a late fire still goes out
		Breaker: &chimev1.BreakerConfig{
			Window:                durationpb.New(30 * time.Second),
			MinRequests:           20,
			FailureRateThreshold:  50,
			SlowCallDuration:      durationpb.New(5 * time.Second),
			SlowCallRateThreshold: 80,
			LatencyThreshold:      nil, // off
			CoolOff:               durationpb.New(10 * time.Second),
			MaxCoolOff:            durationpb.New(5 * time.Minute),
			HalfOpenProbes:        3,
			TripsToDisable:        10,
		},
	}
}

// EffectiveNamespace returns cfg with every unset field taken from
// NamespaceDefaults. cfg may be nil (unknown namespace). The result is a
// new message; cfg is not modified.
func EffectiveNamespace(ns string, cfg *chimev1.NamespaceConfig) *chimev1.NamespaceConfig {
	out := NamespaceDefaults()
	if cfg != nil {
		overlay(out.ProtoReflect(), cfg.ProtoReflect())
	}
	out.Namespace = ns
	return out
}

// overlay copies the fields src sets over dst, recursing into messages.
// Unlike proto.Merge it treats Duration and Timestamp as values: merged
// field by field, a 100ms duration over a 5s default would become 5.1s.
func overlay(dst, src protoreflect.Message) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			switch fd.Message().FullName() {
			case "google.protobuf.Duration", "google.protobuf.Timestamp":
				dst.Set(fd, protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect()))
			default:
				overlay(dst.Mutable(fd).Message(), v.Message())
			}
			return true
		}
		if fd.IsList() || fd.IsMap() {
			// Lists and maps replace the default's whole.
			dst.Clear(fd)
			proto.Merge(dst.Interface(), fieldOnly(src, fd))
			return true
		}
		dst.Set(fd, v)
		return true
	})
}

// fieldOnly is a copy of m with only fd set.
func fieldOnly(m protoreflect.Message, fd protoreflect.FieldDescriptor) proto.Message {
	c := m.New()
	c.Set(fd, m.Get(fd))
	return c.Interface()
}

// HostAllowed reports whether a namespace whose config lists allowed_hosts
// may call host. Entries are exact host names or IP addresses,
// "*.example.com" (any subdomain, not the domain itself), or CIDRs, which
// match a URL whose host is an IP address in the range (a host name is
// matched by name only: what it resolves to is the SSRF guard's business);
// an empty list allows every host. The API checks it when a job is
// accepted, the dispatcher again at call time.
func HostAllowed(allowed []string, host string) bool {
	if len(allowed) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
	ip, ipErr := netip.ParseAddr(host)
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a), "."))
		if strings.Contains(a, "/") {
			if p, err := netip.ParsePrefix(a); err == nil && ipErr == nil && p.Contains(ip.Unmap()) {
				return true
			}
			continue
		}
		if ipErr == nil {
			if b, err := netip.ParseAddr(a); err == nil && b.Unmap() == ip.Unmap() {
				return true
			}
		}
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
			continue
		}
		if a == host {
			return true
		}
	}
	return false
}

// MaxSecretOverlap is the longest a replaced signing secret keeps signing
// beside the new one.
const MaxSecretOverlap = 30 * 24 * time.Hour

// KeyID names an API key by its SHA-256 hash, for listing and revoking it
// without showing it: "key_" and the hash's first 8 bytes in hex.
func KeyID(hash []byte) string {
	return "key_" + hex.EncodeToString(hash[:min(len(hash), 8)])
}

// SigningSecretsAt returns the secrets that sign a callback at now: the
// current one, and the one a rotation replaced while its overlap lasts.
func SigningSecretsAt(cfg *chimev1.NamespaceConfig, now time.Time) []string {
	var out []string
	if s := cfg.GetSigningSecret(); s != "" {
		out = append(out, s)
	}
	if p := cfg.GetPreviousSigningSecret(); p != "" && now.Before(cfg.GetPreviousSigningSecretUntil().AsTime()) {
		out = append(out, p)
	}
	return out
}

// SigningSecretPrefix starts a Standard Webhooks signing secret.
const SigningSecretPrefix = "whsec_"

// SigningKey decodes a "whsec_<base64>" secret into the HMAC key.
func SigningKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SigningSecretPrefix)
	if !ok {
		return nil, fmt.Errorf(`signing secret must start with %q followed by the base64 of the key`, SigningSecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("signing secret: the part after %q is not valid base64: %v", SigningSecretPrefix, err)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("signing secret: key must be 24 to 64 bytes, got %d", len(key))
	}
	return key, nil
}

// ValidateNamespaceConfig checks a namespace configuration; the error is a
// *ValidationError naming the field.
func ValidateNamespaceConfig(cfg *chimev1.NamespaceConfig) error {
	if cfg == nil {
		return invalid("", "config is missing")
	}
	if e := checkNamespace("namespace", cfg.GetNamespace()); e != nil {
		return e
	}
	if cfg.Retry != nil {
		if e := validateRetry("retry", cfg.Retry); e != nil {
			return e
		}
	}
	if rl := cfg.GetRateLimit(); rl != nil {
		if rl.GetPerSecond() < 0 || rl.GetPerSecond() > 1e6 {
			return invalid("rate_limit.per_second", "must be between 0 (no limit) and 1000000, got %g", rl.GetPerSecond())
		}
		if rl.GetBurst() > 1e6 {
			return invalid("rate_limit.burst", "must be at most 1000000, got %d", rl.GetBurst())
		}
	}
	if cfg.GetMaxConcurrency() > 10000 {
		return invalid("max_concurrency", "must be at most 10000, got %d", cfg.GetMaxConcurrency())
	}
	if e := validateSpread(cfg); e != nil {
		return e
	}
	if w := cfg.GetRelevancyWindow(); w != nil {
		d, e := checkDuration("relevancy_window", w)
		if e != nil {
			return e
		}
		if d <= 0 || d > 30*24*time.Hour {
			return invalid("relevancy_window", "must be between 1ns and 720h, got %s", d)
		}
	}
	if s := cfg.GetSigningSecret(); s != "" {
		if _, err := SigningKey(s); err != nil {
			return invalid("signing_secret", "%v", err)
		}
	}
	for i, h := range cfg.GetAllowedHosts() {
		if h == "" || len(h) > 253 || strings.ContainsAny(h, " /\\@") && !isCIDR(h) {
			return invalid(fmt.Sprintf("allowed_hosts[%d]", i), "%q is neither a host name, an IP address nor a CIDR", h)
		}
	}
	if b := cfg.GetBreaker(); b != nil {
		if e := validateBreaker(b); e != nil {
			return e
		}
	}
	return nil
}

func isCIDR(s string) bool {
	_, _, err := net.ParseCIDR(s)
	return err == nil
}

func validateBreaker(b *chimev1.BreakerConfig) *ValidationError {
	durs := []struct {
		field    string
		d        *durationpb.Duration
		min, max time.Duration
	}{
		{"breaker.window", b.Window, time.Second, time.Hour},
		{"breaker.slow_call_duration", b.SlowCallDuration, time.Millisecond, 5 * time.Minute},
		{"breaker.latency_threshold", b.LatencyThreshold, time.Millisecond, 5 * time.Minute},
		{"breaker.cool_off", b.CoolOff, 100 * time.Millisecond, 24 * time.Hour},
		{"breaker.max_cool_off", b.MaxCoolOff, 100 * time.Millisecond, 7 * 24 * time.Hour},
	}
	for _, c := range durs {
		if c.d == nil {
			continue
		}
		d, e := checkDuration(c.field, c.d)
		if e != nil {
			return e
		}
		if d < c.min || d > c.max {
			return invalid(c.field, "must be between %s and %s, got %s", c.min, c.max, d)
		}
	}
	if b.CoolOff != nil && b.MaxCoolOff != nil && b.MaxCoolOff.AsDuration() < b.CoolOff.AsDuration() {
		return invalid("breaker.max_cool_off", "must be at least cool_off (%s), got %s", b.CoolOff.AsDuration(), b.MaxCoolOff.AsDuration())
	}
	for _, c := range []struct {
		field string
		v     float64
	}{{"breaker.failure_rate_threshold", b.FailureRateThreshold}, {"breaker.slow_call_rate_threshold", b.SlowCallRateThreshold}} {
		if c.v < 0 || c.v > 100 {
			return invalid(c.field, "is a percentage: must be between 0 and 100, got %g", c.v)
		}
	}
	if b.HalfOpenProbes > 1000 {
		return invalid("breaker.half_open_probes", "must be at most 1000, got %d", b.HalfOpenProbes)
	}
	if b.MinRequests > 1_000_000 {
		return invalid("breaker.min_requests", "must be at most 1000000, got %d", b.MinRequests)
	}
	if b.TripsToDisable > 1000 {
		return invalid("breaker.trips_to_disable", "must be at most 1000, got %d", b.TripsToDisable)
	}
	return nil
}

// ValidateNamespaceCommand checks a namespace command.
func ValidateNamespaceCommand(cmd *chimev1.NamespaceCommand) error {
	if cmd == nil {
		return invalid("", "command is missing")
	}
	if cmd.GetCommandId() == "" {
		return invalid("command_id", "must be set")
	}
	if e := checkNamespace("namespace", cmd.GetNamespace()); e != nil {
		return e
	}
	switch c := cmd.GetCommand().(type) {
	case *chimev1.NamespaceCommand_Put:
		if c.Put.GetNamespace() != "" && c.Put.GetNamespace() != cmd.GetNamespace() {
			return invalid("put.namespace", "%q does not match the command's namespace %q", c.Put.GetNamespace(), cmd.GetNamespace())
		}
		cfg := proto.Clone(c.Put).(*chimev1.NamespaceConfig)
		cfg.Namespace = cmd.GetNamespace()
		if err := ValidateNamespaceConfig(cfg); err != nil {
			ve := err.(*ValidationError)
			ve.Field = "put." + ve.Field
			return ve
		}
	case *chimev1.NamespaceCommand_AddKey:
		if len(c.AddKey.GetKeyHash()) != 32 {
			return invalid("add_key.key_hash", "must be a SHA-256 hash (32 bytes), got %d bytes", len(c.AddKey.GetKeyHash()))
		}
	case *chimev1.NamespaceCommand_RevokeKey:
		if len(c.RevokeKey.GetKeyHash()) != 32 {
			return invalid("revoke_key.key_hash", "must be a SHA-256 hash (32 bytes), got %d bytes", len(c.RevokeKey.GetKeyHash()))
		}
	case *chimev1.NamespaceCommand_RotateSigningSecret:
		if _, err := SigningKey(c.RotateSigningSecret.GetSecret()); err != nil {
			return invalid("rotate_signing_secret.secret", "%v", err)
		}
		if o := c.RotateSigningSecret.GetOverlap(); o != nil && (!o.IsValid() || o.AsDuration() < 0 || o.AsDuration() > MaxSecretOverlap) {
			return invalid("rotate_signing_secret.overlap", "must be from 0 to %s", MaxSecretOverlap)
		}
	default:
		return invalid("command", "exactly one of put, add_key, revoke_key, rotate_signing_secret must be set")
	}
	return nil
}

// validateSpread refuses a spread that would leave a shard no share of the
// namespace's concurrency limit or rate limit burst (spread.go).
func validateSpread(cfg *chimev1.NamespaceConfig) *ValidationError {
	n := cfg.GetSpread()
	if n > MaxSpread {
		return invalid("spread", "must be at most %d, got %d", MaxSpread, n)
	}
	if n <= 1 {
		return nil
	}
	eff := EffectiveNamespace(cfg.GetNamespace(), cfg)
	if c := eff.GetMaxConcurrency(); n > c {
		return invalid("spread", "%d shards cannot share max_concurrency %d: each shard needs at least one concurrent call; raise max_concurrency or lower spread", n, c)
	}
	if rl := eff.GetRateLimit(); rl.GetPerSecond() > 0 && n > Burst(rl) {
		return invalid("spread", "%d shards cannot share a rate limit burst of %d: each shard needs at least one token; raise rate_limit.burst or lower spread", n, Burst(rl))
	}
	return nil
}
