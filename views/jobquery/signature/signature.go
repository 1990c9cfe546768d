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
// the SHA-256 of its body. Someone who reads a request off the wire can
// repeat that one read for MaxSkew, not make another (another namespace,
// another job); the answers are plain HTTP, so across hosts keep the query
// servers on a private network (docs/operations.md).
//
// The header also carries the body's SHA-256 itself, so that a server
// checks the signature before it reads a byte of the body (Check) and
// reads only the bodies of signed requests, then checks the body against
// the SHA-256 signed (Digest.Verify).

// Header carries "t=<unix seconds>,b=<hex SHA-256 of the body>,v1=<hex HMAC>".
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

// Digest is the SHA-256 of a request's body.
type Digest [sha256.Size]byte

// mac is the signature of one request whose body has the digest sum.
func mac(secret []byte, unix int64, method, uri string, sum Digest) []byte {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%d\n%s\n%s\n%x", unix, method, uri, sum)
	return m.Sum(nil)
}

// Sign is the Header value of a request made at now.
func Sign(secret []byte, now time.Time, r Request) string {
	t := now.Unix()
	sum := Digest(sha256.Sum256(r.Body))
	return "t=" + strconv.FormatInt(t, 10) + ",b=" + hex.EncodeToString(sum[:]) + ",v1=" + hex.EncodeToString(mac(secret, t, r.Method, r.URI, sum))
}

// errSignature is what every refused signature wraps.
var errSignature = errors.New("query request not signed with this scheduler's query secret")

// emptyBody is the digest of no body.
var emptyBody = Digest(sha256.Sum256(nil))

// Check checks a request's Header value before its body is read: the
// time, and the HMAC of the time, method, URI and the body's digest the
// header claims. It returns that digest, which the body must have. Its
// errors say what is wrong without repeating anything secret.
func Check(secret []byte, now time.Time, header, method, uri string) (Digest, error) {
	if header == "" {
		return Digest{}, fmt.Errorf("%w: no %s header; the API signs each request with CHIME_QUERY_SECRET", errSignature, Header)
	}
	var unix int64
	var sig []byte
	sum, sawDigest, claimed := emptyBody, false, false
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			unix, _ = strconv.ParseInt(v, 10, 64)
		case "b":
			sawDigest = true
			if len(v) == hex.EncodedLen(sha256.Size) {
				_, err := hex.Decode(sum[:], []byte(v))
				claimed = err == nil
			}
		case "v1":
			sig, _ = hex.DecodeString(v)
		}
	}
	if unix == 0 || len(sig) != sha256.Size || (sawDigest && !claimed) {
		return Digest{}, fmt.Errorf("%w: the %s header is not t=<unix seconds>,b=<hex SHA-256 of the body>,v1=<hex HMAC-SHA256>", errSignature, Header)
	}
	if skew := now.Sub(time.Unix(unix, 0)); skew > MaxSkew || skew < -MaxSkew {
		return Digest{}, fmt.Errorf("%w: signed at %s, and this scheduler's clock says %s, more than %s apart; synchronise the clocks of the API and scheduler hosts",
			errSignature, time.Unix(unix, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), MaxSkew)
	}
	if !hmac.Equal(sig, mac(secret, unix, method, uri, sum)) {
		if !claimed {
			// API processes older than the b= field sign a body's
			// digest without sending it: only their bodiless reads check.
			return Digest{}, fmt.Errorf("%w: the signature does not match, and the header carries no body digest (b=), as an API process older than this scheduler signs; upgrade the API processes, and check that every chime api and chime scheduler has the same CHIME_QUERY_SECRET", errSignature)
		}
		return Digest{}, fmt.Errorf("%w: the signature does not match; every chime api and chime scheduler must have the same CHIME_QUERY_SECRET (or share the state dir's query-credential)", errSignature)
	}
	return sum, nil
}

// Verify checks that body is the one signed.
func (d Digest) Verify(body []byte) error {
	if sha256.Sum256(body) != d {
		return fmt.Errorf("%w: the body is not the one signed (its SHA-256 differs from the header's b=)", errSignature)
	}
	return nil
}

// Verify checks a whole request's Header value: Check, then the body.
func Verify(secret []byte, now time.Time, header string, r Request) error {
	d, err := Check(secret, now, header, r.Method, r.URI)
	if err != nil {
		return err
	}
	return d.Verify(r.Body)
}
