package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// encoding/json matches object keys to struct fields ignoring case and
// lets a later duplicate key win, so {"Callback": …, "callback": …}
// decodes, and a proxy that validates the first (or an exactly spelled)
// key sees another request than chime. strictKeys walks the body beside
// the Go type it was decoded into, after the decode, and refuses both: every
// key must be a field's exact name (or a map key), once per object.
// Values of type json.RawMessage or interface (a callback's body) are the
// client's own JSON and are not looked into. It also names an unknown
// field with its whole path ("jobs[1].callback.bdy"), which encoding/json's
// error does not ("bdy").

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// strictKeys checks body, which encoding/json has just decoded into v (a
// pointer) and so is valid JSON, against v's type. It scans the bytes
// once, without a tokenizer: encoding/json's Token cost two and a half
// times the decode itself on a 1,000-job batch.
func strictKeys(body []byte, v any) error {
	sc := &keyScanner{b: body}
	return sc.value(reflect.TypeOf(v))
}

// keyScanner walks valid JSON, keeping the keys and array indexes that
// lead to where it is (for the error's field path).
type keyScanner struct {
	b    []byte
	i    int
	path []step
}

// step is an object key, or an array index when key is empty.
type step struct {
	key   string
	index int
}

func (s *keyScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// str skips the string at s.i and returns its contents (raw, escapes kept).
func (s *keyScanner) str() []byte {
	s.i++ // the opening quote
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != '"' {
		if s.b[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	out := s.b[start:min(s.i, len(s.b))]
	s.i++ // the closing quote
	return out
}

func (s *keyScanner) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s.ws()
	if s.i >= len(s.b) {
		return nil
	}
	opaque := t == nil || t == rawMessageType || t.Kind() == reflect.Interface
	switch s.b[s.i] {
	case '{':
		if opaque {
			return s.skipComposite()
		}
		return s.object(t)
	case '[':
		if opaque || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) {
			return s.skipComposite()
		}
		s.i++
		for n := 0; ; n++ {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] == ']' {
				s.i++
				return nil
			}
			s.path = append(s.path, step{index: n})
			if err := s.value(t.Elem()); err != nil {
				return err
			}
			s.path = s.path[:len(s.path)-1]
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
			}
		}
	case '"':
		s.str()
	default: // number, true, false, null
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
	}
	return nil
}

func (s *keyScanner) object(t reflect.Type) error {
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	s.i++ // {
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return nil
		}
		raw := s.str()
		key := string(raw)
		if bytes.IndexByte(raw, '\\') >= 0 {
			if k, err := strconv.Unquote(`"` + key + `"`); err == nil {
				key, raw = k, []byte(k)
			}
		}
		for _, k := range seen {
			if bytes.Equal(k, raw) {
				return badRequest(s.at(key), "%q appears twice in one object; give each field once", key)
			}
		}
		seen = append(seen, raw)
		var next reflect.Type
		switch {
		case t.Kind() == reflect.Map:
			next = t.Elem()
		case fields != nil:
			ft, ok := fields[key]
			if !ok {
				if name, ci := caseMatch(fields, key); ci {
					return badRequest(s.at(key), "unknown field %q; field names are case-sensitive, did you mean %q?", key, name)
				}
				at := s.at(key)
				return badRequest(at, "unknown field %q; remove it (GET /openapi.json lists the fields)", at)
			}
			next = ft
		}
		s.ws()
		s.i++ // :
		s.path = append(s.path, step{key: key})
		if err := s.value(next); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

// skipComposite skips the object or array at s.i: the client's own JSON.
func (s *keyScanner) skipComposite() error {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.str()
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
	return nil
}

// at is the field path of key in the current object: keys joined by dots,
// indexes in brackets ("jobs[3].callback.url"), as the API's field errors
// write them.
func (s *keyScanner) at(key string) string {
	var b strings.Builder
	for _, st := range append(slices.Clone(s.path), step{key: key}) {
		if st.key == "" {
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.key)
	}
	return b.String()
}

func caseMatch(fields map[string]reflect.Type, key string) (string, bool) {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return name, true
		}
	}
	return "", false
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of t's fields, those of embedded structs
// included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					m[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
