package docs

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated docs instead of checking them (make guide-docs)")

const root = "../../.."

// TestLinks: every relative link of README.md and docs/*.md names a file
// that exists, and every anchor one of the target page's headings.
func TestLinks(t *testing.T) {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d Markdown files only: %v", len(files), files)
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckFindsBrokenLinks: the checker itself tells good links from bad.
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A page\n\n## Keys, services and tenants\n\n## Repeat\n\n## Repeat\n")
	write("Makefile", "")
	for _, tc := range []struct {
		link string
		ok   bool
	}{
		{"docs/a.md", true},
		{"docs/a.md#keys-services-and-tenants", true},
		{"docs/a.md#repeat-1", true},
		{"docs/a.md#repeat-2", false},
		{"docs/a.md#Keys", false},
		{"docs/b.md", false},
		{"Makefile", true},
		{"#own-heading", true},
		{"#missing", false},
		{"../outside.md", false},
		{"https://example.com/x.md#anything", true},
	} {
		write("README.md", "# R\n\n## Own heading\n\nSee [it]("+tc.link+"), and `[not](a-link.md)`.\n\n```\n[nor](this.md)\n```\n")
		problems, err := Check(dir, []string{"README.md"})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(problems) == 0; got != tc.ok {
			t.Errorf("link %q: resolves %v, want %v (%v)", tc.link, got, tc.ok, problems)
		}
	}
}

// TestDocSizes holds the README and the benchmarks page to what a reader
// reads through (issue 35): 250 and 600 lines.
func TestDocSizes(t *testing.T) {
	for file, max := range map[string]int{"README.md": 250, "docs/benchmarks.md": 600} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > max {
			t.Errorf("%s has %d lines, more than %d: move the detail into a page of docs/", file, n, max)
		}
	}
}

// TestQuotedFigures: a ratio the README or a page of the guide quotes
// ("11.7–14.2×") is one that docs/benchmarks.md (or a page split off it,
// docs/benchmarks-*.md) records: the same range, or
// each end of it as a ratio or a range end of its own. Generated pages quote
// no measurement and are left out.
func TestQuotedFigures(t *testing.T) {
	// The record: docs/benchmarks.md and the pages split off it
	// (docs/benchmarks-*.md).
	records, err := filepath.Glob(filepath.Join(root, "docs", "benchmarks*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var bench []byte
	for _, r := range records {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		bench = append(append(bench, b...), '\n')
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	ratio := regexp.MustCompile(`(\d+(?:\.\d+)?)(?:–(\d+(?:\.\d+)?))?×`)
	quoted := 0
	for _, page := range pages {
		switch base := filepath.Base(page); {
		case strings.HasPrefix(base, "benchmarks"), base == "configuration.md", base == "smtp-replies.md":
			continue
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ratio.FindAllStringSubmatch(string(b), -1) {
			quoted++
			if bytes.Contains(bench, []byte(m[0])) {
				continue
			}
			for _, n := range m[1:] {
				if n != "" && !regexp.MustCompile(`(^|[^\d.])`+regexp.QuoteMeta(n)+`[×–]`).Match(bench) {
					t.Errorf("%s quotes %s; docs/benchmarks.md records no %s×", filepath.Base(page), m[0], n)
				}
			}
		}
	}
	if quoted == 0 {
		t.Fatal("no page quotes a ratio: the pattern no longer matches how figures are written")
	}
}

// TestRESTAPIRoutes: every route of the OpenAPI document is on
// docs/rest-api.md, written as "`METHOD /path`".
func TestRESTAPIRoutes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "internal/restapi/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs/rest-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	routes := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
			default:
				continue // parameters, summary: not operations
			}
			routes++
			want := "`" + strings.ToUpper(method) + " " + path + "`"
			if !bytes.Contains(page, []byte(want)) {
				t.Errorf("docs/rest-api.md does not document %s, a route of /openapi.json", want)
			}
		}
	}
	if routes < 10 {
		t.Fatalf("found %d routes in openapi.json only", routes)
	}
}

// TestGeneratedDocs: the generated pages and sections are what their
// generators make now; -update (make guide-docs) rewrites them.
func TestGeneratedDocs(t *testing.T) {
	fields, err := CRDFields(filepath.Join(root, "config/crd/bases"), []string{"EmailList", "Purchase", "Dataset"})
	if err != nil {
		t.Fatal(err)
	}
	checkSection(t, "docs/resources.md", "crd-fields", fields)
	// The configuration reference is this package's until a generator of
	// the configuration type (issue 32) writes the page: a page without
	// this package's marker is that generator's to keep fresh.
	if b, err := os.ReadFile(filepath.Join(root, "docs/configuration.md")); err == nil && !bytes.Contains(b, []byte(configurationMarker)) {
		t.Log("docs/configuration.md is generated elsewhere: not checked here")
		return
	}
	checkFile(t, "docs/configuration.md", configurationPage(t))
}

// checkSection compares the text between a page's generated markers.
func checkSection(t *testing.T, file, name, want string) {
	t.Helper()
	path := filepath.Join(root, file)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- generated:"+name+" begin -->\n", "<!-- generated:"+name+" end -->"
	before, rest, ok := strings.Cut(string(b), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s lacks the markers %q ... %q", file, begin, end)
	}
	got := strings.TrimSuffix(rest, end+after)
	want = strings.TrimPrefix(want, "\n") + "\n"
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the generated section %s is stale; run make guide-docs and commit", file, name)
}

func checkFile(t *testing.T, file, want string) {
	t.Helper()
	path := filepath.Join(root, file)
	b, err := os.ReadFile(path)
	if err != nil && !*update {
		t.Fatal(err)
	}
	if string(b) == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale; run make guide-docs and commit", file)
}

// helpCommands are the binaries and commands whose flags the
// configuration reference lists, with the arguments that print them.
var helpCommands = []struct {
	title, bin string
	args       []string
}{
	{"manager (`cmd/manager`)", "manager", []string{"-help"}},
	{"api (`cmd/api`)", "api", []string{"-help"}},
	{"worker run (`cmd/worker`)", "worker", []string{"run", "-help"}},
	{"worker shard", "worker", []string{"shard", "-help"}},
	{"worker people-import", "worker", []string{"people-import", "-help"}},
	{"worker people-generate", "worker", []string{"people-generate", "-help"}},
}

// configurationPage builds the binaries and renders their -help as the
// configuration reference. They run with an environment of PATH alone, so
// that defaults read from the environment ($WORKER_IMAGE, ...) show as
// their unset value, the same on every machine.
func configurationPage(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/manager", "./cmd/api", "./cmd/worker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var b strings.Builder
	b.WriteString(configurationIntro)
	for _, c := range helpCommands {
		cmd := exec.Command(filepath.Join(bin, c.bin), c.args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, _ := cmd.CombinedOutput() // -help exits 0 or 2: the output is what counts
		flags := ParseHelp(string(out))
		if len(flags) == 0 {
			t.Fatalf("%s %s printed no flags:\n%s", c.bin, strings.Join(c.args, " "), out)
		}
		fmt.Fprintf(&b, "\n## %s\n\n%d flags, from `%s %s`.\n\n%s", c.title, len(flags), c.bin, strings.Join(c.args, " "), FlagTable(flags))
	}
	return b.String()
}

const configurationIntro = `# Configuration reference

` + configurationMarker + `

Every flag of the three binaries, with its default, as the binaries print it (defaults read
from the environment, such as ` + "`$WORKER_IMAGE`" + `, show as unset). What the main flags are for:
[install.md](install.md#the-managers-main-settings) (the manager),
[verification.md](verification.md#the-settings) (verification and politeness),
[rest-api.md](rest-api.md#limits) (the API's limits). The Helm chart sets them from
` + "`values.yaml`" + `. This page is generated (` + "`make guide-docs`" + `); a test fails when it is stale.
`

// configurationMarker marks the configuration reference this package
// generates.
const configurationMarker = "<!-- Generated by internal/kits/docs (make guide-docs) from the binaries' -help; do not edit. -->"

// The commit subject rule holds from this commit on (issue 35): main's
// head when the rule was adopted, and its committer time, for clones too
// shallow to hold it.
const (
	subjectRuleBase     = "12f9a81795a8debd0d62bba5569118771f77c77d"
	subjectRuleBaseTime = 1795919417
	maxSubject          = 72
	minShortShare       = 0.90
)

// TestCommitSubjects: at least 90% of the commits after the rule was
// adopted have a subject of at most 72 characters. In a shallow clone
// without the base commit it checks the commits it has, newer than the
// base; outside a git checkout it has nothing to check.
func TestCommitSubjects(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		skipOutsideCI(t, "no git: nothing to check")
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		skipOutsideCI(t, "not a git checkout: no history to check")
	}
	readHeadFiles(t)
	args := []string{"-C", root, "log", "--format=%ct%x00%s", "HEAD"}
	since := int64(0)
	if exec.Command("git", "-C", root, "cat-file", "-e", subjectRuleBase+"^{commit}").Run() == nil {
		args = append(args, "^"+subjectRuleBase)
	} else {
		since = subjectRuleBaseTime // the base is not here: judge by date
		t.Logf("commit %s is not in this clone: checking the commits newer than it", subjectRuleBase[:12])
	}
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	long, total := checkSubjects(t, string(out), since)
	if total == 0 {
		t.Log("no commits after the base yet")
		return
	}
	if share := float64(total-len(long)) / float64(total); share < minShortShare {
		t.Errorf("%d of %d commit subjects are over %d characters (%.0f%% short, want %.0f%%): %q",
			len(long), total, maxSubject, 100*share, 100*minShortShare, long)
	}
}

// readHeadFiles reads the files that say which commit HEAD is (HEAD, its
// branch's ref, packed-refs): go test caches a passing result until a file
// the test opened changes, and git log's reading of the history is not
// such a file, so without this a new commit would not run the test again.
func readHeadFiles(t *testing.T) {
	paths := []string{"HEAD", "packed-refs"}
	if ref, err := exec.Command("git", "-C", root, "symbolic-ref", "-q", "HEAD").Output(); err == nil {
		paths = append(paths, strings.TrimSpace(string(ref)))
	}
	for _, p := range paths {
		out, err := exec.Command("git", "-C", root, "rev-parse", "--git-path", p).Output()
		if err != nil {
			t.Fatalf("git rev-parse --git-path %s: %v", p, err)
		}
		path := strings.TrimSpace(string(out))
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		_, _ = os.ReadFile(path) // a missing file (no packed-refs) is as good a key
	}
}

// checkSubjects counts the commits of git log's "%ct\0%s" lines newer
// than since and returns the subjects longer than maxSubject.
func checkSubjects(t *testing.T, log string, since int64) (long []string, total int) {
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		ts, subject, ok := strings.Cut(line, "\x00")
		if !ok {
			continue
		}
		when, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			t.Fatalf("git log line %q: %v", line, err)
		}
		if when <= since {
			continue
		}
		total++
		if len([]rune(subject)) > maxSubject {
			long = append(long, subject)
		}
	}
	return long, total
}

// skipOutsideCI skips the test, or fails it under CI=true, where CI runs
// on a git checkout and a skip would hide a check that never ran.
func skipOutsideCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (CI=true, so not skipping)")
	}
	t.Skip(why)
}
