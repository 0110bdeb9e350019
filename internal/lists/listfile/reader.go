package listfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
)

const (
	initialBufSize = 64 << 10
	maxEmptyReads  = 100
)

// testBufSize, when set by a test, replaces initialBufSize so that tests
// and fuzzing exercise buffer refills and growth on small inputs.
var testBufSize int

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Line terminator of the last parsed record.
const (
	termNone = iota
	termLF
	termCRLF
)

// Result of parsing one record from the buffer.
type parseStatus int

const (
	parseOK           parseStatus = iota
	parseMore                     // the record does not end within the buffer
	parseUnterminated             // EOF inside a quoted field
)

// Reader streams records from a plain delimited stream: a whole file
// ([NewReader]) or one shard's byte range ([NewRangeReader],
// [NewShardReader]). It does its own buffering and hands out records that
// alias its buffer, so the hot path does not allocate.
type Reader struct {
	src       io.Reader
	d         Dialect
	maxRec    int
	buf       []byte
	r, w      int   // unread data is buf[r:w]
	base      int64 // input offset of buf[0]
	line      int64 // physical line of buf[r]
	eof       bool  // src is exhausted
	err       error // sticky error
	skipBOM   bool
	started   bool
	countOnly bool // Scan: count fields, don't locate them
	term      int  // terminator of the last record
	bufSize   int  // initial buffer size
	rec       Record
}

// Record is one record of the input. It is reused by the next call to
// Reader.Next, so copy what must outlive it.
type Record struct {
	// Raw is the record's bytes exactly as in the input, without its line
	// terminator, so output can reproduce the input byte for byte.
	Raw []byte
	// Line is the 1-based physical line where the record starts (absolute
	// for NewShardReader, else relative to the reader's start).
	Line int64
	// Offset is the input offset of the record's first byte (absolute for
	// NewRangeReader and NewShardReader).
	Offset int64

	ends    []int // ends[i] is the end of field i in Raw
	nfields int
	scratch []byte // unquoted values of quoted fields
}

// NewReader reads a whole file from its first byte. A leading UTF-8 BOM is
// skipped. With Dialect.Header the header is returned as the first record.
func NewReader(r io.Reader, d Dialect, lim Limits) *Reader {
	rd := newReader(r, d, lim, 0, 1)
	rd.skipBOM = true
	return rd
}

// NewRangeReader reads a byte range of a file that starts at a record start
// (such as a Shard's Start), so no BOM is stripped. start and firstLine are
// the range's input offset and 1-based line number, used for Record.Offset,
// Record.Line and error messages.
func NewRangeReader(r io.Reader, d Dialect, lim Limits, start, firstLine int64) *Reader {
	if firstLine < 1 {
		firstLine = 1
	}
	return newReader(r, d, lim, start, firstLine)
}

// NewShardReader reads one shard of a plan from the plain file ra, which is
// how a worker processes its part of a list independently of the others.
func NewShardReader(ra io.ReaderAt, d Dialect, lim Limits, sh Shard) *Reader {
	size := sh.End - sh.Start
	r := NewRangeReader(io.NewSectionReader(ra, sh.Start, size), d, lim, sh.Start, sh.FirstLine)
	if size >= 0 && size < int64(r.bufSize) {
		r.bufSize = min(r.bufSize, max(int(size)+1, 64)) // small shards need no 64 KiB buffer
	}
	return r
}

func newReader(r io.Reader, d Dialect, lim Limits, start, line int64) *Reader {
	return &Reader{
		src:     r,
		d:       d,
		maxRec:  lim.maxRecord(),
		base:    start,
		line:    line,
		bufSize: cmp.Or(testBufSize, initialBufSize),
	}
}

// Next returns the next record, or io.EOF at the end of the input. Blank
// lines are skipped. The returned Record is reused by the next call. Errors
// about the content are *InputError; any error is sticky.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.started {
		r.started = true
		if err := r.d.check(); err != nil {
			r.err = err
			return nil, err
		}
		r.buf = make([]byte, r.bufSize)
	}
	for {
		if r.skipBOM { // only before the first record of a whole file
			if r.w-r.r < len(utf8BOM) && !r.eof {
				if err := r.fill(); err != nil {
					return nil, err
				}
				continue
			}
			r.skipBOM = false
			if bytes.HasPrefix(r.buf[r.r:r.w], utf8BOM) {
				r.r += len(utf8BOM)
			}
		}
		b := r.buf[r.r:r.w]
		if len(b) == 0 {
			if r.eof {
				r.err = io.EOF
				return nil, io.EOF
			}
			if err := r.fill(); err != nil {
				return nil, err
			}
			continue
		}
		// Blank lines are not records.
		switch b[0] {
		case '\n':
			r.r++
			r.line++
			continue
		case '\r':
			if len(b) == 1 && !r.eof {
				if err := r.fill(); err != nil {
					return nil, err
				}
				continue
			}
			if len(b) > 1 && b[1] == '\n' {
				r.r += 2
				r.line++
				continue
			}
		}
		n, adv, nl, st := r.parse(b)
		switch st {
		case parseOK:
			if n > r.maxRec {
				return nil, r.fail(r.tooLarge(b))
			}
			rec := &r.rec
			rec.Raw = b[:n:n]
			rec.Line = r.line
			rec.Offset = r.base + int64(r.r)
			rec.scratch = rec.scratch[:0]
			r.r += adv
			r.line += nl
			return rec, nil
		case parseMore:
			if len(b) > r.maxRec+1 {
				return nil, r.fail(r.tooLarge(b))
			}
			if err := r.fill(); err != nil {
				return nil, err
			}
		case parseUnterminated:
			if len(b) > r.maxRec {
				return nil, r.fail(r.tooLarge(b))
			}
			line := r.line + nl
			return nil, r.fail(inputErr(ErrUnterminatedQuote, line, -1,
				fmt.Sprintf("unterminated quoted field: the quote opened on line %d is never closed", line)))
		}
	}
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

func (r *Reader) tooLarge(b []byte) error {
	msg := fmt.Sprintf("the record on line %d is larger than the limit of %d bytes", r.line, r.maxRec)
	if i := bytes.IndexByte(b, '\r'); i >= 0 && i+1 < len(b) && b[i+1] != '\n' &&
		bytes.IndexByte(b[:r.maxRec], '\n') < 0 {
		msg += " (the file seems to use bare CR line endings, which are not supported: save it with LF or CRLF line endings)"
	}
	return inputErr(ErrRecordTooLarge, r.line, r.base+int64(r.r), msg)
}

// fill reads more input after the unread data, compacting and growing the
// buffer as needed. It reads until the buffer is full or the input ends, so
// where records fall in the buffer does not depend on how the source chunks
// its reads (which keeps Scan and Reader errors identical).
func (r *Reader) fill() error {
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.base += int64(r.r)
		r.r = 0
	}
	if free := len(r.buf) - r.w; free == 0 || free < len(r.buf)/2 {
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	start := r.w
	empty := 0
	var rerr error
	for r.w < len(r.buf) && !r.eof {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			rerr = errors.New("listfile: invalid read count from source")
			break
		}
		r.w += n
		if err == io.EOF {
			r.eof = true
			break
		}
		if err != nil {
			rerr = err
			break
		}
		if n == 0 {
			if empty++; empty >= maxEmptyReads {
				rerr = io.ErrNoProgress
				break
			}
		}
	}
	if i := bytes.IndexByte(r.buf[start:r.w], 0); i >= 0 {
		pos := start + i
		off := r.base + int64(pos)
		line := r.line + int64(bytes.Count(r.buf[r.r:pos], []byte{'\n'}))
		return r.fail(inputErr(ErrBinary, line, off,
			fmt.Sprintf("binary data: NUL byte at offset %d (line %d); the file must be delimited text", off, line)))
	}
	if rerr != nil {
		var ie *InputError
		if !errors.As(rerr, &ie) {
			rerr = fmt.Errorf("listfile: reading input: %w", rerr)
		}
		return r.fail(rerr)
	}
	return nil
}

// parse finds the record starting at b[0]. It returns the raw length n, the
// bytes to consume adv (record plus terminator), the number of line feeds
// consumed nl, and a status. For parseUnterminated, nl is the number of
// line feeds before the opening quote. It also records the field layout in
// r.rec.
//
// This is the single definition of the format, shared by Scan and Reader.
func (r *Reader) parse(b []byte) (n, adv int, nl int64, st parseStatus) {
	nlPos := bytes.IndexByte(b, '\n')
	line := b
	if nlPos >= 0 {
		line = b[:nlPos]
	} else if !r.eof {
		return 0, 0, 0, parseMore
	}
	if bytes.IndexByte(line, '"') >= 0 {
		return r.parseQuoted(b, nlPos)
	}
	// Fast path: no quote before the end of the line.
	n = len(line)
	adv = n
	r.term = termNone
	if nlPos >= 0 {
		adv++
		nl = 1
		r.term = termLF
		if n > 0 && line[n-1] == '\r' {
			n--
			r.term = termCRLF
		}
	}
	raw := line[:n]
	rec := &r.rec
	if r.countOnly {
		rec.nfields = bytes.Count(raw, []byte{r.d.Delimiter}) + 1
		return n, adv, nl, parseOK
	}
	delim := r.d.Delimiter
	ends := rec.ends[:0]
	for off := 0; ; {
		i := bytes.IndexByte(raw[off:], delim)
		if i < 0 {
			break
		}
		off += i
		ends = append(ends, off)
		off++
	}
	ends = append(ends, n)
	rec.ends = ends
	rec.nfields = len(ends)
	return n, adv, nl, parseOK
}

// parseQuoted is the general state machine, used when the first line of
// the record contains a quote. nlPos is the first '\n' in b or -1.
func (r *Reader) parseQuoted(b []byte, nlPos int) (n, adv int, nl int64, st parseStatus) {
	delim := r.d.Delimiter
	ends := r.rec.ends[:0]
	i := 0
	for {
		// i is the start of a field.
		if i < len(b) && b[i] == '"' {
			quoteNL := nl
			j := i + 1
			for {
				k := bytes.IndexByte(b[j:], '"')
				if k < 0 {
					if r.eof {
						return 0, 0, quoteNL, parseUnterminated
					}
					return 0, 0, 0, parseMore
				}
				nl += int64(bytes.Count(b[j:j+k], []byte{'\n'}))
				j += k + 1
				if j < len(b) {
					if b[j] == '"' { // doubled quote
						j++
						continue
					}
					break
				}
				if !r.eof { // the next byte could be a second quote
					return 0, 0, 0, parseMore
				}
				break
			}
			i = j
			if nlPos >= 0 && nlPos < i {
				nlPos = bytes.IndexByte(b[i:], '\n')
				if nlPos >= 0 {
					nlPos += i
				}
			}
		}
		// Unquoted field, or the text after a closing quote: it runs to
		// the next delimiter or line feed, and quotes in it are literal.
		seg := b[i:]
		if nlPos >= 0 {
			seg = b[i:nlPos]
		}
		if k := bytes.IndexByte(seg, delim); k >= 0 {
			ends = append(ends, i+k)
			i += k + 1
			continue
		}
		if nlPos < 0 {
			if !r.eof {
				return 0, 0, 0, parseMore
			}
			n = len(b)
			adv = n
			r.term = termNone
		} else {
			n = nlPos
			adv = nlPos + 1
			nl++
			r.term = termLF
			if n > i && b[n-1] == '\r' {
				n--
				r.term = termCRLF
			}
		}
		ends = append(ends, n)
		r.rec.ends = ends
		r.rec.nfields = len(ends)
		return n, adv, nl, parseOK
	}
}

// NumFields returns the number of fields of the record (at least 1).
func (r *Record) NumFields() int { return r.nfields }

// FieldBytes returns the unquoted value of the 0-based field i, or nil when
// the record has fewer fields. It does not allocate for unquoted fields
// and for quoted fields without doubled quotes or trailing text. The result
// aliases the record and is valid until the next call to Reader.Next.
func (r *Record) FieldBytes(i int) []byte {
	if i < 0 || i >= len(r.ends) {
		return nil
	}
	start := 0
	if i > 0 {
		start = r.ends[i-1] + 1
	}
	f := r.Raw[start:r.ends[i]]
	if len(f) == 0 || f[0] != '"' {
		return f
	}
	// Quoted field: find the closing quote, undoubling quotes.
	body := f[1:]
	k := bytes.IndexByte(body, '"')
	if k < 0 { // cannot happen for a parsed record; be lenient
		return body
	}
	if k+1 == len(body) { // "value" – the common case
		return body[:k]
	}
	out := r.scratch
	start = len(out)
	for {
		k := bytes.IndexByte(body, '"')
		if k < 0 {
			out = append(out, body...)
			break
		}
		out = append(out, body[:k]...)
		body = body[k+1:]
		if len(body) > 0 && body[0] == '"' {
			out = append(out, '"')
			body = body[1:]
			continue
		}
		out = append(out, body...) // text after the closing quote, literal
		break
	}
	r.scratch = out
	return out[start:len(out):len(out)]
}

// Field returns the unquoted value of the 0-based field i, or "" when the
// record has fewer fields. It allocates; FieldBytes does not.
func (r *Record) Field(i int) string { return string(r.FieldBytes(i)) }

// Fields returns all field values as strings, for headers and tests.
func (r *Record) Fields() []string {
	out := make([]string, len(r.ends))
	for i := range out {
		out[i] = r.Field(i)
	}
	return out
}
