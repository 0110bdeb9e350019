package listfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The file-name rule of a list: the REST API's name parameter and the
// uploaded file's own name, the EmailList's spec.format.name (the CRD's
// pattern and lengths, which a test of the API types checks against these)
// and the result file's name all follow it. A name is a plain file name: no
// directory, no control character (C0, DEL or C1), no bidirectional
// control or line separator, not hidden (a leading dot: ".csv" names no
// file), ending in one of the supported extensions.
//
// Bidirectional controls are refused rather than stripped: a right-to-left
// override makes "list\u202Evsc.exe" show as "listexe.csv", so a name
// holding one is a disguise, and a silently edited name would be one the
// user never gave (the result file carries it). A refusal says which
// character and where, so the user can rename the file.
const (
	// MaxFileNameLength is the longest name, in characters (as the CRD's
	// maxLength counts them).
	MaxFileNameLength = 255
	// FileNamePattern is the rule as the CRD's pattern (Go regexp syntax,
	// which the API server uses), beside CheckFileName's length check.
	FileNamePattern = `(?i)^[^./\\` + unsafeClass + `][^/\\` + unsafeClass + `]*\.(csv|txt|zip)$`
	// unsafeClass is the characters no name holds, in a character class:
	// C0 and DEL ([:cntrl:] is ASCII only in Go), C1, the Unicode
	// Bidi_Control characters (ALM, LRM, RLM, LRE, RLE, PDF, LRO, RLO,
	// LRI, RLI, FSI, PDI) and the line and paragraph separators.
	unsafeClass = `[:cntrl:]\x{80}-\x{9f}\x{61c}\x{200e}\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}`
)

// CheckFileName applies the file-name rule. Its messages start with
// "name", for the REST API to pass on.
func CheckFileName(name string) error {
	q := quoteName(name)
	switch {
	case utf8.RuneCountInString(name) > MaxFileNameLength:
		return fmt.Errorf("name is longer than %d characters", MaxFileNameLength)
	case !utf8.ValidString(name):
		return errors.New("name is not valid UTF-8")
	}
	if i := strings.IndexFunc(name, unsafeRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		what, why := describeUnsafe(r)
		return fmt.Errorf("name %s contains %s at character %d%s: rename the file without it", q, what, utf8.RuneCountInString(name[:i])+1, why)
	}
	switch {
	case name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, "."):
		return fmt.Errorf("name %s must be a plain file name, not starting with a dot", q)
	}
	if _, err := KindOf(name); err != nil {
		return fmt.Errorf("name %s must end in .txt, .csv or .zip", q)
	}
	return nil
}

// unsafeRune matches the characters of unsafeClass.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// bidiNames name the Bidi_Control characters for messages.
var bidiNames = map[rune]string{
	0x061C: "ARABIC LETTER MARK", 0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE", 0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
}

// describeUnsafe says what an unsafe character is, by code point, and
// why it is refused when that is not plain.
func describeUnsafe(r rune) (what, why string) {
	switch {
	case bidiNames[r] != "":
		return fmt.Sprintf("the bidirectional control character U+%04X %s", r, bidiNames[r]),
			", which can make a name display as another (hiding its real extension)"
	case r == '\u2028' || r == '\u2029':
		return fmt.Sprintf("the line separator U+%04X", r), ""
	default:
		return fmt.Sprintf("the control character U+%04X", r), ""
	}
}

// quoteName quotes a name for a message, cut to 60 bytes. %q escapes
// every character that is not printable, the unsafe ones included, so the
// quoted name displays as it is.
func quoteName(name string) string {
	if len(name) > 60 {
		name = name[:60] + "..."
	}
	return fmt.Sprintf("%q", name)
}
