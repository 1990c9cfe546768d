package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
)

// encoding/json matches object keys to struct fields ignoring case and
// lets a later duplicate key win, so {"Callback": …, "callback": …}
// decodes, and a proxy that validates the first (or an exactly spelled)
// key sees another request than chime. strictKeys walks the body beside
// the Go type it decodes into, before the decode, and refuses both: every
// key must be a field's exact name (or a map key), once per object.
// Values of type json.RawMessage or interface (a callback's body) are the
// client's own JSON and are not looked into.

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// strictKeys checks body against the type of v (a pointer).
func strictKeys(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := walkStrict(dec, reflect.TypeOf(v), "")
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil // the decode reports the truncated body
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return nil // and the syntax error
	}
	return err
}

func walkStrict(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	opaque := t == nil || t == rawMessageType || t.Kind() == reflect.Interface
	switch d {
	case '[':
		var elem reflect.Type
		if !opaque && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walkStrict(dec, elem, path); err != nil {
				return err
			}
		}
	case '{':
		var fields map[string]reflect.Type
		if !opaque && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			at := joinPath(path, key)
			var next reflect.Type
			switch {
			case opaque:
			case t.Kind() == reflect.Map:
				next = t.Elem()
			case fields != nil:
				ft, ok := fields[key]
				if !ok {
					if name, ci := caseMatch(fields, key); ci {
						return badRequest(at, "unknown field %q; field names are case-sensitive, did you mean %q?", key, name)
					}
					return nil // the decode names the unknown field
				}
				next = ft
			}
			if !opaque {
				if seen[key] {
					return badRequest(at, "%q appears twice in one object; give each field once", key)
				}
				seen[key] = true
			}
			if err := walkStrict(dec, next, at); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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
