package signature_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/views/jobquery/signature"
)

func TestSignVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef")
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	good := signature.Sign(secret, now, signature.Request{Method: "GET", URI: "/v1/jobs?ns=a"})
	for _, tc := range []struct {
		name, header, method, uri string
		at                        time.Time
		secret                    []byte
		want                      string
	}{
		{"signed", good, "GET", "/v1/jobs?ns=a", now, secret, ""},
		{"within the skew", good, "GET", "/v1/jobs?ns=a", now.Add(signature.MaxSkew), secret, ""},
		{"no header", "", "GET", "/v1/jobs?ns=a", now, secret, "no Chime-Query-Signature header"},
		{"garbage", "t=x,v1=zz", "GET", "/v1/jobs?ns=a", now, secret, "is not t=<unix seconds>"},
		{"another path", good, "GET", "/v1/jobs?ns=b", now, secret, "does not match"},
		{"another method", good, "POST", "/v1/jobs?ns=a", now, secret, "does not match"},
		{"another secret", good, "GET", "/v1/jobs?ns=a", now, []byte("fedcba9876543210"), "does not match"},
		{"too old", good, "GET", "/v1/jobs?ns=a", now.Add(signature.MaxSkew + time.Second), secret, "synchronise the clocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := signature.Verify(tc.secret, tc.at, tc.header, signature.Request{Method: tc.method, URI: tc.uri})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
			require.False(t, strings.Contains(err.Error(), string(tc.secret)), "the error repeats no secret")
			require.NotNil(t, errors.Unwrap(err))
		})
	}
}

// Check verifies all a signature says before the body is read; the body
// is checked after, against the digest the header carries.
func TestCheckBeforeTheBody(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef")
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"keys": ["shop/a"]}`)
	good := signature.Sign(secret, now, signature.Request{Method: "POST", URI: "/query/v1/rows", Body: body})

	d, err := signature.Check(secret, now, good, "POST", "/query/v1/rows")
	require.NoError(t, err)
	require.NoError(t, d.Verify(body))
	require.ErrorContains(t, d.Verify([]byte(`{"keys": ["shop/b"]}`)), "the body is not the one signed")

	_, err = signature.Check([]byte("fedcba9876543210"), now, good, "POST", "/query/v1/rows")
	require.ErrorContains(t, err, "does not match", "a wrong secret is told without the body")

	for _, header := range []string{
		strings.Replace(good, "b=", "b=00", 1),
		strings.Replace(good, "b=", "b="+strings.Repeat("ab", 100), 1), // longer than a digest: refused, no panic
		strings.Replace(good, "b=", "b=zz", 1),
	} {
		_, err = signature.Check(secret, now, header, "POST", "/query/v1/rows")
		require.ErrorContains(t, err, "is not t=<unix seconds>,b=<hex SHA-256 of the body>")
	}

	// A signature without b=, as API processes before it sign: its
	// bodiless reads pass; a body's signature cannot be checked before the
	// body, and is refused, saying why.
	withoutDigest := func(h string) string {
		parts := strings.Split(h, ",")
		return parts[0] + "," + parts[2]
	}
	get := withoutDigest(signature.Sign(secret, now, signature.Request{Method: "GET", URI: "/query/v1/live?ns=shop"}))
	d, err = signature.Check(secret, now, get, "GET", "/query/v1/live?ns=shop")
	require.NoError(t, err)
	require.NoError(t, d.Verify(nil))
	_, err = signature.Check(secret, now, withoutDigest(good), "POST", "/query/v1/rows")
	require.ErrorContains(t, err, "carries no body digest (b=)")
}
