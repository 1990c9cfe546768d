package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/schema"
)

// Namespace keys read "ck_<namespace>.<secret>": the namespace in the key
// lets a request with another namespace's valid key be told apart (403)
// from a key that is not valid at all (401) without a reverse index of
// hashes. The secret is 32 random bytes, base64url without padding.
const keyPrefix = "ck_"

// NewNamespaceKey returns a fresh key for ns and the SHA-256 hash the
// namespace table stores.
func NewNamespaceKey(ns string) (key string, hash []byte) {
	var secret [32]byte
	_, _ = rand.Read(secret[:]) // crypto/rand never returns an error
	key = keyPrefix + ns + "." + base64.RawURLEncoding.EncodeToString(secret[:])
	h := sha256.Sum256([]byte(key))
	return key, h[:]
}

// keyNamespace returns the namespace a key claims to belong to.
func keyNamespace(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", false
	}
	ns, _, ok := strings.Cut(rest, ".")
	return ns, ok && schema.ValidateNamespace(ns) == nil
}

type principal struct {
	admin     bool
	namespace string
}

const principalKey = "chime.principal"

// authenticate checks the bearer token and the path's namespace: the admin
// token passes everywhere, a namespace key only under its namespace.
func (s *server) authenticate(c *fiber.Ctx) error { return s.authenticateFor(c, false) }

// authenticateAnyKey is authenticate for a route across namespaces that
// reads none of them (POST /v1/schedules:preview): any namespace's key may
// use it, as the admin token may.
func (s *server) authenticateAnyKey(c *fiber.Ctx) error { return s.authenticateFor(c, true) }

func (s *server) authenticateFor(c *fiber.Ctx, anyKey bool) error {
	token, challenge, err := bearer(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, challenge)
		return err
	}
	if s.isAdmin(token) {
		c.Locals(principalKey, principal{admin: true})
		if err := checkNamespaceParam(c); err != nil {
			return err
		}
		return c.Next()
	}
	// The key is checked before the path: whoever holds no valid
	// credential learns nothing about the routes, not even what a
	// namespace name may look like.
	owner, ok := keyNamespace(token)
	if ok {
		var err error
		if ok, err = s.validKey(owner, token); err != nil {
			return err
		}
	}
	if !ok {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="chime", error="invalid_token"`)
		return problem(fiber.StatusUnauthorized, "unauthorized", "the bearer token is neither the admin token nor a valid namespace key (revoked, mistyped, or never created)")
	}
	if !slices.Contains(c.Route().Params, "ns") {
		if anyKey {
			c.Locals(principalKey, principal{namespace: owner})
			return c.Next()
		}
		return problem(fiber.StatusForbidden, "forbidden", "%s %s needs the admin token; namespace keys cannot use it", c.Method(), c.Path())
	}
	if err := checkNamespaceParam(c); err != nil {
		return err
	}
	ns := c.Params("ns")
	if owner != ns {
		return problem(fiber.StatusForbidden, "forbidden", "this key belongs to namespace %q and cannot act on namespace %q", owner, ns)
	}
	c.Locals(principalKey, principal{namespace: owner})
	return c.Next()
}

func checkNamespaceParam(c *fiber.Ctx) error {
	if !slices.Contains(c.Route().Params, "ns") {
		return nil // a route across namespaces (GET /v1/namespaces)
	}
	if err := schema.ValidateNamespace(c.Params("ns")); err != nil {
		return invalidFields(FieldError{Field: "namespace", Reason: validationReason(err)})
	}
	return nil
}

func (s *server) isAdmin(token string) bool {
	if s.cfg.AdminToken == "" {
		return false
	}
	// Comparing hashes keeps the comparison constant-time in the length too.
	a, b := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func (s *server) validKey(ns, token string) (bool, error) {
	cfg, err := s.cfg.Namespaces.Get(ns)
	if err != nil || cfg == nil {
		return false, err
	}
	h := sha256.Sum256([]byte(token))
	found := 0
	for _, kh := range cfg.GetKeyHashes() {
		found |= subtle.ConstantTimeCompare(kh, h[:])
	}
	return found == 1, nil
}

// bearer returns the token of an Authorization header, or the 401 that
// says what is wrong with it and the WWW-Authenticate challenge to send. A
// header that is there but not "Bearer <token>" (a bare token, another
// scheme) is told the form to use, not that credentials are missing
// (RFC 6750's invalid_request); the token is never repeated.
func bearer(header string) (token, challenge string, err error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", `Bearer realm="chime"`, problem(fiber.StatusUnauthorized, "unauthorized",
			"missing credentials: send Authorization: Bearer <admin token or namespace key>")
	}
	const want = `Authorization must be "Bearer <token>" with the admin token or a namespace key`
	scheme, token, spaced := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	isBearer := strings.EqualFold(scheme, "Bearer")
	var why string
	switch {
	case isBearer && token == "":
		why = "there is no token after Bearer"
	case !spaced:
		why = `the header has no scheme (write "Bearer " before the token)`
	case !isBearer && isSchemeName(scheme):
		why = fmt.Sprintf("not %q", scheme)
	case !isBearer:
		why = "not another scheme"
	default:
		return token, "", nil
	}
	return "", `Bearer realm="chime", error="invalid_request"`,
		problem(fiber.StatusUnauthorized, "unauthorized", "%s: %s", want, why)
}

// isSchemeName tells a scheme (Basic, Token, Digest) from a token sent
// with something after it: only a scheme is repeated in errors. Admin
// tokens are at least 16 characters (config.MinAdminTokenLen); namespace
// keys hold '_'.
func isSchemeName(s string) bool {
	if len(s) == 0 || len(s) >= 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// adminOnly guards operator routes: namespace configuration, keys and
// breaker control.
func (s *server) adminOnly(c *fiber.Ctx) error {
	if p, _ := c.Locals(principalKey).(principal); !p.admin {
		return problem(fiber.StatusForbidden, "forbidden", "%s %s needs the admin token; namespace keys cannot use it", c.Method(), c.Path())
	}
	return c.Next()
}
