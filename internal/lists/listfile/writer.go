package listfile

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Writer writes output rows. Data rows are written from the input's raw
// bytes (WriteRaw), so whatever quoting the user's file had survives
// untouched and nothing is re-encoded in the hot path.
type Writer struct {
	bw    *bufio.Writer
	cw    *countingWriter
	delim byte
	term  string
	err   error
}

// NewWriter returns a Writer using delim between fields and CRLF or LF
// line endings (pass Plan.CRLF to keep the input's line endings).
func NewWriter(w io.Writer, delim byte, crlf bool) *Writer {
	term := "\n"
	if crlf {
		term = "\r\n"
	}
	cw := &countingWriter{w: w}
	return &Writer{bw: bufio.NewWriterSize(cw, 64<<10), cw: cw, delim: delim, term: term}
}

// Written returns the bytes written so far, flushed or still buffered:
// the difference around a WriteRaw is that row's length.
func (w *Writer) Written() int64 { return w.cw.n + int64(w.bw.Buffered()) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFields writes one record of field values, such as the header,
// quoting a field when it contains the delimiter, a quote, CR or LF.
func (w *Writer) WriteFields(fields []string) error {
	if w.err != nil {
		return w.err
	}
	if len(fields) == 1 && fields[0] == "" {
		// An empty line would be read back as a blank line, not a record.
		w.bw.WriteString(`""`)
	}
	for i, f := range fields {
		if i > 0 {
			w.bw.WriteByte(w.delim)
		}
		w.writeField(f)
	}
	_, w.err = w.bw.WriteString(w.term)
	return w.err
}

// WriteFieldsEscaped is WriteFields with every field formula-escaped
// (EscapeFormula) and an escaped field always quoted: for a header whose
// input names are escaped (escapeFormulas).
func (w *Writer) WriteFieldsEscaped(fields []string) error {
	if w.err != nil {
		return w.err
	}
	if len(fields) == 1 && fields[0] == "" {
		w.bw.WriteString(`""`)
	}
	for i, f := range fields {
		if i > 0 {
			w.bw.WriteByte(w.delim)
		}
		_, w.err = w.bw.Write(w.appendEscaped(w.bw.AvailableBuffer(), f))
	}
	if w.err == nil {
		_, w.err = w.bw.WriteString(w.term)
	}
	return w.err
}

// WriteRaw writes an input record unchanged, then width-nfields empty
// fields (so appended columns line up on ragged rows), then the extra
// fields, then the line terminator. The extra fields are the service's
// columns: they are formula-escaped (EscapeFormula; an escaped field is
// always quoted) and quoted as needed, so no value the service writes is
// read as a formula by a spreadsheet. The row is appended
// in the buffer's free space and written once: a bufio call per field
// (eight a row) was most of this function's cost.
func (w *Writer) WriteRaw(raw []byte, nfields, width int, extra []string) error {
	if w.err != nil {
		return w.err
	}
	n := len(raw) + max(width-nfields, 0) + len(w.term) + 2
	for _, f := range extra {
		n += 4 + 2*len(f) // escaped, quoted, every quote doubled at worst
	}
	if w.bw.Available() < n {
		if w.err = w.bw.Flush(); w.err != nil {
			return w.err
		}
	}
	b := w.bw.AvailableBuffer() // quoting or a long row may outgrow it: append copies
	if len(raw) == 0 && width <= 1 && len(extra) == 0 {
		b = append(b, `""`...) // keep an empty record from becoming a blank line
	} else {
		b = append(b, raw...)
	}
	for i := nfields; i < width; i++ {
		b = append(b, w.delim)
	}
	for _, f := range extra {
		b = append(b, w.delim)
		b = w.appendEscaped(b, f)
	}
	b = append(b, w.term...)
	_, w.err = w.bw.Write(b)
	return w.err
}

// appendEscaped appends f formula-escaped: a field that needs it gets a
// leading single quote and is quoted whatever it holds (OWASP: prefix the
// quote and wrap the cell in double quotes); others as appendField.
func (w *Writer) appendEscaped(b []byte, f string) []byte {
	if !NeedsFormulaEscape(f) {
		return w.appendField(b, f)
	}
	return AppendFormulaEscaped(b, f)
}

// AppendFormulaEscaped appends f escaped (a leading single quote) and
// quoted, whatever it holds: the form of a cell that NeedsFormulaEscape.
func AppendFormulaEscaped(b []byte, f string) []byte {
	return appendQuoted(append(b, '"', '\''), f)
}

// appendQuoted appends f with every quote doubled, then a closing quote.
func appendQuoted(b []byte, f string) []byte {
	for {
		i := strings.IndexByte(f, '"')
		if i < 0 {
			break
		}
		b = append(b, f[:i+1]...)
		b = append(b, '"')
		f = f[i+1:]
	}
	return append(append(b, f...), '"')
}

// appendField is writeField into b.
func (w *Writer) appendField(b []byte, f string) []byte {
	if !w.needsQuotes(f) {
		return append(b, f...)
	}
	return appendQuoted(append(b, '"'), f)
}

func (w *Writer) writeField(f string) {
	if !w.needsQuotes(f) {
		w.bw.WriteString(f)
		return
	}
	w.bw.WriteByte('"')
	for {
		i := strings.IndexByte(f, '"')
		if i < 0 {
			break
		}
		w.bw.WriteString(f[:i+1])
		w.bw.WriteByte('"')
		f = f[i+1:]
	}
	w.bw.WriteString(f)
	w.bw.WriteByte('"')
}

func (w *Writer) needsQuotes(f string) bool {
	for i := 0; i < len(f); i++ {
		switch c := f[i]; c {
		case '"', '\r', '\n', w.delim:
			return true
		}
	}
	return false
}

// Flush writes buffered data to the underlying writer; call it before
// closing or handing the output on.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.bw.Flush()
	return w.err
}

// SynthesizeHeader returns an output header for an input without one: one
// name per input column, "email" for the email column and "column_<n>"
// (1-based) for the others, so output columns are always named. It returns
// max(width, emailColumn) names.
func SynthesizeHeader(width, emailColumn int) []string {
	h := make([]string, max(width, emailColumn, 0))
	for i := range h {
		if i+1 == emailColumn {
			h[i] = "email"
		} else {
			h[i] = "column_" + strconv.Itoa(i+1)
		}
	}
	return h
}

// PadHeader returns a copy of an input header extended to width names with
// "column_<n>", for files whose data rows are wider than their header.
func PadHeader(header []string, width int) []string {
	h := make([]string, max(width, len(header)))
	copy(h, header)
	for i := len(header); i < len(h); i++ {
		h[i] = "column_" + strconv.Itoa(i+1)
	}
	return h
}
