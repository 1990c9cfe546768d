package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

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

// cell formats a value for a table: times shortened, numbers without
// exponents, absent values as "-".
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.Local().Format("2006-01-02 15:04:05")
		}
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
	}
	b, _ := json.Marshal(v)
	return string(b)
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
