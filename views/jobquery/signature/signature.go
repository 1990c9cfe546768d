// Package signature owns how a query request between an API process and a
// scheduler instance (package jobquery) is signed and checked. It is apart
// from jobquery so that the settings (infra/config) can check the secret's
// length against MinSecretLen without linking the query client and server.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The query server serves every tenant's jobs, so every request is
// signed with a secret the scheduler instances and the API processes
// share (CHIME_QUERY_SECRET, or <state dir>/query-credential for processes
// sharing a state dir). The secret itself never crosses the network: a
// request carries an HMAC-SHA256 of its time, method, path with query and
// body. Someone who reads a request off the wire can repeat that one read
// for MaxSkew, not make another (another namespace, another job); the
// answers are plain HTTP, so across hosts keep the query servers on a
// private network (docs/operations.md).

// Header carries "t=<unix seconds>,v1=<hex HMAC>".
const Header = "Chime-Query-Signature"

// MaxSkew bounds how far a request's time may be from the server's clock
// (and how long a captured request can be repeated).
const MaxSkew = 5 * time.Minute

// MinSecretLen keeps the shared secret out of guessing range.
const MinSecretLen = 16

// Request is what a signature covers of a request: its method, its path
// with query (the request URI), and its body.
type Request struct {
	Method, URI string
	Body        []byte
}

// mac is the signature of one request.
func mac(secret []byte, unix int64, r Request) []byte {
	sum := sha256.Sum256(r.Body)
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%d\n%s\n%s\n%x", unix, r.Method, r.URI, sum)
	return m.Sum(nil)
}

// Sign is the Header value of a request made at now.
func Sign(secret []byte, now time.Time, r Request) string {
	t := now.Unix()
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(mac(secret, t, r))
}

// errSignature is what every refused signature wraps.
var errSignature = errors.New("query request not signed with this scheduler's query secret")

// Verify checks a request's Header value. Its errors say what is wrong
// without repeating anything secret.
func Verify(secret []byte, now time.Time, header string, r Request) error {
	if header == "" {
		return fmt.Errorf("%w: no %s header; the API signs each request with CHIME_QUERY_SECRET", errSignature, Header)
	}
	var unix int64
	var sig []byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			unix, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			sig, _ = hex.DecodeString(v)
		}
	}
	if unix == 0 || len(sig) != sha256.Size {
		return fmt.Errorf("%w: the %s header is not t=<unix seconds>,v1=<hex HMAC-SHA256>", errSignature, Header)
	}
	if skew := now.Sub(time.Unix(unix, 0)); skew > MaxSkew || skew < -MaxSkew {
		return fmt.Errorf("%w: signed at %s, and this scheduler's clock says %s, more than %s apart; synchronise the clocks of the API and scheduler hosts",
			errSignature, time.Unix(unix, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), MaxSkew)
	}
	if !hmac.Equal(sig, mac(secret, unix, r)) {
		return fmt.Errorf("%w: the signature does not match; every chime api and chime scheduler must have the same CHIME_QUERY_SECRET (or share the state dir's query-credential)", errSignature)
	}
	return nil
}
