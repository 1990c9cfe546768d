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
// Every component that makes a Kafka client takes its credential as an
// argument (a SASL field in its Config; producer.SASLPlain in the Go SDK),
// and the chime binary passes the one it loaded to each. There is no
// process-wide credential, so no component, and no program embedding the
// SDK, authenticates with one its caller did not pass. A zero Credential
// connects without SASL.
package kafkaauth

import (
	"fmt"

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
