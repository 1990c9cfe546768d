package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chime-sched/chime/schema"
)

// Standard Webhooks (https://www.standardwebhooks.com) headers. The id is
// the fire's idempotency key, so a receiver that deduplicates on
// webhook-id deduplicates retries of one fire.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// signer signs with one namespace's keys: the current one, and during a
// rotation's overlap the one it replaced.
type signer struct {
	keys [][]byte
}

// newSigner decodes Standard Webhooks secrets ("whsec_" + base64 of the
// key) with the same rules the namespace config is validated by; nil when
// there are none.
func newSigner(secrets []string) (*signer, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	s := &signer{}
	for _, secret := range secrets {
		key, err := schema.SigningKey(secret)
		if err != nil {
			return nil, fmt.Errorf("%w; fix the namespace's signing_secret", err)
		}
		s.keys = append(s.keys, key)
	}
	return s, nil
}

// sign returns the webhook-signature value for id, ts and body: per key,
// "v1," + base64(HMAC-SHA256(key, id "." unix-seconds "." body)),
// space-separated, the current key's first (Standard Webhooks: a receiver
// accepts the request if any signature verifies).
func (s *signer) sign(id string, ts time.Time, body []byte) string {
	var out []byte
	for i, key := range s.keys {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, mac(key, id, strconv.FormatInt(ts.Unix(), 10), body))
	}
	return string(out)
}

// mac is one Standard Webhooks signature before encoding:
// HMAC-SHA256(key, id "." unix-seconds "." body).
func mac(key []byte, id, unixSeconds string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(unixSeconds))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// headers are the three Standard Webhooks headers for one request.
func (s *signer) headers(id string, ts time.Time, body []byte) map[string]string {
	return map[string]string{
		headerWebhookID:        id,
		headerWebhookTimestamp: strconv.FormatInt(ts.Unix(), 10),
		headerWebhookSignature: s.sign(id, ts, body),
	}
}

// VerifySignature says whether sigHeader (a webhook-signature value: space-
// separated "v1,<base64>") holds a valid signature by secret of id, ts and
// body, as a Standard Webhooks receiver checks it. It does not check the
// timestamp's age; a receiver should also refuse old timestamps.
func VerifySignature(secret, id, ts, sigHeader string, body []byte) bool {
	key, err := schema.SigningKey(secret)
	if err != nil {
		return false
	}
	want := mac(key, id, ts, body)
	for _, sig := range strings.Fields(sigHeader) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}
