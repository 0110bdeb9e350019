package listfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The file-name rule of a list: the REST API's name parameter, the
// EmailList's spec.format.name (the CRD's pattern and lengths, which a test
// of the API types checks against these) and the result file's name all
// follow it. A name is a plain file name: no directory, no control
// character, not hidden (a leading dot: ".csv" names no file), ending in
// one of the supported extensions.
const (
	// MaxFileNameLength is the longest name, in characters (as the CRD's
	// maxLength counts them).
	MaxFileNameLength = 255
	// FileNamePattern is the rule as the CRD's pattern (Go regexp syntax,
	// which the API server uses), beside CheckFileName's length check.
	FileNamePattern = `(?i)^[^./\\[:cntrl:]][^/\\[:cntrl:]]*\.(csv|txt|zip)$`
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
	case strings.ContainsFunc(name, isControl):
		return errors.New("name contains control characters")
	case name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, "."):
		return fmt.Errorf("name %s must be a plain file name, not starting with a dot", q)
	}
	if _, err := KindOf(name); err != nil {
		return fmt.Errorf("name %s must end in .txt, .csv or .zip", q)
	}
	return nil
}

// isControl matches the CRD pattern's [:cntrl:].
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// quoteName quotes a name for a message, cut to 60 bytes.
func quoteName(name string) string {
	if len(name) > 60 {
		name = name[:60] + "..."
	}
	return fmt.Sprintf("%q", name)
}
