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
	// C1 controls, bidirectional controls and line separators: a
	// right-to-left override shows "list\u202Evsc.exe" as "listexe.csv".
	"a\u0080.csv": false, "a\u0085.csv": false, "a\u009f.csv": false, "\u0085a.csv": false,
	"list\u202Evsc.exe": false, "list\u202Evsc.csv": false, "a\u202A.csv": false, "a\u202B.csv": false, "a\u202C.csv": false,
	"a\u202D.csv": false, "a\u2066.csv": false, "a\u2067.csv": false, "a\u2068.csv": false, "a\u2069.csv": false,
	"a\u200E.csv": false, "a\u200F.csv": false, "a\u061C.csv": false, "a\u2028.csv": false, "a\u2029.csv": false,
	"\u202Ea.csv": false,
	// Neighbours that stay allowed: Arabic and Hebrew letters, a zero-width
	// joiner (emoji), the non-breaking space, U+00A0 after the C1 range.
	"قائمة.csv": true, "רשימה.csv": true, "a\u200Db.csv": true, "a\u00a0b.csv": true, "a\u2027.csv": true, "a\u206A.csv": true,
}

// A refusal names the character, by code point, and where it is.
func TestCheckFileNameMessages(t *testing.T) {
	for name, want := range map[string]string{
		"list\u202Evsc.exe": `name "list\u202evsc.exe" contains the bidirectional control character U+202E RIGHT-TO-LEFT OVERRIDE at character 5, ` +
			`which can make a name display as another (hiding its real extension): rename the file without it`,
		"a\u0085.csv": `name "a\u0085.csv" contains the control character U+0085 at character 2: rename the file without it`,
		"é\u2028.csv": `name "é\u2028.csv" contains the line separator U+2028 at character 2: rename the file without it`,
		"a\tb.csv":    `name "a\tb.csv" contains the control character U+0009 at character 2: rename the file without it`,
	} {
		if err := CheckFileName(name); err == nil || err.Error() != want {
			t.Errorf("CheckFileName(%q)\n got %v\nwant %s", name, err, want)
		}
	}
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
