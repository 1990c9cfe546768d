package depstest

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/chime-sched/chime"

// goList runs `go list` with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	// go test puts its own GOROOT/bin first on the PATH of the test
	// binary, so "go" is the toolchain that runs the test.
	var stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	var lines []string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// heavy are the libraries that only the goka processors, their views and
// the HTTP API need: goka (with sarama and LevelDB under it) and fiber.
var heavy = []string{
	"github.com/lovoo/goka",
	"github.com/IBM/sarama",
	"github.com/syndtr/goleveldb",
	"github.com/gofiber/fiber",
}

// TestLightPackagesLinkNoHeavyLibrary: the event contracts and the command
// builders (which the dispatcher, the API and the breaker share), the Go
// SDK (imported by clients' programs), the dispatcher (franz-go only) and
// the settings link none of the heavy libraries, whatever they import.
func TestLightPackagesLinkNoHeavyLibrary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"schema", heavy},
		{"schema/command", heavy},
		{"producer", heavy},
		{"dispatcher", heavy},
		{"infra/config", append(slices.Clone(heavy), "github.com/ClickHouse/clickhouse-go")},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			t.Parallel()
			for _, dep := range goList(t, "-deps", "-f", "{{.ImportPath}}", module+"/"+tc.pkg) {
				for _, f := range tc.forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s links %s (go list -deps ./%s); keep it out: take what is needed from a package without it", tc.pkg, dep, tc.pkg)
					}
				}
			}
		})
	}
}

// stages orders chime's top-level folders by the data flow: a package may
// import its own stage and earlier ones, never a later one. The API comes
// after analytics because it serves analytics' queries; cmd wires them all.
var stages = map[string]int{
	"schema":     0,
	"infra":      0,
	"internal":   0,
	"producer":   1,
	"processors": 2,
	"dispatcher": 3,
	"views":      4,
	"analytics":  5,
	"api":        6,
	"cmd":        7,
}

// settledStages are packages whose stage is not their folder's.
var settledStages = map[string]int{
	// The binary's settings: only cmd reads them, and they take each
	// default from the package that owns it (a leaf such as api/quota);
	// TestLightPackagesLinkNoHeavyLibrary keeps them light.
	"infra/config": stages["cmd"],
}

func stageOf(t *testing.T, pkg string) int {
	if s, ok := settledStages[pkg]; ok {
		return s
	}
	top, _, _ := strings.Cut(pkg, "/")
	s, ok := stages[top]
	if !ok {
		t.Fatalf("package %s is in folder %s, which has no stage in the data flow: add it to stages", pkg, top)
	}
	return s
}

// TestImportsFollowTheFlow: no package imports one of a later stage. There
// is no list of exceptions: the last ones (the processors reading
// namespaces through an interface views declared, and starting a view of
// their own) went with schema.NamespaceSource and the one lifecycle.
func TestImportsFollowTheFlow(t *testing.T) {
	t.Parallel()
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...") {
		fields := strings.Fields(line)
		from, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			continue
		}
		for _, imp := range fields[1:] {
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok || stageOf(t, from) >= stageOf(t, to) {
				continue
			}
			t.Errorf("%s imports %s, a later stage of the data flow (schema → producer → processors → dispatcher → views → analytics → api → cmd): move what it needs down", from, to)
		}
	}
}
