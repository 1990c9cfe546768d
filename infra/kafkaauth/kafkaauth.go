// Package kafkaauth owns the credential chime's Kafka clients authenticate
// with (SASL/PLAIN), franz-go and sarama alike; the sarama configuration is
// made in package processors, so that what only needs franz-go does not
// link sarama.
//
// The embedded broker trusts nobody: `chime dev` starts it with SASL on and
// one superuser whose password is generated at first start and kept in the
// state dir (0600), so another local user cannot publish commands to it
// (add a namespace key, say). Against a real cluster the credential comes
// from CHIME_KAFKA_SASL_USER and CHIME_KAFKA_SASL_PASSWORD.
//
// The process's credential is set once, by the chime binary at start and
// before it makes any client (Use), and read by the places that build a
// Kafka client and do not take it as an argument yet (Current). The
// producer package (the Go SDK, also used by programs that are not chime)
// and the API's backend take it as an argument and never read Current:
// a library must not authenticate with a global its caller never set.
// Programs that never call Use (tests, the benchmark harness) connect
// without SASL.
package kafkaauth

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/chime-sched/chime/infra/credential"
)

// Credential is a SASL/PLAIN user and password; the zero value is none.
type Credential struct {
	User, Password string
}

// Enabled reports whether the credential is set.
func (c Credential) Enabled() bool { return c.User != "" }

// Kgo returns the franz-go options that authenticate with c.
func (c Credential) Kgo() []kgo.Opt {
	if !c.Enabled() {
		return nil
	}
	return []kgo.Opt{kgo.SASL(plain.Auth{User: c.User, Pass: c.Password}.AsMechanism())}
}

var current atomic.Pointer[Credential]

// Use sets the process's credential; call it before making clients.
func Use(c Credential) { current.Store(&c) }

// Current is the process's credential (none until Use).
func Current() Credential {
	if c := current.Load(); c != nil {
		return *c
	}
	return Credential{}
}

// EmbeddedUser is the embedded broker's superuser.
const EmbeddedUser = "chime"

// Load reads the credential kept in path ("user:password").
func Load(path string) (Credential, error) {
	c, err := credential.Load(path)
	if err != nil {
		return Credential{}, fmt.Errorf("kafka %w", err)
	}
	return Credential(c), nil
}

// LoadOrCreate reads the credential kept in path, or creates one for
// EmbeddedUser with a random password, readable by its owner only.
func LoadOrCreate(path string) (Credential, error) {
	c, err := credential.LoadOrCreate(path, EmbeddedUser)
	if err != nil {
		return Credential{}, fmt.Errorf("kafka %w", err)
	}
	return Credential(c), nil
}
