package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1alpha1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// migrations is api/config/v1alpha1's table from every old flag to its field.
func migrations() map[string]Migration {
	table := map[string]Migration{}
	for _, f := range v1alpha1.Flags {
		table[f.Flag] = Migration{Field: f.Field, Note: f.Note}
	}
	return table
}

// liveCommands builds the binaries and the local stack and reads the
// flags each command defines from its own -help (the commands are package
// main: their flag sets cannot be built in-process).
func liveCommands(t *testing.T) Commands {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/manager", "./cmd/api", "./cmd/worker", "./hack/localstack")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmds := Commands{}
	for name, args := range map[string][]string{
		"manager":       {"manager", "-help"},
		"api":           {"api", "-help"},
		"worker run":    {"worker", "run", "-help"},
		"worker shard":  {"worker", "shard", "-help"},
		"people-import": {"worker", "people-import", "-help"},
		"localstack":    {"localstack", "-help"},
	} {
		cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, _ := cmd.CombinedOutput() // -help exits 0 or 2
		flags := ParseHelp(string(out))
		if len(flags) == 0 {
			t.Fatalf("%s printed no flags:\n%s", strings.Join(args, " "), out)
		}
		cmds[name] = map[string]bool{}
		for _, f := range flags {
			cmds[name][f.Name] = true
		}
	}
	return cmds
}

// TestNoRemovedFlags: no page of the docs, the README or the chart's notes
// names a flag of ours that its binary no longer defines (issue 32): the
// Configuration field replaces it.
func TestNoRemovedFlags(t *testing.T) {
	cmds := liveCommands(t)
	table := migrations()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := filepath.Glob(filepath.Join(root, "charts", "*", "README.md"))
	notes, _ := filepath.Glob(filepath.Join(root, "charts", "*", "templates", "NOTES.txt"))
	pages = append(append(append(pages, filepath.Join(root, "README.md")), extra...), notes...)
	for _, page := range pages {
		rel, _ := filepath.Rel(root, page)
		if rel == "docs/configuration.md" {
			continue // generated: its migration table names every old flag
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range StaleFlags(rel, string(b), table, cmds) {
			if why, ok := recordedCommands[p.Page+" --"+p.Flag]; ok && strings.Contains(p.Text, why.line) {
				t.Logf("%s (left: %s)", p, why.why)
				continue
			}
			t.Error(p)
		}
	}
}

// recordedCommands are mentions ("page --flag", on a line holding line)
// left on purpose, each with why: a command docs/benchmarks.md records as
// the one that produced dated figures is kept as it was run.
var recordedCommands = map[string]struct{ line, why string }{
	"docs/benchmarks.md --dns-timeout": {"-worker-args --dns-timeout=10s",
		"the command that produced the 2026-11-28/29 fleet figures, kept as it was run; the note below it says how to run it now (hack/compare -set verification.dns.timeout=10s)"},
}

// TestStaleFlags: the checker tells our removed flags from live ones and
// from other tools' flags.
func TestStaleFlags(t *testing.T) {
	table := map[string]Migration{
		"smtp-max-conns-per-host": {Field: "verification.smtp.maxConnsPerHost"},
		"shard-by":                {Field: "pipeline.shardBy"},
		"namespace":               {Field: "namespaces.operator"},
		"log-level":               {Field: "logging.level", Note: "also stays a flag"},
		"in":                      {Note: "stays a flag (worker run)"},
		"fleet-seat":              {Note: "removed: $JOB_COMPLETION_INDEX"},
		"executor":                {Field: "executor.mode"},
		"list-id-configmap":       {Field: "installation.listIDConfigMap"},
	}
	cmds := Commands{
		"manager":      {"log-level": true, "config": true},
		"api":          {"log-level": true, "list-id-configmap": true},
		"worker run":   {"shard-by": true, "in": true},
		"worker shard": {"config": true},
		"localstack":   {"executor": true, "smtp-max-conns-per-host": true},
	}
	for _, tc := range []struct {
		text string
		want string // a substring of the one problem, or "" for none
	}{
		{"Set `--smtp-max-conns-per-host` to 4.", "`verification.smtp.maxConnsPerHost`"},
		{"Set `verification.smtp.maxConnsPerHost` to 4.", ""},
		{"the manager's `--shard-by mx`", "the manager does not define it"},
		{"`worker run --shard-by rows`", ""},
		{"With `--shard-by domain` each row", "only worker run defines it"},
		{"`kubectl get pods --namespace emaildata`", ""},
		{"`--namespace`, the operator's", "`namespaces.operator`"},
		{"```\nhelm install x . \\\n  --namespace emaildata\n```", ""},
		{"```\nbin/manager \\\n  --namespace emaildata\n```", "the manager does not define it"},
		{"`--log-level=debug`", ""},
		{"`--fleet-seat`", "$JOB_COMPLETION_INDEX"},
		{"`worker run --in list.csv`", ""},
		{"make run ARGS=--executor=job", ""},
		{"`make run ARGS=--namespace=x`", "the localstack does not define it"},
		{"`make run ARGS=--smtp-max-conns-per-host=4`", ""},
		{"a--smtp-max-conns-per-host and --unknown-flag", ""},
		{"`go test -run X --executor`", ""},
		{"`manager.leaderElectionID`, `emaildata-manager`; the API takes the same `--list-id-configmap`", ""},
		{"the manager. It takes `--namespace`", "the manager does not define it"},
	} {
		got := StaleFlags("p.md", tc.text, table, cmds)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%q: got %q, want no problem", tc.text, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Message, tc.want)):
			t.Errorf("%q: got %q, want one problem with %q", tc.text, got, tc.want)
		}
	}
}
