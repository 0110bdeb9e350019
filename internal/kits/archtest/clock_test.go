package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// internalDir is internal/, from this package's folder.
const internalDir = "../.."

// clockedDirs are the folders, under internal/, whose code reads the time
// only through an injected clock.Clock and whose tests do not sleep: the
// engine, and the list pipeline (its progress throttle and MX lookup
// budget, issue 33).
var clockedDirs = []string{"engine", "lists/pipeline"}

// wallCalls are the time package's functions that read the wall clock or
// wait on it. Engine code asks its injected clock instead
// (internal/platform/clock), so that the wiring chooses the clock once and
// tests run it simulated (issue 33).
var wallCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// wallSeams are the allowed direct uses in clockedDirs, as "path:Func"
// (path relative to internal/), each with why: at most 3. None today:
// every engine component and the pipeline take a clock.Clock (Redis's and
// PostgreSQL's TTLs run on the servers' clocks; the code only sends
// durations; context deadlines run on the runtime's timers, simulated in
// a synctest bubble as the clock is).
var wallSeams = map[string]string{}

// testSleeps are the tests in clockedDirs allowed to sleep on the wall
// clock, as "path" (relative to internal/) and how many times, each with
// why: waits for real servers whose clocks no test moves. At most 5 in
// all.
var testSleeps = map[string]struct {
	n   int
	why string
}{
	"engine/smtpprobe/fleet_test.go": {2, "a real Redis killed and restarted mid-run (TestFleetRedisRestartMidRun)"},
	"engine/fleet/fallback_test.go":  {1, "a real Redis restart seen by a health check (TestBackendRestartWipesLeases)"},
}

// timeCall is one use of a time function: its line and name.
type timeCall struct {
	line int
	fun  string
}

// timeCalls returns each use of wallCalls in file (whatever the time
// import's local name).
func timeCalls(t *testing.T, fset *token.FileSet, path string) []timeCall {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "time" {
			local = "time"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	var out []timeCall
	if local == "" {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && wallCalls[sel.Sel.Name] {
			out = append(out, timeCall{fset.Position(sel.Pos()).Line, sel.Sel.Name})
		}
		return true
	})
	return out
}

// clockedFiles returns the Go files of clockedDirs, relative to
// internalDir, test files or not.
func clockedFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var files []string
	for _, dir := range clockedDirs {
		n := len(files)
		err := filepath.WalkDir(filepath.Join(internalDir, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			if strings.HasSuffix(p, "_test.go") == tests {
				rel, _ := filepath.Rel(internalDir, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == n {
			t.Fatalf("no Go files under internal/%s", dir)
		}
	}
	return files
}

// TestEngineUsesItsClock: the engine's and the pipeline's code reads the
// time and waits only through its injected clock, but for the seams
// listed in wallSeams.
func TestEngineUsesItsClock(t *testing.T) {
	if len(wallSeams) > 3 {
		t.Errorf("%d wall-clock seams in the engine, at most 3", len(wallSeams))
	}
	fset := token.NewFileSet()
	for _, rel := range clockedFiles(t, false) {
		for _, c := range timeCalls(t, fset, filepath.Join(internalDir, rel)) {
			if _, ok := wallSeams[rel+":"+c.fun]; !ok {
				t.Errorf("internal/%s:%d uses time.%s: use the component's clock.Clock (internal/platform/clock)", rel, c.line, c.fun)
			}
		}
	}
}

// TestEngineTestsDoNotSleep: the engine's and the pipeline's unit tests
// let time pass in synctest bubbles (internal/kits/simtime), not on the
// wall clock; the sleeps left wait for real servers and are listed in
// testSleeps.
func TestEngineTestsDoNotSleep(t *testing.T) {
	fset := token.NewFileSet()
	total := 0
	for _, rel := range clockedFiles(t, true) {
		n := 0
		for _, c := range timeCalls(t, fset, filepath.Join(internalDir, rel)) {
			if c.fun == "Sleep" {
				n++
			}
		}
		total += n
		if allowed := testSleeps[rel].n; n > allowed {
			t.Errorf("internal/%s sleeps %d times (allowed %d): let time pass with simtime.Advance in a synctest bubble, or wait for the real server with testkit/realtime", rel, n, allowed)
		}
	}
	if total > 5 {
		t.Errorf("%d time.Sleep calls in the engine's and the pipeline's tests, at most 5", total)
	}
}
