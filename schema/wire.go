package schema

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The messages in chimev1 also have generated, reflection-free encoders
// and decoders (vtprotobuf: MarshalVT, UnmarshalVT, SizeVT). On the hot
// path (rows, dues, outcomes, answers) proto's reflection was about an
// eighth of a fired job's CPU, so chime encodes with them everywhere and
// decodes with them whatever chime itself wrote.
//
// Input from clients (commands on the commands topic, from the API, the
// SDK or anyone who can write to Kafka) is decoded with UnmarshalInput and
// encoded with MarshalInput: the generated code does not check that
// strings are UTF-8, as proto3 requires and proto.Unmarshal and
// proto.Marshal do, and a string that is not would fail every later
// proto.Marshal of a row or event that carries it. So they walk the
// encoding once, guided by the message's descriptor, and check every
// string field in it (nested messages and map entries included) before
// the generated decoder runs or after the generated encoder ran: the same
// check as proto's, without its reflection (proto.Unmarshal of a create
// was 5 % of the scheduler's CPU at 2,000 jobs/s, docs/capacity.md).

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

// UnmarshalInput decodes client input into m (which must be empty),
// refusing what proto.Unmarshal refuses: a malformed encoding, and a
// string field that is not UTF-8. The generated decoder is stricter in
// one way: a known field sent with another wire type is an error, where
// proto.Unmarshal keeps it as an unknown field.
func UnmarshalInput(data []byte, m proto.Message) error {
	vt, ok := m.(vtMessage)
	if !ok {
		return proto.Unmarshal(data, m)
	}
	if err := checkUTF8(data, m.ProtoReflect().Descriptor(), 0); err != nil {
		return err
	}
	return vt.UnmarshalVT(data)
}

// MarshalInput encodes client input, refusing, as proto.Marshal does, a
// string field that is not UTF-8.
func MarshalInput(m proto.Message) ([]byte, error) {
	if _, ok := m.(vtMessage); !ok {
		return proto.Marshal(m)
	}
	b, err := Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := checkUTF8(b, m.ProtoReflect().Descriptor(), 0); err != nil {
		return nil, err
	}
	return b, nil
}

// NextField reads the field at the start of b, an encoded message: its
// number, its wire type and its value (a length-delimited field's
// contents, else its encoded value, a varint's bytes say), and what follows
// it; the field's whole encoding is b[:len(b)-len(rest)]. The walkers of
// encodings without decoding them (the UTF-8 check, a row's summary,
// labels and timestamps, an outcome's verdict, the scheduler's answers
// settled on the row) read fields with it: one reader, one set of rules
// for what parses.
func NextField(b []byte) (num protowire.Number, typ protowire.Type, v, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	if num > protowire.MaxValidNumber {
		return 0, 0, nil, nil, errFieldNumber
	}
	b = b[n:]
	if typ == protowire.BytesType {
		v, n = protowire.ConsumeBytes(b)
	} else if n = protowire.ConsumeFieldValue(num, typ, b); n >= 0 {
		v = b[:n]
	}
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	return num, typ, v, b[n:], nil
}

var errFieldNumber = errors.New("proto: invalid field number")

// VarintValue is the value of a varint field NextField read (0 if v is
// not one).
func VarintValue(v []byte) uint64 {
	x, _ := protowire.ConsumeVarint(v)
	return x
}

// maxInputDepth bounds the nesting checkUTF8 follows, as proto's decoder
// bounds its recursion (protowire's default limit).
const maxInputDepth = 10000

var errInputDepth = errors.New("proto: exceeded maximum recursion depth")

// checkUTF8 walks the encoding b of a message of descriptor md and checks
// that each string field in it, at any depth, is UTF-8. Unknown fields are
// skipped, as the decoder keeps them unread.
func checkUTF8(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	return utf8PlanOf(md).check(b, depth)
}

// utf8Plan is what checkUTF8 needs of a message's fields, by number: which
// are strings and which are messages, with their own plans. Asking the
// descriptor (ByNumber, Kind, Message) for every field was half of the
// check's time on the scheduler's batches of answers.
type utf8Plan struct {
	md     protoreflect.MessageDescriptor
	fields []utf8Field // by field number
	sparse map[protowire.Number]utf8Field
}

type utf8Field struct {
	str bool
	msg *utf8Plan // a message field's
}

// maxDenseField bounds the field numbers a plan indexes in a slice; a
// message with larger ones (none of chime's) keeps a map.
const maxDenseField = 1024

var utf8Plans sync.Map // protoreflect.FullName -> *utf8Plan

func utf8PlanOf(md protoreflect.MessageDescriptor) *utf8Plan {
	if p, ok := utf8Plans.Load(md.FullName()); ok {
		return p.(*utf8Plan)
	}
	p, _ := utf8Plans.LoadOrStore(md.FullName(), buildUTF8Plan(md, map[protoreflect.FullName]*utf8Plan{}))
	return p.(*utf8Plan)
}

// buildUTF8Plan makes md's plan and those of the messages in it; seen
// closes the cycles of recursive messages.
func buildUTF8Plan(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*utf8Plan) *utf8Plan {
	if p := seen[md.FullName()]; p != nil {
		return p
	}
	p := &utf8Plan{md: md}
	seen[md.FullName()] = p
	fields := md.Fields()
	top := protowire.Number(0)
	for i := range fields.Len() {
		top = max(top, fields.Get(i).Number())
	}
	if top <= maxDenseField {
		p.fields = make([]utf8Field, top+1)
	} else {
		p.sparse = map[protowire.Number]utf8Field{}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		var f utf8Field
		switch fd.Kind() {
		case protoreflect.StringKind:
			f.str = true
		case protoreflect.MessageKind:
			f.msg = buildUTF8Plan(fd.Message(), seen)
		default:
			continue
		}
		if p.sparse != nil {
			p.sparse[fd.Number()] = f
		} else {
			p.fields[fd.Number()] = f
		}
	}
	return p
}

func (p *utf8Plan) field(num protowire.Number) utf8Field {
	if p.sparse != nil {
		return p.sparse[num]
	}
	if num >= 0 && int(num) < len(p.fields) {
		return p.fields[num]
	}
	return utf8Field{}
}

func (p *utf8Plan) check(b []byte, depth int) error {
	if depth > maxInputDepth {
		return errInputDepth
	}
	for len(b) > 0 {
		num, typ, v, rest, err := NextField(b)
		if err != nil {
			return err
		}
		b = rest
		if typ != protowire.BytesType {
			continue
		}
		switch f := p.field(num); {
		case f.str:
			if !utf8.Valid(v) {
				return fmt.Errorf("proto: field %s contains invalid UTF-8", p.md.Fields().ByNumber(num).FullName())
			}
		case f.msg != nil:
			if err := f.msg.check(v, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
