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
