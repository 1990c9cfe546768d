package api

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The store answers on the server's clock: a key is replayed within its
// TTL, taken anew after it, and never while its request is in progress.
func TestIdempotencyStore(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	body, other := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	type step struct {
		after  time.Duration // since t0
		hash   [32]byte
		finish bool // finish the request begun, if new
		want   idemOutcome
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"replay within the TTL", []step{{0, body, true, idemNew}, {time.Hour - time.Second, body, false, idemReplay}}},
		{"another body is refused", []step{{0, body, true, idemNew}, {time.Minute, other, false, idemMismatch}}},
		{"a request in progress is busy", []step{{0, body, false, idemNew}, {time.Second, body, false, idemBusy}}},
		{"an answered key expires", []step{{0, body, true, idemNew}, {time.Hour, other, true, idemNew}, {time.Hour + time.Second, body, false, idemMismatch}}},
		{"a key in progress does not expire", []step{{0, body, false, idemNew}, {2 * time.Hour, body, false, idemBusy}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newIdempotencyStore(time.Hour, 10)
			for i, st := range tt.steps {
				got, _ := s.begin("shop\x00k", st.hash, t0.Add(st.after))
				require.Equal(t, st.want, got, "step %d", i)
				if got == idemNew && st.finish {
					s.finish("shop\x00k", 201, []byte(`{}`))
				}
			}
		})
	}
}

func TestIdempotencyStoreReplaysTheAnswerAndForgetsAborts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	h := sha256.Sum256([]byte("a"))
	s := newIdempotencyStore(time.Hour, 10)

	got, _ := s.begin("k", h, now)
	require.Equal(t, idemNew, got)
	s.finish("k", 201, []byte(`{"id":"x"}`))
	got, e := s.begin("k", h, now)
	require.Equal(t, idemReplay, got)
	require.Equal(t, 201, e.status)
	require.JSONEq(t, `{"id":"x"}`, string(e.response))

	got, _ = s.begin("failed", h, now)
	require.Equal(t, idemNew, got)
	s.abort("failed")
	got, _ = s.begin("failed", h, now)
	require.Equal(t, idemNew, got, "an aborted request can be retried")
	require.Equal(t, 2, s.len())
}

// Beyond its bound the store forgets the oldest key, even one replayed
// since.
func TestIdempotencyStoreForgetsTheOldest(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	h := sha256.Sum256([]byte("a"))
	s := newIdempotencyStore(time.Hour, 2)
	for _, k := range []string{"a", "b"} {
		s.begin(k, h, now)
		s.finish(k, 201, nil)
	}
	got, _ := s.begin("a", h, now)
	require.Equal(t, idemReplay, got)
	s.begin("c", h, now)
	require.Equal(t, 2, s.len())
	got, _ = s.begin("a", h, now)
	require.Equal(t, idemNew, got, "a was the oldest")
}
