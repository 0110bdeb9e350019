package listfile

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Dialect says how to read a file. It comes from the user's upload
// settings, so Validate reports problems as bad input. Build it with
// NewDialect (or Validated) where it enters: Scan and Reader then trust it
// instead of checking it again.
type Dialect struct {
	Delimiter   byte   // ',', '|' or '\t'
	Header      bool   // first record is a header
	EmailColumn Column // position of the email column

	// checked records the settings NewDialect validated, so a field
	// changed afterwards is checked again rather than trusted.
	checked checkedDialect
}

type checkedDialect struct {
	delim byte
	col   Column
	ok    bool
}

// NewDialect validates a dialect once, where the user's settings enter, and
// returns it marked as checked.
func NewDialect(delim byte, header bool, col Column) (Dialect, error) {
	return Dialect{Delimiter: delim, Header: header, EmailColumn: col}.Validated()
}

// Validated returns d marked as checked, or Validate's error. A dialect
// already checked is returned as is, without a second check.
func (d Dialect) Validated() (Dialect, error) {
	if d.trusted() {
		return d, nil
	}
	if err := d.Validate(); err != nil {
		return Dialect{}, err
	}
	d.checked = checkedDialect{delim: d.Delimiter, col: d.EmailColumn, ok: true}
	return d, nil
}

// trusted reports whether d came from NewDialect or Validated unchanged.
func (d Dialect) trusted() bool {
	return d.checked == checkedDialect{delim: d.Delimiter, col: d.EmailColumn, ok: true}
}

// check validates a dialect built by hand; one from NewDialect is trusted.
func (d Dialect) check() error {
	if d.trusted() {
		return nil
	}
	return d.Validate()
}

// The email column's rule: the REST API's email_column, the EmailList's
// spec.format.emailColumn (the CRD's minimum and maximum, which a test of
// the API types checks against these) and the worker's --email-column.
const (
	// MaxColumn is the highest column position a user may name.
	MaxColumn = 1000
	// DefaultColumn is the email column of a list that names none.
	DefaultColumn Column = 1
)

// Column is a column's 1-based position, as users give it (the REST API's
// email_column, the EmailList's spec.format.emailColumn, flags) and as
// messages and plans show it. Inside, rows are indexed from 0: Index is the
// one conversion.
type Column int

// Index returns the column's 0-based index in a row.
func (c Column) Index() int { return int(c) - 1 }

// ParseColumn reads a 1-based column position given as text, from 1 to
// MaxColumn. It is where a user's column enters.
func ParseColumn(s string) (Column, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxColumn {
		return 0, fmt.Errorf("column %q must be a whole number from 1 to %d", s, MaxColumn)
	}
	return Column(n), nil
}

// delimiterNames are the separators a list may use, by the names the CRD,
// the REST API and the worker's flags give them.
var delimiterNames = map[string]byte{"comma": ',', "pipe": '|', "tab": '\t'}

// DefaultDelimiter separates the fields of a list that names no delimiter:
// the list API's default, a tab.
const DefaultDelimiter byte = '\t'

// DelimiterNames returns the separators' names, sorted: the values of the
// CRD's delimiter enum.
func DelimiterNames() []string {
	names := make([]string, 0, len(delimiterNames))
	for n := range delimiterNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseDelimiter reads a separator given by name (comma, pipe, tab) or as
// the character itself. It is the one place that knows the separators.
func ParseDelimiter(s string) (byte, error) {
	if b, ok := delimiterNames[s]; ok {
		return b, nil
	}
	if len(s) == 1 && DelimiterName(s[0]) != "" {
		return s[0], nil
	}
	return 0, fmt.Errorf("unsupported delimiter %q: use comma, pipe or tab", s)
}

// DelimiterName returns a separator's name, or "" when b is not one.
func DelimiterName(b byte) string {
	for name, d := range delimiterNames {
		if d == b {
			return name
		}
	}
	return ""
}

// Validate checks the dialect before any byte is read, so a wrong setting
// fails fast with a clear message instead of producing garbage shards.
func (d Dialect) Validate() error {
	if DelimiterName(d.Delimiter) == "" {
		return inputErr(ErrInvalidDialect, 0, -1,
			fmt.Sprintf("unsupported delimiter %q: use comma, pipe or tab", d.Delimiter))
	}
	if d.EmailColumn < 1 {
		return inputErr(ErrInvalidDialect, 0, -1,
			fmt.Sprintf("email column must be 1 or greater, got %d", d.EmailColumn))
	}
	return nil
}

// Kind is the type of an uploaded file, decided by its extension, so the
// controller knows whether to unzip before scanning.
type Kind int

// The supported kinds of upload.
const (
	KindCSV Kind = iota + 1
	KindTXT
	KindZip
)

// String returns the extension of the kind, for logs and messages.
func (k Kind) String() string {
	switch k {
	case KindCSV:
		return ".csv"
	case KindTXT:
		return ".txt"
	case KindZip:
		return ".zip"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// allowedExtensions is used in user-facing messages.
const allowedExtensions = ".csv, .txt, .zip"

// KindOf returns the kind of a file by its extension (case-insensitive), so
// uploads of other types are rejected before any reading with a message
// naming the allowed extensions.
func KindOf(name string) (Kind, error) {
	base := baseName(name)
	ext := strings.ToLower(path.Ext(base))
	switch ext {
	case ".csv":
		return KindCSV, nil
	case ".txt":
		return KindTXT, nil
	case ".zip":
		return KindZip, nil
	case "":
		return 0, inputErr(ErrExtension, 0, -1,
			fmt.Sprintf("file %q has no extension: allowed extensions are %s", base, allowedExtensions))
	}
	return 0, inputErr(ErrExtension, 0, -1,
		fmt.Sprintf("unsupported file type %q: allowed extensions are %s", ext, allowedExtensions))
}

// baseName returns the last element of a path that may use '/' or '\'
// separators (zip files written on Windows use either).
func baseName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		return name[i+1:]
	}
	return name
}

// Defaults applied to zero Limits, so a zero value is safe against hostile
// input. They are also the binaries' defaults (DefaultLimits): the REST API
// checks an upload against the same numbers the manager prepares it with.
const (
	DefaultMaxRecordBytes   = 1 << 20 // 1 MiB
	DefaultMaxExpandedBytes = 2 << 30 // 2 GiB
	// DefaultMaxExpansionRatio: a zip's file may expand to at most 100
	// times the archive's size. Deflate cannot do better than about
	// 1032:1, and list files do far worse: synthetic people rows with 30
	// columns compress 5.5:1, a column of addresses 6:1, and even the
	// most repetitive exports (constant or empty columns) stay within a
	// few tens. So 100 leaves a wide margin for real lists while a bomb
	// buys at most 100 bytes of rows and temporary disk per byte sent
	// (the 203 KB zip that became 11.6 million rows now stops at 20 MB).
	DefaultMaxExpansionRatio = 100
	// RatioFreeBytes is what any zip may expand to whatever its ratio:
	// below 1 MiB the rows and disk a file costs are too few to matter,
	// and tiny, very repetitive test files stay accepted.
	RatioFreeBytes = 1 << 20
)

// DefaultLimits are the limits the API, the manager and the workers start
// with (the Configuration's pipeline.limits defaults).
func DefaultLimits() Limits {
	return Limits{MaxExpandedBytes: DefaultMaxExpandedBytes, MaxRecordBytes: DefaultMaxRecordBytes, MaxExpansionRatio: DefaultMaxExpansionRatio}
}

// Limits bounds the resources hostile input can make us use.
type Limits struct {
	// MaxExpandedBytes caps the uncompressed bytes of a zip's inner file,
	// counted as they are read (headers are not trusted).
	// 0 means DefaultMaxExpandedBytes.
	MaxExpandedBytes int64
	// MaxRecordBytes caps one record (without its line terminator); a
	// larger record is an error, which also bounds the reader's memory.
	// 0 means DefaultMaxRecordBytes; values above 1 GiB count as 1 GiB.
	MaxRecordBytes int
	// MaxExpansionRatio caps a zip's inner file at this many times the
	// archive's size (never below RatioFreeBytes), checked on the size
	// the archive declares when it is opened and on the bytes actually
	// read. 0 means DefaultMaxExpansionRatio; a negative value turns the
	// cap off, for archives the service wrote itself (results).
	MaxExpansionRatio int64
}

// maxRecordCap keeps MaxRecordBytes arithmetic far from overflow.
const maxRecordCap = 1 << 30

func (l Limits) maxRecord() int {
	if l.MaxRecordBytes <= 0 {
		return DefaultMaxRecordBytes
	}
	return min(l.MaxRecordBytes, maxRecordCap)
}

func (l Limits) maxExpanded() int64 {
	if l.MaxExpandedBytes <= 0 {
		return DefaultMaxExpandedBytes
	}
	return l.MaxExpandedBytes
}

// expansionLimit is how far a zip of archiveSize bytes may expand, and
// whether the ratio (rather than MaxExpandedBytes) sets it.
func (l Limits) expansionLimit(archiveSize int64) (limit int64, byRatio bool) {
	limit = l.maxExpanded()
	ratio := l.MaxExpansionRatio
	if ratio == 0 {
		ratio = DefaultMaxExpansionRatio
	}
	if ratio < 0 {
		return limit, false
	}
	byRatioLimit := int64(RatioFreeBytes)
	if archiveSize > 0 && archiveSize <= math.MaxInt64/ratio {
		byRatioLimit = max(byRatioLimit, archiveSize*ratio)
	} else if archiveSize > 0 {
		byRatioLimit = math.MaxInt64
	}
	if byRatioLimit < limit {
		return byRatioLimit, true
	}
	return limit, false
}

// ratioOf is l's effective ratio, for messages.
func (l Limits) ratioOf() int64 {
	if l.MaxExpansionRatio == 0 {
		return DefaultMaxExpansionRatio
	}
	return l.MaxExpansionRatio
}
