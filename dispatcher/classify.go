package dispatcher

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Error kinds reported in CallbackOutcome.error_kind.
const (
	kindTimeout        = "timeout"
	kindConnection     = "connection"
	kindDNS            = "dns"
	kindTLS            = "tls"
	kindSSRF           = "ssrf"
	kindHostNotAllowed = "host_not_allowed"
	kindBadRequest     = "bad_request"
	kindSigning        = "signing"
	kindRateLimit      = "rate_limit"
	kindConcurrency    = "concurrency"
	kindExpired        = "expired"
)

// classifyStatus maps an HTTP answer to its outcome class, as DESIGN says:
// 2xx success; 408, 425, 429 and 5xx retryable; every other status
// (other 4xx, and 1xx/3xx, which a callback endpoint has no business
// answering since redirects are not followed) permanent.
func classifyStatus(code int) chimev1.OutcomeClass {
	switch {
	case code >= 200 && code < 300:
		return chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE
	default:
		return chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT
	}
}

// classifyError maps a failed call (no HTTP answer) to its class and
// error kind. Only the SSRF guard's refusal is final; timeouts, DNS, TLS
// and connection failures may heal and are retried.
func classifyError(err error) (chimev1.OutcomeClass, string) {
	var refused *RefusedError
	if errors.As(err, &refused) {
		return chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, kindSSRF
	}
	retry := chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE
	if errors.Is(err, context.DeadlineExceeded) {
		return retry, kindTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return retry, kindTimeout
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return retry, kindDNS
	}
	var (
		certErr   *tls.CertificateVerificationError
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
	)
	if errors.As(err, &certErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) {
		return retry, kindTLS
	}
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "tls:") {
		return retry, kindTLS
	}
	return retry, kindConnection
}
