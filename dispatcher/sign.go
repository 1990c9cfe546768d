package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
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

// signer signs with one namespace's key.
type signer struct {
	key []byte
}

// newSigner decodes a Standard Webhooks secret ("whsec_" + base64 of the
// key) with the same rules the namespace config is validated by.
func newSigner(secret string) (*signer, error) {
	key, err := schema.SigningKey(secret)
	if err != nil {
		return nil, fmt.Errorf("%w; fix the namespace's signing_secret", err)
	}
	return &signer{key: key}, nil
}

// sign returns the webhook-signature value for id, ts and body:
// "v1," + base64(HMAC-SHA256(key, id "." unix-seconds "." body)).
func (s *signer) sign(id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// headers are the three Standard Webhooks headers for one request.
func (s *signer) headers(id string, ts time.Time, body []byte) map[string]string {
	return map[string]string{
		headerWebhookID:        id,
		headerWebhookTimestamp: strconv.FormatInt(ts.Unix(), 10),
		headerWebhookSignature: s.sign(id, ts, body),
	}
}
