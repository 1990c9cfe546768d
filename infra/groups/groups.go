// Package groups owns how chime processes take part in Kafka consumer
// groups: how long a silent member keeps its partitions (the session
// timeout, which is the failover time after a kill -9), how often members
// heartbeat, and static membership, which lets a process restarted under the
// same identity take its partitions back at once instead of waiting for the
// coordinator to expire the dead member. goka (sarama) and franz-go groups
// get the same settings from here; the sarama configuration is made in
// package processors, so that what only needs franz-go (the dispatcher,
// the sink, the settings) does not link sarama.
package groups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Defaults. The session timeout is Kafka's lowest allowed by default
// (group.min.session.timeout.ms = 6 s): a killed process's partitions move
// after at most this long plus one rebalance. Heartbeats go six times per
// timeout (Kafka advises at least three): a survivor learns of the
// rebalance at its next heartbeat, so the interval adds to every takeover. The rebalance timeout bounds how long a
// rebalance waits for members to rejoin; a goka member rejoins once its
// callbacks for revoked partitions returned, which takes well under it.
const (
	DefaultSessionTimeout        = 6 * time.Second
	DefaultRebalanceTimeout      = 30 * time.Second
	MinSessionTimeout            = 2 * time.Second
	heartbeatsPerSession         = 6
	embeddedHeartbeatsPerSession = 3
	maxInstanceIDLen             = 249
	instanceIDHashCharacters     = 10
)

// Membership is one process's part in chime's consumer groups.
type Membership struct {
	// InstanceID, if set, makes the process a static member of every
	// group it joins (KIP-345): a restart under the same ID gets the same
	// partitions back without a rebalance. Two live processes must never
	// share one: the coordinator fences the older.
	InstanceID string
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it gives a member's partitions to the others. 0 takes
	// DefaultSessionTimeout; Validate refuses one below MinSessionTimeout.
	SessionTimeout time.Duration
	// EmbeddedBroker says the groups live on a broker inside this process
	// (chime dev's), which ends with it: when this process dies no member
	// survives to take its partitions over, so heartbeats go at Kafka's own
	// ratio, three per session, not six. That halves an idle chime dev's
	// heartbeats; another process sharing the development broker learns of
	// a rebalance up to a second later.
	EmbeddedBroker bool
	// Advertise, if set, is the host:port this member tells whoever reads
	// the group where to reach it: it travels as the user data of the
	// member's JoinGroup metadata, which a group description shows next
	// to the member's assignment (Advertised reads it back). A scheduler
	// advertises its query server there, so an API process finds the
	// instance that owns a job's partition (views/jobquery), as Kafka
	// Streams' application.server does. Only goka (sarama) members
	// advertise.
	Advertise string
}

// Session is the session timeout in force: how long the coordinator waits
// for a heartbeat before it gives the member's partitions to the others.
// 0 takes DefaultSessionTimeout; a negative one is not replaced but
// refused, by Validate.
func (m Membership) Session() time.Duration {
	if m.SessionTimeout == 0 {
		return DefaultSessionTimeout
	}
	return m.SessionTimeout
}

// Heartbeat is how often the member heartbeats.
func (m Membership) Heartbeat() time.Duration {
	if m.EmbeddedBroker {
		return m.Session() / embeddedHeartbeatsPerSession
	}
	return m.Session() / heartbeatsPerSession
}

// Kgo returns the franz-go options of a group consumer. The goka (sarama)
// side is processors.ProcessorOptions, from the same methods.
func (m Membership) Kgo() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SessionTimeout(m.Session()),
		kgo.HeartbeatInterval(m.Heartbeat()),
		kgo.RebalanceTimeout(DefaultRebalanceTimeout),
	}
	if m.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(m.InstanceID))
	}
	return opts
}

// UserData is what the member sends as the user data of its join
// metadata: its advertised address (Advertised reads it back), nil when it
// advertises none.
func (m Membership) UserData() []byte { return advertisement(m.Advertise) }

// userData is what a member advertises, as JSON: a versioned object, so
// members of another chime version that add fields are still read.
type userData struct {
	Addr string `json:"chime_addr,omitempty"`
}

func advertisement(addr string) []byte {
	if addr == "" {
		return nil
	}
	b, _ := json.Marshal(userData{Addr: addr}) // a struct of one string always encodes
	return b
}

// Advertised is the address a member advertised (Membership.Advertise),
// read from the user data of its join metadata; "" if it advertised none
// (a member of a chime from before advertising, or not a chime member).
func Advertised(raw []byte) string {
	var u userData
	if len(raw) == 0 || json.Unmarshal(raw, &u) != nil {
		return ""
	}
	return u.Addr
}

// Validate checks the settings as Kafka would.
func (m Membership) Validate() error {
	if m.SessionTimeout != 0 && m.SessionTimeout < MinSessionTimeout {
		return fmt.Errorf("session timeout %s is below %s (0 takes the default %s)", m.SessionTimeout, MinSessionTimeout, DefaultSessionTimeout)
	}
	if m.Advertise != "" {
		if _, _, err := net.SplitHostPort(m.Advertise); err != nil {
			return fmt.Errorf("advertised address %q is not host:port", m.Advertise)
		}
	}
	if m.InstanceID != "" {
		if len(m.InstanceID) > maxInstanceIDLen {
			return fmt.Errorf("instance ID is %d characters, Kafka allows %d", len(m.InstanceID), maxInstanceIDLen)
		}
		for _, r := range m.InstanceID {
			if !validIDRune(r) {
				return fmt.Errorf("instance ID %q: %q is not allowed (letters, digits, '.', '_' and '-')", m.InstanceID, r)
			}
		}
	}
	return nil
}

func validIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// DeriveInstanceID names a process by what makes it unique on its host: the
// host name and the absolute state directory, which one process at a time
// holds (the caller locks it). The same process restarted on the same host
// and directory gets the same ID.
func DeriveInstanceID(prefix, host, absStateDir string) string {
	sum := sha256.Sum256([]byte(host + "\x00" + absStateDir))
	clean := strings.Map(func(r rune) rune {
		if validIDRune(r) {
			return r
		}
		return '-'
	}, prefix+"-"+host)
	if n := maxInstanceIDLen - instanceIDHashCharacters - 1; len(clean) > n {
		clean = clean[:n]
	}
	return clean + "-" + hex.EncodeToString(sum[:])[:instanceIDHashCharacters]
}

// Leave takes a static member out of the named groups at once. Static
// members do not leave when their client closes (that is what lets a
// restart keep the partitions), so a process that stops for good calls this
// to hand its partitions over now rather than after the session timeout.
// Groups the instance is not a member of are skipped.
func Leave(ctx context.Context, cl *kgo.Client, instanceID string, groups ...string) error {
	if instanceID == "" {
		return nil
	}
	var errs []error
	for _, g := range groups {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = g
		mem := kmsg.NewLeaveGroupRequestMember()
		mem.InstanceID = &instanceID
		reason := "chime process stopped"
		mem.Reason = &reason
		req.Members = append(req.Members, mem)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			errs = append(errs, fmt.Errorf("leave group %s: %w", g, err))
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !ignorable(err) {
			errs = append(errs, fmt.Errorf("leave group %s: %w", g, err))
			continue
		}
		for _, m := range resp.Members {
			if err := kerr.ErrorForCode(m.ErrorCode); err != nil && !ignorable(err) {
				errs = append(errs, fmt.Errorf("leave group %s as %s: %w", g, instanceID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ignorable errors mean the member is not (or no longer) in the group.
func ignorable(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.GroupIDNotFound) ||
		errors.Is(err, kerr.FencedInstanceID)
}
