package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// namespaceBody is the JSON form of a namespace's configuration: durations
// as Go duration strings, breaker rates in percent. Every field is
// optional; an absent one takes the default (schema.NamespaceDefaults).
type namespaceBody struct {
	Retry           *retryJSON     `json:"retry,omitempty"`
	RateLimit       *rateLimitJSON `json:"rate_limit,omitempty"`
	MaxConcurrency  *uint32        `json:"max_concurrency,omitempty"`
	Spread          *uint32        `json:"spread,omitempty"`
	RelevancyWindow *string        `json:"relevancy_window,omitempty"`
	SigningSecret   *string        `json:"signing_secret,omitempty"`
	AllowedHosts    []string       `json:"allowed_hosts,omitempty"`
	Breaker         *breakerJSON   `json:"breaker,omitempty"`
}

type retryJSON struct {
	MaxAttempts     *uint32  `json:"max_attempts,omitempty"`
	InitialInterval *string  `json:"initial_interval,omitempty"`
	MaxInterval     *string  `json:"max_interval,omitempty"`
	Multiplier      *float64 `json:"multiplier,omitempty"`
	Jitter          *float64 `json:"jitter,omitempty"`
	MaxElapsed      *string  `json:"max_elapsed,omitempty"`
}

type rateLimitJSON struct {
	PerSecond *float64 `json:"per_second,omitempty"`
	Burst     *uint32  `json:"burst,omitempty"`
}

type breakerJSON struct {
	Window                *string  `json:"window,omitempty"`
	MinRequests           *uint32  `json:"min_requests,omitempty"`
	FailureRateThreshold  *float64 `json:"failure_rate_threshold,omitempty"`
	SlowCallDuration      *string  `json:"slow_call_duration,omitempty"`
	SlowCallRateThreshold *float64 `json:"slow_call_rate_threshold,omitempty"`
	LatencyThreshold      *string  `json:"latency_threshold,omitempty"`
	CoolOff               *string  `json:"cool_off,omitempty"`
	MaxCoolOff            *string  `json:"max_cool_off,omitempty"`
	HalfOpenProbes        *uint32  `json:"half_open_probes,omitempty"`
	TripsToDisable        *uint32  `json:"trips_to_disable,omitempty"`
}

// namespaceResponse is GET /v1/namespaces/{ns}: the effective
// configuration (defaults filled in), the secret redacted.
type namespaceResponse struct {
	Namespace string `json:"namespace"`
	namespaceBody
	// Defaulted lists the fields (JSON paths) that take their default
	// because the namespace does not set them.
	Defaulted []string `json:"defaulted"`
	Keys      int      `json:"keys"`
	Version   uint64   `json:"version"`
	UpdatedAt *string  `json:"updated_at,omitempty"`
}

const redacted = "<redacted>"

func (b *namespaceBody) toProto(ns string) (*chimev1.NamespaceConfig, error) {
	var fe fieldErrs
	cfg := &chimev1.NamespaceConfig{Namespace: ns, AllowedHosts: b.AllowedHosts}
	if r := b.Retry; r != nil {
		cfg.Retry = r.toProto(&fe, "retry")
	}
	if r := b.RateLimit; r != nil {
		cfg.RateLimit = &chimev1.RateLimit{PerSecond: deref(r.PerSecond), Burst: deref(r.Burst)}
	}
	cfg.MaxConcurrency = deref(b.MaxConcurrency)
	cfg.Spread = deref(b.Spread)
	cfg.RelevancyWindow = fe.duration("", "relevancy_window", b.RelevancyWindow)
	if s := deref(b.SigningSecret); s == redacted {
		fe.add("signing_secret", "is the redacted placeholder GET returns; send the real secret (\"whsec_\" + base64 of 24-64 random bytes), or leave the field out to have none")
	} else {
		cfg.SigningSecret = s
	}
	if br := b.Breaker; br != nil {
		cfg.Breaker = &chimev1.BreakerConfig{
			Window:                fe.duration("", "breaker.window", br.Window),
			MinRequests:           deref(br.MinRequests),
			FailureRateThreshold:  deref(br.FailureRateThreshold),
			SlowCallDuration:      fe.duration("", "breaker.slow_call_duration", br.SlowCallDuration),
			SlowCallRateThreshold: deref(br.SlowCallRateThreshold),
			LatencyThreshold:      fe.duration("", "breaker.latency_threshold", br.LatencyThreshold),
			CoolOff:               fe.duration("", "breaker.cool_off", br.CoolOff),
			MaxCoolOff:            fe.duration("", "breaker.max_cool_off", br.MaxCoolOff),
			HalfOpenProbes:        deref(br.HalfOpenProbes),
			TripsToDisable:        deref(br.TripsToDisable),
		}
	}
	if err := fe.problem(); err != nil {
		return nil, err
	}
	if err := schema.ValidateNamespaceConfig(cfg); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return nil, invalidFields(FieldError{Field: ve.Field, Reason: ve.Reason})
		}
		return nil, invalidFields(FieldError{Reason: err.Error()})
	}
	return cfg, nil
}

func (r *retryJSON) toProto(fe *fieldErrs, field string) *chimev1.RetryPolicy {
	return &chimev1.RetryPolicy{
		MaxAttempts:     deref(r.MaxAttempts),
		InitialInterval: fe.duration(field, ".initial_interval", r.InitialInterval),
		MaxInterval:     fe.duration(field, ".max_interval", r.MaxInterval),
		Multiplier:      deref(r.Multiplier),
		Jitter:          deref(r.Jitter),
		MaxElapsed:      fe.duration(field, ".max_elapsed", r.MaxElapsed),
	}
}

func retryFromProto(r *chimev1.RetryPolicy) *retryJSON {
	if r == nil {
		return nil
	}
	return &retryJSON{
		MaxAttempts:     nonZero(r.GetMaxAttempts()),
		InitialInterval: fmtDuration(r.GetInitialInterval()),
		MaxInterval:     fmtDuration(r.GetMaxInterval()),
		Multiplier:      nonZero(r.GetMultiplier()),
		Jitter:          nonZero(r.GetJitter()),
		MaxElapsed:      fmtDuration(r.GetMaxElapsed()),
	}
}

// namespaceFromProto renders cfg; zero fields are left out, as proto3
// treats them as unset.
func namespaceFromProto(cfg *chimev1.NamespaceConfig) namespaceBody {
	b := namespaceBody{
		Retry:           retryFromProto(cfg.GetRetry()),
		MaxConcurrency:  nonZero(cfg.GetMaxConcurrency()),
		Spread:          nonZero(cfg.GetSpread()),
		RelevancyWindow: fmtDuration(cfg.GetRelevancyWindow()),
		AllowedHosts:    cfg.GetAllowedHosts(),
	}
	if rl := cfg.GetRateLimit(); rl != nil {
		b.RateLimit = &rateLimitJSON{PerSecond: nonZero(rl.GetPerSecond()), Burst: nonZero(rl.GetBurst())}
	}
	if cfg.GetSigningSecret() != "" {
		s := redacted
		b.SigningSecret = &s
	}
	if br := cfg.GetBreaker(); br != nil {
		b.Breaker = &breakerJSON{
			Window:                fmtDuration(br.GetWindow()),
			MinRequests:           nonZero(br.GetMinRequests()),
			FailureRateThreshold:  nonZero(br.GetFailureRateThreshold()),
			SlowCallDuration:      fmtDuration(br.GetSlowCallDuration()),
			SlowCallRateThreshold: nonZero(br.GetSlowCallRateThreshold()),
			LatencyThreshold:      fmtDuration(br.GetLatencyThreshold()),
			CoolOff:               fmtDuration(br.GetCoolOff()),
			MaxCoolOff:            fmtDuration(br.GetMaxCoolOff()),
			HalfOpenProbes:        nonZero(br.GetHalfOpenProbes()),
			TripsToDisable:        nonZero(br.GetTripsToDisable()),
		}
	}
	return b
}

func renderNamespace(ns string, stored *chimev1.NamespaceConfig) namespaceResponse {
	effective := namespaceFromProto(schema.EffectiveNamespace(ns, stored))
	own := leafPaths(namespaceFromProto(stored))
	var defaulted []string
	for _, p := range leafPaths(effective) {
		if !slices.Contains(own, p) {
			defaulted = append(defaulted, p)
		}
	}
	sort.Strings(defaulted)
	if defaulted == nil {
		defaulted = []string{}
	}
	return namespaceResponse{
		Namespace:     ns,
		namespaceBody: effective,
		Defaulted:     defaulted,
		Keys:          len(stored.GetKeyHashes()),
		Version:       stored.GetVersion(),
		UpdatedAt:     fmtTime(stored.GetUpdatedAt()),
	}
}

// leafPaths lists the JSON paths of the fields v sets ("retry.jitter").
func leafPaths(v any) []string {
	raw, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			out = append(out, prefix+k)
		}
	}
	walk("", m)
	return out
}

func (s *server) putNamespace(c *fiber.Ctx) error {
	ns := c.Params("ns")
	var body namespaceBody
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	cfg, err := body.toProto(ns)
	if err != nil {
		return err
	}
	prev, err := s.cfg.Namespaces.Get(ns)
	if err != nil {
		return err
	}
	if prev == nil {
		if err := s.limitNamespaces(); err != nil {
			return err
		}
	}
	cmd := command.PutNamespace(ns, cfg)
	command.Stamp(cmd, s.now())
	if err := schema.ValidateNamespaceCommand(cmd); err != nil {
		return invalidFields(FieldError{Field: strings.TrimPrefix(fieldOf(err), "put."), Reason: validationReason(err)})
	}
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if err := s.cfg.Control.PublishNamespace(ctx, cmd); err != nil {
		return unavailable("the namespace configuration", err)
	}
	stored, ok := s.waitNamespace(c.UserContext(), ns, func(cur *chimev1.NamespaceConfig) bool {
		return cur != nil && cur.GetVersion() > prev.GetVersion()
	})
	if !ok {
		// Accepted by Kafka, not yet visible: describe what was sent.
		cfg.KeyHashes, cfg.Version = prev.GetKeyHashes(), prev.GetVersion()
		return c.Status(fiber.StatusAccepted).JSON(renderNamespace(ns, cfg))
	}
	status := fiber.StatusOK
	if prev == nil {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(renderNamespace(ns, stored))
}

func (s *server) getNamespace(c *fiber.Ctx) error {
	ns := c.Params("ns")
	stored, err := s.cfg.Namespaces.Get(ns)
	if err != nil {
		return err
	}
	if stored == nil {
		return namespaceNotFound(ns)
	}
	return c.JSON(renderNamespace(ns, stored))
}

func (s *server) createKey(c *fiber.Ctx) error {
	ns := c.Params("ns")
	stored, err := s.cfg.Namespaces.Get(ns)
	if err != nil {
		return err
	}
	if stored == nil {
		return namespaceNotFound(ns)
	}
	key, hash := NewNamespaceKey(ns)
	cmd := command.AddKey(ns, hash)
	command.Stamp(cmd, s.now())
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if err := s.cfg.Control.PublishNamespace(ctx, cmd); err != nil {
		return unavailable("the new key", err)
	}
	// Wait so the key works on the very next request.
	s.waitNamespace(c.UserContext(), ns, func(cur *chimev1.NamespaceConfig) bool {
		return slices.ContainsFunc(cur.GetKeyHashes(), func(h []byte) bool { return bytes.Equal(h, hash) })
	})
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"id": schema.KeyID(hash), "key": key, "namespace": ns})
}

type keyInfo struct {
	ID        string  `json:"id"`
	CreatedAt *string `json:"created_at"`
}

// listKeys answers GET .../keys: the namespace's keys by id and creation
// time, never the keys themselves (chime keeps only their hashes).
func (s *server) listKeys(c *fiber.Ctx) error {
	ns := c.Params("ns")
	stored, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	keys := make([]keyInfo, 0, len(stored.GetKeyHashes()))
	for _, h := range stored.GetKeyHashes() {
		id := schema.KeyID(h)
		keys = append(keys, keyInfo{ID: id, CreatedAt: fmtTime(stored.GetKeyCreated()[id])})
	}
	return c.JSON(fiber.Map{"namespace": ns, "keys": keys})
}

// revokeKey answers DELETE .../keys/{id}: 204 once this API's view no
// longer knows the key (every API process reads the same table, so the key
// stops working everywhere within their lag).
func (s *server) revokeKey(c *fiber.Ctx) error {
	ns, id := c.Params("ns"), c.Params("id")
	stored, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(stored.GetKeyHashes(), func(h []byte) bool { return schema.KeyID(h) == id })
	if i < 0 {
		return problem(fiber.StatusNotFound, "key-not-found", "namespace %q has no key %q (GET /v1/namespaces/%s/keys lists them)", ns, id, ns)
	}
	hash := stored.GetKeyHashes()[i]
	cmd := command.RevokeKey(ns, hash)
	command.Stamp(cmd, s.now())
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if err := s.cfg.Control.PublishNamespace(ctx, cmd); err != nil {
		return unavailable("the key's revocation", err)
	}
	s.waitNamespace(c.UserContext(), ns, func(cur *chimev1.NamespaceConfig) bool {
		return !slices.ContainsFunc(cur.GetKeyHashes(), func(h []byte) bool { return bytes.Equal(h, hash) })
	})
	return c.SendStatus(fiber.StatusNoContent)
}

// DefaultSecretOverlap is how long a rotated-out signing secret keeps
// signing beside the new one when the request does not say (Svix's
// choice too: a day for receivers to deploy the new secret).
const DefaultSecretOverlap = 24 * time.Hour

type rotateRequest struct {
	Overlap *string `json:"overlap"`
}

// rotateSigningSecret answers POST .../signing-secret:rotate: a new secret,
// shown once; the old one keeps signing beside it for the overlap.
func (s *server) rotateSigningSecret(c *fiber.Ctx) error {
	ns := c.Params("ns")
	var req rotateRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	var fe fieldErrs
	overlap := durationpb.New(DefaultSecretOverlap)
	if req.Overlap != nil {
		overlap = fe.duration("", "overlap", req.Overlap)
	}
	if err := fe.problem(); err != nil {
		return err
	}
	stored, err := s.namespaceFor(ns)
	if err != nil {
		return err
	}
	secret := NewSigningSecret()
	cmd := command.RotateSigningSecret(ns, secret, overlap)
	command.Stamp(cmd, s.now())
	if err := schema.ValidateNamespaceCommand(cmd); err != nil {
		return invalidFields(FieldError{Field: strings.TrimPrefix(fieldOf(err), "rotate_signing_secret."), Reason: validationReason(err)})
	}
	ctx, cancel := s.publishCtx(c)
	defer cancel()
	if err := s.cfg.Control.PublishNamespace(ctx, cmd); err != nil {
		return unavailable("the new signing secret", err)
	}
	now, ok := s.waitNamespace(c.UserContext(), ns, func(cur *chimev1.NamespaceConfig) bool { return cur.GetVersion() > stored.GetVersion() })
	out := fiber.Map{"namespace": ns, "signing_secret": secret, "previous_valid_until": nil}
	if ok {
		out["previous_valid_until"] = fmtTime(now.GetPreviousSigningSecretUntil())
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

// NewSigningSecret returns a Standard Webhooks secret: "whsec_" and the
// base64 of 32 random bytes.
func NewSigningSecret() string {
	var key [32]byte
	_, _ = rand.Read(key[:]) // crypto/rand never returns an error
	return schema.SigningSecretPrefix + base64.StdEncoding.EncodeToString(key[:])
}

// waitNamespace polls the view until done holds or ConsistencyWait passes.
func (s *server) waitNamespace(ctx context.Context, ns string, done func(*chimev1.NamespaceConfig) bool) (*chimev1.NamespaceConfig, bool) {
	return pollView(ctx, s.cfg.ConsistencyWait, func() (*chimev1.NamespaceConfig, bool) {
		cur, err := s.cfg.Namespaces.Get(ns)
		return cur, err == nil && done(cur)
	})
}

// pollView reads a view every 10 ms until read says done, wait passes or
// ctx ends: a command's effect shows in the views within their lag.
func pollView[T any](ctx context.Context, wait time.Duration, read func() (T, bool)) (T, bool) {
	deadline := time.Now().Add(wait)
	for {
		v, ok := read()
		if ok {
			return v, true
		}
		var zero T
		if time.Now().After(deadline) {
			return zero, false
		}
		select {
		case <-ctx.Done():
			return zero, false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func namespaceNotFound(ns string) *Problem {
	return problem(fiber.StatusNotFound, "namespace-not-found", "namespace %q does not exist; create it with PUT /v1/namespaces/%s (admin token)", ns, ns)
}

func fieldOf(err error) string {
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		return ve.Field
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// namespaceFor is namespace ns's configuration, or the 404 that says it
// does not exist.
func (s *server) namespaceFor(ns string) (*chimev1.NamespaceConfig, error) {
	cfg, err := s.cfg.Namespaces.Get(ns)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, namespaceNotFound(ns)
	}
	return cfg, nil
}
