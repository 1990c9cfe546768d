package dispatcher

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/chime-sched/chime/schema"
)

// The SSRF guard runs in net.Dialer.Control: after DNS resolution, on the
// address the socket is about to connect to, so a hostname that resolves
// (or re-resolves, DNS rebinding) to an internal address is refused before
// a single packet is sent to it. Redirects are not followed and proxies
// from the environment are not used, so the dialled address is always the
// callback's own.

// blockedRanges are refused unless an allowlist entry covers the address.
var blockedRanges = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",          // "this network", includes the unspecified address
		"127.0.0.0/8",        // loopback
		"10.0.0.0/8",         // RFC 1918
		"172.16.0.0/12",      // RFC 1918
		"192.168.0.0/16",     // RFC 1918
		"100.64.0.0/10",      // carrier-grade NAT (RFC 6598)
		"169.254.0.0/16",     // link-local, includes 169.254.169.254 (cloud metadata)
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved, includes broadcast
		"::/128",             // unspecified
		"::1/128",            // loopback
		"fc00::/7",           // unique local, includes fd00:ec2::254 (AWS metadata)
		"fe80::/10",          // link-local
		"ff00::/8",           // multicast
		"64:ff9b::/96",       // NAT64: would reach any IPv4 address, internal ones too
		"64:ff9b:1::/48",     // local-use NAT64 (RFC 8215), the same
		"2002::/16",          // 6to4 (deprecated, RFC 7526): embeds any IPv4 address
		"2001::/32",          // Teredo: embeds an IPv4 address too
		"::/96",              // IPv4-compatible (deprecated): ::10.0.0.1 is 10.0.0.1
		"fec0::/10",          // site-local (deprecated, still routed internally by some)
		"192.0.0.0/24",       // IETF protocol assignments
		"192.0.2.0/24",       // documentation (TEST-NET-1)
		"198.51.100.0/24",    // documentation (TEST-NET-2)
		"203.0.113.0/24",     // documentation (TEST-NET-3)
		"198.18.0.0/15",      // benchmarking (RFC 2544), used inside labs
		"2001:db8::/32",      // documentation
		"fd00:ec2::254/128",  // AWS metadata over IPv6, listed for the record
		"169.254.169.254/32", // cloud metadata, listed for the record
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Guard decides which addresses callbacks may connect to.
type Guard struct {
	// Allow lists ranges that are reachable even though they are blocked
	// (an internal service on 10.1.2.0/24, say).
	Allow []netip.Prefix
	// AllowLoopback allows 127.0.0.0/8 and ::1: for `chime dev` and tests,
	// never in production.
	AllowLoopback bool
}

// RefusedError is the guard's refusal of an address.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("ssrf guard: refusing to connect to %s (%s); add the range to the dispatcher's allowlist if this target is intended", e.Addr, e.Reason)
}

// Check returns a *RefusedError when addr may not be connected to.
func (g *Guard) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return &RefusedError{Addr: addr, Reason: "invalid address"}
	}
	for _, p := range g.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	if g.AllowLoopback && addr.IsLoopback() {
		return nil
	}
	for _, p := range blockedRanges {
		if p.Contains(addr) {
			return &RefusedError{Addr: addr, Reason: "in blocked range " + p.String()}
		}
	}
	return nil
}

// control is the net.Dialer.Control hook.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") && !strings.HasPrefix(network, "udp") {
		return fmt.Errorf("ssrf guard: unexpected network %q", network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("ssrf guard: cannot parse dial address %q: %w", address, err)
	}
	return g.Check(ap.Addr())
}

// dialer returns a dialer that consults the guard at connect time.
func (g *Guard) dialer() *net.Dialer {
	return &net.Dialer{Control: g.control, Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
}

// hostAllowed is the namespace's allowed_hosts rule (schema.HostAllowed).
// The list narrows what a namespace may call; it never lets a namespace
// reach an address the guard blocks: only the operator's allowlist does that.
func hostAllowed(allowed []string, host string) bool { return schema.HostAllowed(allowed, host) }
