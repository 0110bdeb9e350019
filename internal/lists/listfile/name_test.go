package listfile

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// fileNames are names on both sides of the file-name rule.
var fileNames = map[string]bool{
	"a.csv": true, "list.CSV": true, "my list (2).txt": true, "x.y.zip": true, "a..csv": true,
	"café.csv": true, strings.Repeat("é", MaxFileNameLength-4) + ".csv": true,
	".csv": false, "..csv": false, ".hidden.csv": false, "a.exe": false, "csv": false, "": false,
	"a/b.csv": false, `a\b.csv`: false, "../a.csv": false, "a\x00.csv": false, "a\tb.csv": false, "a\x7f.csv": false,
	strings.Repeat("é", MaxFileNameLength-3) + ".csv": false, "a.csv.": false, "a.csv ": false,
}

func TestCheckFileName(t *testing.T) {
	for name, want := range fileNames {
		if err := CheckFileName(name); (err == nil) != want {
			t.Errorf("CheckFileName(%q) = %v, want ok=%v", truncateForLog(name), err, want)
		} else if err != nil && !strings.HasPrefix(err.Error(), "name ") {
			t.Errorf("CheckFileName(%q): message %q does not start with \"name\"", truncateForLog(name), err)
		}
	}
	if err := CheckFileName("a\xff.csv"); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

// FileNamePattern with the length bound is the same rule as CheckFileName
// (the CRD holds the pattern; a test of the API types checks it is this).
func TestFileNamePatternIsTheRule(t *testing.T) {
	re := regexp.MustCompile(FileNamePattern)
	for name, want := range fileNames {
		got := re.MatchString(name) && utf8.RuneCountInString(name) <= MaxFileNameLength
		if got != want {
			t.Errorf("pattern on %q: %v, want %v", truncateForLog(name), got, want)
		}
	}
}

func truncateForLog(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
