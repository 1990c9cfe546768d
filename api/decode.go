package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/gofiber/fiber/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
)

// decodeJSON decodes the request body into v strictly: one JSON value,
// no unknown fields, field names spelled exactly and given once (strict.go),
// no trailing data. Its errors are 400 problems.
func decodeJSON(c *fiber.Ctx, v any) error {
	return decodeBody(c.Body(), v)
}

// strictV2 is what decodeBody's fast path holds a body to: JSON v2's
// defaults (names matched exactly, each given once, one value and no
// trailing data) and no unknown members. Invalid UTF-8 in a string is
// replaced, as encoding/json does, so that both decoders accept the same
// bodies (TestDecodersAgree, FuzzDecodersAgree).
var strictV2 = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true))

// decodeBody is decodeJSON on bytes. A body is decoded once, by JSON v2
// (github.com/go-json-experiment/json, the module encoding/json/v2 comes
// from), which checks what strictKeys checks as it goes: on a 1,000-job
// batch it takes half the time of encoding/json and strictKeys, with half
// the allocations (BenchmarkDecodeBatch); the decode was 38 % of the
// API's CPU in make bench's ingest. A body it refuses is decoded again
// the way chime always did
// (encoding/json, then strictKeys), whose errors the problems are made
// of: they name the field as the API's docs do ("jobs[1].callback.bdy")
// and say what to do. Refusals are rare and cheap to decode twice.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request body is empty; send a JSON object")
	}
	fastErr := jsonv2.Unmarshal(body, v, strictV2)
	if fastErr == nil {
		return nil
	}
	// What the fast path filled in is dropped: the slow path starts from
	// the zero value, as the handler's v did.
	reflect.ValueOf(v).Elem().SetZero()
	if err := decodeStrict(body, v); err != nil {
		return err
	}
	// encoding/json took what JSON v2 refused. TestDecodersAgree and
	// FuzzDecodersAgree look for such bodies; should one come, it is
	// refused with JSON v2's reason rather than let through one way and
	// not the other.
	return badRequest(pointerField(fastErr), "the body does not decode: %v", fastErr)
}

// decodeStrict is the slow path: encoding/json, then strictKeys.
func decodeStrict(body []byte, v any) error {
	// The body is read as JSON whatever Content-Type says: curl -d sends
	// form encoding by default, and refusing that helps nobody.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// encoding/json names an unknown field without where it is ("bdy");
		// the key scanner, which needs valid JSON, gives its path
		// ("callback.bdy").
		if strings.HasPrefix(err.Error(), unknownFieldPrefix) && json.Valid(body) {
			if perr := strictKeys(body, v); perr != nil {
				return perr
			}
		}
		return jsonProblem(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("", "the body has data after its JSON value; send exactly one JSON object")
	}
	return strictKeys(body, v)
}

// pointerField names where a JSON v2 error is, in the API's notation
// ("jobs[1].callback.url" for /jobs/1/callback/url).
func pointerField(err error) string {
	var (
		sem *jsonv2.SemanticError
		syn *jsontext.SyntacticError
		ptr jsontext.Pointer
	)
	switch {
	case errors.As(err, &sem):
		ptr = sem.JSONPointer
	case errors.As(err, &syn):
		ptr = syn.JSONPointer
	}
	var b strings.Builder
	for tok := range ptr.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// unknownFieldPrefix starts encoding/json's error for a key no field has.
const unknownFieldPrefix = "json: unknown field "

func jsonProblem(err error) *Problem {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return badRequest("", "the body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		return badRequest(field, "%s must be %s, not a JSON %s", orBody(field), jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the body ends in the middle of a JSON value")
	}
	if name, ok := strings.CutPrefix(err.Error(), unknownFieldPrefix); ok {
		name = strings.Trim(name, `"`)
		return badRequest(name, "unknown field %q; remove it (GET /openapi.json lists the fields)", name)
	}
	return badRequest("", "the body does not decode: %v", err)
}

func orBody(field string) string {
	if field == "" {
		return "the body"
	}
	return field
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map", "ptr":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "true or false"
	case "float32", "float64":
		return "a number"
	}
	if strings.Contains(goKind, "int") {
		return "a non-negative integer in range"
	}
	return "a " + goKind
}

// fieldErrs collects field errors while a request is converted.
type fieldErrs []FieldError

func (f *fieldErrs) add(field, format string, args ...any) {
	*f = append(*f, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (f fieldErrs) problem() error {
	if len(f) == 0 {
		return nil
	}
	return invalidFields(f...)
}

// duration parses an optional Go duration string ("30s", "1h30m"). Its
// field is prefix+name, joined only for an error: a batch converts a
// thousand jobs, each with its prefix ("jobs[3].").
func (f *fieldErrs) duration(prefix, name string, s *string) *durationpb.Duration {
	if s == nil {
		return nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		f.add(prefix+name, "%q is not a duration; write a Go duration such as \"30s\", \"1m30s\" or \"2h\"", *s)
		return nil
	}
	return durationpb.New(d)
}

// timestamp parses an optional RFC 3339 time; its field is prefix+name,
// as duration's.
func (f *fieldErrs) timestamp(prefix, name string, s *string) *timestamppb.Timestamp {
	if s == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		f.add(prefix+name, "%q is not an RFC 3339 time; write e.g. \"2026-11-23T10:00:00Z\" (with a zone offset)", *s)
		return nil
	}
	return timestamppb.New(t)
}

func validationReason(err error) string {
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return err.Error()
}

func fmtDuration(d *durationpb.Duration) *string {
	if d == nil {
		return nil
	}
	s := d.AsDuration().String()
	return &s
}

func fmtTime(t *timestamppb.Timestamp) *string {
	if t == nil {
		return nil
	}
	s := t.AsTime().UTC().Format(time.RFC3339Nano)
	return &s
}
