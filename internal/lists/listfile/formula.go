package listfile

import (
	"strings"
)

// Spreadsheet formulas (CSV injection, OWASP "CSV Injection", CWE-1236).
//
// A spreadsheet that opens a result file reads a cell starting with '=',
// '+', '-' or '@' as a formula, and a leading tab, CR or LF can hide one
// (=HYPERLINK(...) sends the row to a server when clicked; DDE formulas run
// programs). The columns the service writes are always escaped, and a
// list's input cells too when it asks (EmailList
// spec.format.escapeFormulas, the escape_formulas parameter of POST
// /v5/list): a cell that starts with a trigger gets a single quote in
// front and is always written quoted, as OWASP recommends. A spreadsheet
// shows the quote-prefixed cell as the text after the quote and evaluates
// nothing.
//
// The rule has no exceptions: "+12025550143" and "-5" are escaped like
// "=1+1". Telling a phone number or a negative number from a formula means
// parsing cells the way every spreadsheet does ("-2+3+cmd|' /C calc'!A0"
// starts like a number too), and any difference between that parser and
// the spreadsheet's is an injection. The cost is that such cells read as
// text, which for phone numbers is what they are (a spreadsheet would
// otherwise drop the plus sign and evaluate "+1-202" as arithmetic).
//
// Escaping is reversible without ambiguity: a cell that already starts with
// a single quote is escaped too, so in an escaped column the original value
// is the cell with exactly one leading quote removed when it has one
// (UnescapeFormula).

// The first characters a spreadsheet may read as the start of a formula:
// OWASP's list (=, +, -, @, tab, carriage return, line feed), NUL (OWASP
// ASVS 5.0, V1.2.10) and the full-width forms of the four signs (U+FF1D,
// U+FF0B, U+FF0D, U+FF20), which spreadsheets in East Asian locales may
// convert to their ASCII forms on input. Escaping them costs one quote on
// values that rarely start with them. firstByte classifies a cell's first
// byte, so that the check of every cell the service writes is one load.
const (
	asciiFormulaTriggers = "=+-@\t\r\n\x00"
	// fullWidthLead is the first byte of the UTF-8 form of the four
	// full-width triggers.
	fullWidthLead = 0xEF
)

var fullWidthFormulaTriggers = []string{"＝", "＋", "－", "＠"}

// Classes of a cell's first byte.
const (
	plainFirst   = iota
	formulaFirst // an ASCII trigger
	quoteFirst   // the escape character itself
	maybeFirst   // the lead byte of a full-width trigger: look further
)

var firstByte = func() (t [256]uint8) {
	for i := 0; i < len(asciiFormulaTriggers); i++ {
		t[asciiFormulaTriggers[i]] = formulaFirst
	}
	t['\''] = quoteFirst
	t[fullWidthLead] = maybeFirst
	return t
}()

// IsFormula reports whether a spreadsheet may read s as a formula: whether
// it starts with one of the trigger characters.
func IsFormula(s string) bool {
	if s == "" {
		return false
	}
	switch firstByte[s[0]] {
	case formulaFirst:
		return true
	case maybeFirst:
		return fullWidthFormula(s)
	}
	return false
}

// fullWidthFormula reports whether s starts with a full-width trigger.
func fullWidthFormula(s string) bool {
	for _, t := range fullWidthFormulaTriggers {
		if strings.HasPrefix(s, t) {
			return true
		}
	}
	return false
}

// NeedsFormulaEscape reports whether EscapeFormula changes s: s is a
// formula, or starts with the escape character itself (so that unescaping
// stays unambiguous).
func NeedsFormulaEscape(s string) bool {
	if s == "" {
		return false
	}
	switch firstByte[s[0]] {
	case plainFirst:
		return false
	case maybeFirst:
		return fullWidthFormula(s)
	}
	return true
}

// EscapeFormula returns s with a single quote in front when
// NeedsFormulaEscape(s), else s. Writers also quote an escaped cell.
func EscapeFormula(s string) string {
	if NeedsFormulaEscape(s) {
		return "'" + s
	}
	return s
}

// UnescapeFormula inverts EscapeFormula: it removes one leading single
// quote. Apply it to the cells of escaped columns only.
func UnescapeFormula(s string) string { return strings.TrimPrefix(s, "'") }

// RawField returns the 0-based field i exactly as in the input, quotes
// included, or nil when the record has fewer fields. It aliases the record.
func (r *Record) RawField(i int) []byte {
	if i < 0 || i >= len(r.ends) {
		return nil
	}
	start := 0
	if i > 0 {
		start = r.ends[i-1] + 1
	}
	return r.Raw[start:r.ends[i]]
}

// AppendEscaped appends the record's raw bytes to dst with every field
// that needs it formula-escaped (EscapeFormula, quoted); the other fields
// and the delimiters are copied byte for byte. It returns the extended
// slice and whether any field was escaped.
func (r *Record) AppendEscaped(dst []byte) ([]byte, bool) {
	escaped := false
	start := 0
	for i, end := range r.ends {
		if i > 0 {
			dst = append(dst, r.Raw[start-1]) // the delimiter
		}
		if v := r.FieldBytes(i); NeedsFormulaEscape(string(v)) {
			dst = AppendFormulaEscaped(dst, string(v))
			escaped = true
		} else {
			dst = append(dst, r.Raw[start:end]...)
		}
		start = end + 1
	}
	return dst, escaped
}
