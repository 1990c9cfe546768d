package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeWhereToFindWhat holds the README's map for newcomers to the
// code as it moves: every file named in "Where to find what" exists and
// declares, between them, the names its row says to start at; every
// folder named in "Repository layout" exists.
func TestReadmeWhereToFindWhat(t *testing.T) {
	t.Parallel()
	const root = "../.."
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	readme := string(raw)

	rows := tableRows(t, section(t, readme, "Where to find what"))
	require.NotEmpty(t, rows, "no table under \"Where to find what\"")
	for _, cols := range rows {
		require.Len(t, cols, 3, "a row of \"Where to find what\": where, file, start at: %q", cols)
		var sources strings.Builder
		for _, p := range repoPaths(cols[1]) {
			body, err := os.ReadFile(filepath.Join(root, p))
			require.NoError(t, err, "README's \"Where to find what\" names %s (%s)", p, cols[0])
			sources.Write(body)
		}
		for _, name := range backticked(cols[2]) {
			require.True(t, declaration(name).MatchString(sources.String()), "README: %s should be declared in %s (%s)", name, cols[1], cols[0])
		}
	}

	for _, cols := range tableRows(t, section(t, readme, "Repository layout")) {
		for _, p := range repoPaths(strings.Join(cols, " ")) {
			_, err := os.Stat(filepath.Join(root, p))
			require.NoError(t, err, "README's \"Repository layout\" names %s", p)
		}
	}
}

// section is the text under the heading "## title", up to the next one.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n## "+title+"\n")
	require.True(t, ok, "README has no section %q", title)
	body, _, _ := strings.Cut(after, "\n## ")
	return body
}

// tableRows are the cells of a section's table rows, its header and rule
// left out.
func tableRows(t *testing.T, text string) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	var rows [][]string
	for i, line := range lines {
		rule := func(l string) bool { return strings.HasPrefix(l, "|---") }
		if !strings.HasPrefix(line, "|") || rule(line) || (i+1 < len(lines) && rule(lines[i+1])) {
			continue
		}
		rows = append(rows, strings.Split(strings.Trim(line, "| "), " | "))
	}
	return rows
}

var backtick = regexp.MustCompile("`([^`]+)`")

func backticked(s string) []string {
	var out []string
	for _, m := range backtick.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// repoPaths are the backticked paths in s that start at one of the
// repository's top-level folders (`ns/job` and the like are not paths).
func repoPaths(s string) []string {
	var out []string
	for _, b := range backticked(s) {
		first, _, ok := strings.Cut(b, "/")
		if !ok || strings.ContainsAny(b, " {}*<>") {
			continue
		}
		if fi, err := os.Stat(filepath.Join("../..", first)); err == nil && fi.IsDir() {
			out = append(out, strings.TrimSuffix(b, "/"))
		}
	}
	return out
}

// declaration matches the Go declaration of name: `f` (a function or a
// method, or a type), or `T.m` (a method of T).
func declaration(name string) *regexp.Regexp {
	if typ, method, ok := strings.Cut(name, "."); ok {
		return regexp.MustCompile(`(?m)^func \(\w+ \*?` + regexp.QuoteMeta(typ) + `\) ` + regexp.QuoteMeta(method) + `[\[(]`)
	}
	q := regexp.QuoteMeta(name)
	return regexp.MustCompile(`(?m)^(func (\([^)]*\) )?` + q + `[\[(]|type ` + q + ` )`)
}
