package schema

import (
	"google.golang.org/protobuf/proto"
)

// The messages in chimev1 also have generated, reflection-free encoders
// and decoders (vtprotobuf: MarshalVT, UnmarshalVT, SizeVT). On the hot
// path (rows, dues, outcomes, answers) proto's reflection was about an
// eighth of a fired job's CPU, so chime encodes with them everywhere and
// decodes with them whatever chime itself wrote.
//
// Input from clients (commands on the commands topic, from the API, the
// SDK or anyone who can write to Kafka) is decoded with proto.Unmarshal:
// the generated decoder does not check that strings are UTF-8, as proto3
// requires and proto.Unmarshal does, and a string that is not would fail
// every later proto.Marshal of a row or event that carries it.

// vtMessage is a message with generated encoders (every chimev1 message).
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVT([]byte) error
}

// Marshal encodes m.
func Marshal(m proto.Message) ([]byte, error) {
	return MarshalAppend(nil, m)
}

// MarshalAppend appends m's encoding to buf.
func MarshalAppend(buf []byte, m proto.Message) ([]byte, error) {
	vt, ok := m.(vtMessage)
	if !ok {
		return proto.MarshalOptions{}.MarshalAppend(buf, m)
	}
	size := vt.SizeVT()
	start := len(buf)
	buf = append(buf, make([]byte, size)...)
	n, err := vt.MarshalToSizedBufferVT(buf[start:])
	if err != nil {
		return nil, err
	}
	// MarshalToSizedBufferVT fills the buffer from its end; n == size.
	return buf[:start+n], nil
}

// UnmarshalInternal decodes data that chime itself encoded into m (which
// must be empty): a row, a due, an outcome, an answer. Not for client
// input; see above.
func UnmarshalInternal(data []byte, m proto.Message) error {
	if vt, ok := m.(vtMessage); ok {
		return vt.UnmarshalVT(data)
	}
	return proto.Unmarshal(data, m)
}

// Size is the length of m's encoding.
func Size(m proto.Message) int {
	if vt, ok := m.(vtMessage); ok {
		return vt.SizeVT()
	}
	return proto.Size(m)
}
