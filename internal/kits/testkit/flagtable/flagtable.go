// Package flagtable is a test kit: it holds each binary's flags to the
// Configuration's migration table (api/config/v1alpha1 Flags, the table
// of docs/configuration.md) and to issue 32's bound on how many a binary
// keeps besides --config. The manager, the API, `worker run` and `worker
// shard` test theirs with it.
package flagtable

import (
	"flag"
	"strings"
	"testing"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// MaxFlags is issue 32's bound: at most 12 flags a binary besides
// --config (what differs per process, or is conventional for
// controllers); every setting is the file's.
const MaxFlags = 12

// Check fails t when a flag bound on fs has no row in the migration
// table, or when fs binds none or more than max besides --config.
func Check(t testing.TB, binary string, fs *flag.FlagSet, max int) {
	t.Helper()
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	check(t, binary, names, max)
}

// CheckUsage is Check on the usage a flag set printed (its -h output):
// for commands that bind their flags as they parse.
func CheckUsage(t testing.TB, binary, usage string, max int) {
	t.Helper()
	check(t, binary, Names(usage), max)
}

// Names are the flags a flag set's usage lists (its "  -name" lines).
func Names(usage string) []string {
	var out []string
	for _, line := range strings.Split(usage, "\n") {
		if strings.HasPrefix(line, "  -") {
			out = append(out, strings.TrimPrefix(strings.Fields(line)[0], "-"))
		}
	}
	return out
}

func check(t testing.TB, binary string, names []string, max int) {
	t.Helper()
	known := map[string]bool{}
	for _, f := range cfgv1.Flags {
		known[f.Flag] = true
	}
	n := 0
	for _, name := range names {
		if !known[name] {
			t.Errorf("%s --%s is not in v1alpha1.Flags (the migration table of docs/configuration.md)", binary, name)
		}
		if name != "config" {
			n++
		}
	}
	if n == 0 || n > max {
		t.Errorf("%s: %d flags besides --config %q, want 1 to %d", binary, n, names, max)
	}
}
