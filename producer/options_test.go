package producer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// No test here reaches a broker: New does not dial.
var unusedBroker = []string{"127.0.0.1:1"}

func TestNewRejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		opts    []Option
		wantErr string
	}{
		{name: "no brokers", opts: nil, wantErr: "no brokers"},
		{name: "empty broker list", opts: []Option{Brokers(nil)}, wantErr: "no brokers"},
		{name: "empty address", opts: []Option{Brokers([]string{"127.0.0.1:9092", ""})}, wantErr: "address 1 is empty"},
		{name: "nil clock", opts: []Option{Brokers(unusedBroker), Clock(nil)}, wantErr: "nil clock"},
		{name: "SASL user without a password", opts: []Option{Brokers(unusedBroker), SASLPlain("chime", "")}, wantErr: `user "chime" without a password`},
		{name: "SASL password without a user", opts: []Option{Brokers(unusedBroker), SASLPlain("", "secret")}, wantErr: "a password without a user"},
		{
			name:    "idempotence disabled",
			opts:    []Option{Brokers(unusedBroker), KgoOptions(kgo.DisableIdempotentWrite())},
			wantErr: "DisableIdempotentWrite is not allowed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.opts...)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, p)
		})
	}
}

func TestNewClientOptions(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		opts       []Option
		wantLinger time.Duration
		wantID     string
		wantTopic  string
		wantSASL   []string // mechanism names, in the order they are tried
	}{
		{
			// No SASL unless SASLPlain (or KgoOptions) says so: the SDK
			// has no other source of a credential.
			name:       "defaults, no SASL",
			opts:       []Option{Brokers(unusedBroker)},
			wantLinger: defaultLinger,
			wantID:     defaultClientID,
			wantTopic:  "chime.job-commands",
		},
		{
			name: "tuning passes through, acks cannot be lowered",
			opts: []Option{
				Brokers(unusedBroker),
				ClientID("billing"),
				TopicPrefix("staging."),
				KgoOptions(kgo.ProducerLinger(time.Millisecond), kgo.RequiredAcks(kgo.LeaderAck())),
			},
			wantLinger: time.Millisecond,
			wantID:     "billing",
			wantTopic:  "staging.job-commands",
		},
		{
			name:       "SASL/PLAIN, as chime dev's broker requires",
			opts:       []Option{Brokers(unusedBroker), SASLPlain("chime", "secret")},
			wantLinger: defaultLinger,
			wantID:     defaultClientID,
			wantTopic:  "chime.job-commands",
			wantSASL:   []string{"PLAIN"},
		},
		{
			name:       "no credential (unset environment variables) is no SASL",
			opts:       []Option{Brokers(unusedBroker), SASLPlain("", "")},
			wantLinger: defaultLinger,
			wantID:     defaultClientID,
			wantTopic:  "chime.job-commands",
		},
		{
			name:       "SASLPlain is tried before a mechanism in KgoOptions",
			opts:       []Option{Brokers(unusedBroker), KgoOptions(kgo.SASL(scram.Auth{User: "u", Pass: "p"}.AsSha256Mechanism())), SASLPlain("chime", "secret")},
			wantLinger: defaultLinger,
			wantID:     defaultClientID,
			wantTopic:  "chime.job-commands",
			wantSASL:   []string{"PLAIN", "SCRAM-SHA-256"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.opts...)
			require.NoError(t, err)
			t.Cleanup(p.Close)

			require.Equal(t, kgo.AllISRAcks(), p.cl.OptValue(kgo.RequiredAcks))
			require.Equal(t, false, p.cl.OptValue(kgo.DisableIdempotentWrite))
			require.Equal(t, tt.wantLinger, p.cl.OptValue(kgo.ProducerLinger))
			require.Equal(t, tt.wantID, p.cl.OptValue(kgo.ClientID))
			require.Equal(t, tt.wantTopic, p.topic)
			require.Equal(t, tt.wantSASL, mechanisms(p.cl))
		})
	}
}

// mechanisms names the client's SASL mechanisms.
func mechanisms(cl *kgo.Client) []string {
	var names []string
	for _, m := range cl.OptValue(kgo.SASL).([]sasl.Mechanism) {
		names = append(names, m.Name())
	}
	return names
}
