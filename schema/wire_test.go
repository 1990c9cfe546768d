package schema

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/chime-sched/chime/schema/chimev1"
)

// inputMessages are the messages clients send: each is decoded with
// UnmarshalInput and encoded with MarshalInput.
var inputMessages = []proto.Message{&chimev1.JobCommand{}, &chimev1.NamespaceCommand{}, &chimev1.BreakerCommand{}}

// stringPath is one string field reachable from a message: set puts s
// into it (creating the messages on the way), in a fresh message.
type stringPath struct {
	name string
	set  func(m protoreflect.Message, s string)
}

// stringPaths lists every string field reachable from md, singular,
// repeated, map key and map value, down to depth levels of nesting (a
// batch holds commands: the schema recurses).
func stringPaths(md protoreflect.MessageDescriptor, depth int) []stringPath {
	if depth == 0 {
		return nil
	}
	var out []stringPath
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsMap():
			k, v := fd.MapKey(), fd.MapValue()
			if k.Kind() == protoreflect.StringKind {
				out = append(out, stringPath{name + "[key]", func(m protoreflect.Message, s string) {
					m.Mutable(fd).Map().Set(protoreflect.ValueOfString(s).MapKey(), zeroOf(m.Mutable(fd).Map(), v))
				}})
			}
			if k.Kind() == protoreflect.StringKind && v.Kind() == protoreflect.StringKind {
				out = append(out, stringPath{name + "[value]", func(m protoreflect.Message, s string) {
					m.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(s))
				}})
			}
		case fd.Kind() == protoreflect.StringKind && fd.IsList():
			out = append(out, stringPath{name + "[]", func(m protoreflect.Message, s string) {
				m.Mutable(fd).List().Append(protoreflect.ValueOfString(s))
			}})
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, stringPath{name, func(m protoreflect.Message, s string) { m.Set(fd, protoreflect.ValueOfString(s)) }})
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			for _, sub := range stringPaths(fd.Message(), depth-1) {
				out = append(out, stringPath{name + "[]." + sub.name, func(m protoreflect.Message, s string) {
					l := m.Mutable(fd).List()
					e := l.NewElement()
					sub.set(e.Message(), s)
					l.Append(e)
				}})
			}
		case fd.Kind() == protoreflect.MessageKind:
			for _, sub := range stringPaths(fd.Message(), depth-1) {
				out = append(out, stringPath{name + "." + sub.name, func(m protoreflect.Message, s string) {
					sub.set(m.Mutable(fd).Message(), s)
				}})
			}
		}
	}
	return out
}

func zeroOf(m protoreflect.Map, v protoreflect.FieldDescriptor) protoreflect.Value {
	if v.Kind() == protoreflect.MessageKind {
		return m.NewValue()
	}
	return v.Default()
}

// Every string field a client can send, at any depth, is refused when it
// is not UTF-8, by UnmarshalInput as by proto.Unmarshal, and by
// MarshalInput as by proto.Marshal; the same message with UTF-8 in it
// decodes as proto.Unmarshal decodes it.
func TestInputCodecRefusesInvalidUTF8InEveryString(t *testing.T) {
	t.Parallel()
	for _, msg := range inputMessages {
		md := msg.ProtoReflect().Descriptor()
		paths := stringPaths(md, 7)
		require.NotEmpty(t, paths)
		for _, p := range paths {
			t.Run(fmt.Sprintf("%s.%s", md.Name(), p.name), func(t *testing.T) {
				t.Parallel()
				for _, tc := range []struct {
					s  string
					ok bool
				}{{"välid", true}, {"bad\xff", false}} {
					m := msg.ProtoReflect().New()
					p.set(m, tc.s)
					// The generated encoder writes any bytes: the input a
					// client that does not check could send.
					raw, err := Marshal(m.Interface())
					require.NoError(t, err)

					want := msg.ProtoReflect().New().Interface()
					wantErr := proto.Unmarshal(raw, want)
					got := msg.ProtoReflect().New().Interface()
					gotErr := UnmarshalInput(raw, got)
					_, marshalErr := MarshalInput(m.Interface())
					if tc.ok {
						require.NoError(t, wantErr)
						require.NoError(t, gotErr)
						require.NoError(t, marshalErr)
						require.True(t, proto.Equal(want, got), "decoded %v, proto.Unmarshal %v", got, want)
					} else {
						require.Error(t, wantErr, "proto.Unmarshal accepted it: is the field not checked in proto3?")
						require.ErrorContains(t, gotErr, "invalid UTF-8")
						require.ErrorContains(t, marshalErr, "invalid UTF-8")
					}
				}
			})
		}
	}
}

// discardUnknown drops the unknown fields of m and of every message in it.
func discardUnknown(m protoreflect.Message) {
	if !m.IsValid() {
		return
	}
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				discardUnknown(e.Message())
				return true
			})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for i := range v.List().Len() {
				discardUnknown(v.List().Get(i).Message())
			}
		case !fd.IsMap() && !fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			discardUnknown(v.Message())
		}
		return true
	})
}

// Whatever UnmarshalInput accepts, proto.Unmarshal accepts and decodes the
// same; and what proto.Unmarshal refuses, UnmarshalInput refuses.
func FuzzUnmarshalInput(f *testing.F) {
	valid, err := proto.Marshal(validUpsert())
	require.NoError(f, err)
	batch, err := proto.Marshal(&chimev1.JobCommand{CommandId: "b", Command: &chimev1.JobCommand_Batch{Batch: &chimev1.Batch{Commands: []*chimev1.JobCommand{validUpsert(), validUpsert()}}}})
	require.NoError(f, err)
	f.Add(valid)
	f.Add(batch)
	f.Add([]byte{})
	f.Add([]byte("\x0a\x01\xff"))
	f.Add([]byte{0x52, 0x02, 0x0a, 0x00})
	f.Add([]byte("\x0a\x01x\x1a\x01a\x22\x01b\x72\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, msg := range inputMessages {
			want := msg.ProtoReflect().New().Interface()
			wantErr := proto.Unmarshal(raw, want)
			got := msg.ProtoReflect().New().Interface()
			gotErr := UnmarshalInput(raw, got)
			switch {
			case gotErr == nil && wantErr != nil:
				t.Fatalf("%T: UnmarshalInput accepted what proto.Unmarshal refuses (%v)", msg, wantErr)
			case gotErr == nil:
				// Unknown fields of the well-known types (a timestamp's)
				// are dropped by the generated decoder: nothing reads them.
				discardUnknown(want.ProtoReflect())
				discardUnknown(got.ProtoReflect())
				if !proto.Equal(want, got) {
					t.Fatalf("%T: decoded %v, proto.Unmarshal %v", msg, got, want)
				}
			}
		}
	})
}
