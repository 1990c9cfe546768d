package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// timeLayout is how tables and fields show a time: 24-hour, with its zone
// (the console's format too).
const timeLayout = "2006-01-02 15:04:05 MST"

// answerFormat is how every command prints its answer, decided once from
// -o and --utc: the API's JSON, or text (a table or fields) with times in
// loc.
type answerFormat struct {
	json bool
	loc  *time.Location
}

// print writes raw, an answer: decoded and printed by view (fields when
// nil), or with -o json, or when it is not a JSON object, as it came
// (JSON indented).
func (f answerFormat) print(w io.Writer, raw []byte, view func(io.Writer, map[string]any)) {
	var v map[string]any
	if f.json || json.Unmarshal(raw, &v) != nil {
		_, _ = w.Write(indentJSON(raw))
		return
	}
	if view == nil {
		view = fieldsTable
	}
	view(w, showTimes(v, f.loc).(map[string]any))
}

// showTimes returns v with each RFC 3339 time written in loc with
// timeLayout, except in callback bodies: those are the receiver's payload,
// shown as chime sends it.
func showTimes(v any, loc *time.Location) any {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.In(loc).Format(timeLayout)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != "body" {
				e = showTimes(e, loc)
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = showTimes(e, loc)
		}
		return out
	}
	return v
}

func indentJSON(raw []byte) []byte {
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		return append(pretty.Bytes(), '\n')
	}
	return raw
}

// column is one column of a table: its header and the answer's field
// (a dotted path into nested objects).
type column struct{ header, path string }

func col(header, path string) column { return column{header, path} }

// lookup follows a dotted path.
func lookup(v map[string]any, path string) any {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// cell formats a value for a table: numbers without exponents, absent
// values as "-". Times are already shown (answerFormat.print).
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return x
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprintf("%.1f", x)
	case bool:
		return fmt.Sprint(x)
	case map[string]any:
		if s, ok := labelsCell(x); ok {
			return s
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// labelsCell writes a map of strings (a job's labels) as the API's label
// filter takes them: key:value, by key; false for any other map.
func labelsCell(m map[string]any) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return "", false
		}
		parts = append(parts, k+":"+s)
	}
	slices.Sort(parts)
	return strings.Join(parts, " "), true
}

// tableOf prints the list under key as a table, and the next cursor if
// the answer has one.
func tableOf(key string, cols ...column) func(io.Writer, map[string]any) {
	return func(w io.Writer, v map[string]any) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		heads := make([]string, len(cols))
		for i, c := range cols {
			heads[i] = c.header
		}
		fmt.Fprintln(tw, strings.Join(heads, "\t"))
		rows, _ := v[key].([]any)
		for _, r := range rows {
			m, _ := r.(map[string]any)
			cells := make([]string, len(cols))
			for i, c := range cols {
				cells[i] = cell(lookup(m, c.path))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		_ = tw.Flush()
		if len(rows) == 0 {
			fmt.Fprintln(w, "(none)")
		}
		for _, next := range []string{"next_cursor", "next_before"} {
			if c, _ := v[next].(string); c != "" {
				fmt.Fprintf(w, "more: add --%s %s\n", strings.TrimPrefix(next, "next_"), c)
			}
		}
	}
}

// fieldsTable prints an object as "field  value" lines: scalars first,
// then nested values as compact JSON.
func fieldsTable(w io.Writer, v map[string]any) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	nested := func(k string) bool {
		switch v[k].(type) {
		case map[string]any, []any:
			return true
		}
		return false
	}
	slices.SortStableFunc(keys, func(a, b string) int {
		if na, nb := nested(a), nested(b); na != nb {
			if na {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k, cell(v[k]))
	}
	_ = tw.Flush()
}

// firesTable prints the fires under key (a preview's, a job's next ones)
// as a table.
func firesTable(key string) func(io.Writer, map[string]any) {
	return tableOf(key, col("FIRE", "fire_seq"), col("SCHEDULED", "scheduled_at"), col("FIRES AT", "fire_at"))
}

// jobAnswer prints a job's fields, then its next fires as a preview's
// table rather than a JSON cell.
func jobAnswer(w io.Writer, v map[string]any) {
	fires, ok := v["next_fires"].([]any)
	if !ok {
		fieldsTable(w, v)
		return
	}
	rest := maps.Clone(v)
	delete(rest, "next_fires")
	fieldsTable(w, rest)
	if len(fires) == 0 {
		return
	}
	fmt.Fprintln(w, "\nnext fires:")
	firesTable("next_fires")(w, v)
}

// breakerAnswer prints a breaker command's answer: whether it was applied,
// then the breaker.
func breakerAnswer(w io.Writer, v map[string]any) {
	applied, _ := v["applied"].(bool)
	if applied {
		fmt.Fprintln(w, "applied")
	} else {
		fmt.Fprintln(w, "published; the breaker has not applied it yet")
	}
	if b, ok := v["breaker"].(map[string]any); ok {
		fieldsTable(w, b)
	}
}

// statsCounts are the fields of a stats point that count something; a
// step where all are zero saw no call and no outcome.
var statsCounts = []string{"requests", "successes", "failures", "retryable", "permanent", "deferred", "expired", "refused"}

// statsAnswer prints the steps of a stats answer that saw something (the
// API answers every step of the range, most of them zero for a quiet
// namespace), and says how many it left out; a range with nothing in it is
// one line.
func statsAnswer(w io.Writer, v map[string]any) {
	points, _ := v["points"].([]any)
	var shown []any
	for _, p := range points {
		m, _ := p.(map[string]any)
		if slices.ContainsFunc(statsCounts, func(k string) bool { n, _ := m[k].(float64); return n != 0 }) {
			shown = append(shown, p)
		}
	}
	if len(shown) == 0 {
		fmt.Fprintf(w, "no calls from %s to %s (%d steps of %s)\n", cell(v["from"]), cell(v["to"]), len(points), cell(v["step"]))
		return
	}
	tableOf("points", col("TIME", "t"), col("REQUESTS", "requests"), col("OK", "successes"), col("FAILED", "failures"),
		col("DEFERRED", "deferred"), col("EXPIRED", "expired"), col("REFUSED", "refused"), col("P50 MS", "p50_ms"), col("P99 MS", "p99_ms"))(w, map[string]any{"points": shown})
	if n := len(points) - len(shown); n > 0 {
		fmt.Fprintf(w, "(%d of %d steps of %s had no calls and are not shown; -o json shows them)\n", n, len(points), cell(v["step"]))
	}
}
