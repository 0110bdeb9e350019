package flagtable

import (
	"flag"
	"fmt"
	"slices"
	"testing"
)

// recorder is a testing.TB that keeps the errors instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		max   int
		errs  int
	}{
		{"known flags within the bound", []string{"config", "leader-elect", "log-level"}, 2, 0},
		{"--config is not counted", []string{"config", "listen"}, 1, 0},
		{"a flag missing from the table", []string{"listen", "no-such-flag"}, 12, 1},
		{"over the bound", []string{"listen", "leader-elect", "log-level"}, 2, 1},
		{"only --config", []string{"config"}, 12, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			for _, n := range tc.flags {
				fs.Bool(n, false, "")
			}
			r := &recorder{TB: t}
			Check(r, "x", fs, tc.max)
			if len(r.errs) != tc.errs {
				t.Errorf("errors %q, want %d", r.errs, tc.errs)
			}
		})
	}
}

func TestNames(t *testing.T) {
	usage := "usage: x\n\nflags:\n  -config string\n    \tthe file\n  -index int\n    \tshard (default -1)\n"
	if got := Names(usage); !slices.Equal(got, []string{"config", "index"}) {
		t.Errorf("Names = %q", got)
	}
}
