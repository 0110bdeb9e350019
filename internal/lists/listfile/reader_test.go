package listfile

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

type wantRec struct {
	fields []string
	raw    string
	line   int64
}

func readAll(t testing.TB, r *Reader) ([]wantRec, error) {
	t.Helper()
	var out []wantRec
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, wantRec{fields: rec.Fields(), raw: string(rec.Raw), line: rec.Line})
	}
}

var comma = Dialect{Delimiter: ',', EmailColumn: 1}

func TestReader(t *testing.T) {
	pipe := Dialect{Delimiter: '|', EmailColumn: 1}
	tab := Dialect{Delimiter: '\t', EmailColumn: 1}
	tests := []struct {
		name string
		in   string
		d    Dialect
		want []wantRec
	}{
		{"simple", "a,b,c\nd,e,f\n", comma, []wantRec{
			{[]string{"a", "b", "c"}, "a,b,c", 1},
			{[]string{"d", "e", "f"}, "d,e,f", 2}}},
		{"no trailing newline", "a,b\nc,d", comma, []wantRec{
			{[]string{"a", "b"}, "a,b", 1},
			{[]string{"c", "d"}, "c,d", 2}}},
		{"CRLF", "a,b\r\nc,d\r\n", comma, []wantRec{
			{[]string{"a", "b"}, "a,b", 1},
			{[]string{"c", "d"}, "c,d", 2}}},
		{"quoted delimiter", `"Smith, John",x@y.z` + "\n", comma, []wantRec{
			{[]string{"Smith, John", "x@y.z"}, `"Smith, John",x@y.z`, 1}}},
		{"doubled quotes", `"say ""hi""",b` + "\n", comma, []wantRec{
			{[]string{`say "hi"`, "b"}, `"say ""hi""",b`, 1}}},
		{"empty quoted", `"",b,""` + "\n", comma, []wantRec{
			{[]string{"", "b", ""}, `"",b,""`, 1}}},
		{"LF inside quotes", "\"a\nb\",c\nd,e\n", comma, []wantRec{
			{[]string{"a\nb", "c"}, "\"a\nb\",c", 1},
			{[]string{"d", "e"}, "d,e", 3}}},
		{"CRLF inside quotes", "\"a\r\nb\",c\r\nd,e\r\n", comma, []wantRec{
			{[]string{"a\r\nb", "c"}, "\"a\r\nb\",c", 1},
			{[]string{"d", "e"}, "d,e", 3}}},
		{"quoted last field then CRLF", "a,\"b\"\r\nc\r\n", comma, []wantRec{
			{[]string{"a", "b"}, "a,\"b\"", 1},
			{[]string{"c"}, "c", 2}}},
		{"lone CR is data", "a\rb,c\nd\n", comma, []wantRec{
			{[]string{"a\rb", "c"}, "a\rb,c", 1},
			{[]string{"d"}, "d", 2}}},
		{"BOM", "\xEF\xBB\xBFemail,name\nx@y.z,X\n", comma, []wantRec{
			{[]string{"email", "name"}, "email,name", 1},
			{[]string{"x@y.z", "X"}, "x@y.z,X", 2}}},
		{"BOM only at start", "a\n\xEF\xBB\xBFb\n", comma, []wantRec{
			{[]string{"a"}, "a", 1},
			{[]string{"\xEF\xBB\xBFb"}, "\xEF\xBB\xBFb", 2}}},
		{"ragged", "a,b,c\nd\ne,f,g,h\n", comma, []wantRec{
			{[]string{"a", "b", "c"}, "a,b,c", 1},
			{[]string{"d"}, "d", 2},
			{[]string{"e", "f", "g", "h"}, "e,f,g,h", 3}}},
		{"blank lines", "\n\r\na\n\n\r\n\nb\n\n", comma, []wantRec{
			{[]string{"a"}, "a", 3},
			{[]string{"b"}, "b", 7}}},
		{"only blank lines", "\n\r\n\n", comma, nil},
		{"empty", "", comma, nil},
		{"delimiters only is a record", ",,\n", comma, []wantRec{
			{[]string{"", "", ""}, ",,", 1}}},
		{"spaces are a record", " \n", comma, []wantRec{
			{[]string{" "}, " ", 1}}},
		{"lazy bare quote", `ab"c,d` + "\n", comma, []wantRec{
			{[]string{`ab"c`, "d"}, `ab"c,d`, 1}}},
		{"text after closing quote", `"ab"c,d` + "\n", comma, []wantRec{
			{[]string{"abc", "d"}, `"ab"c,d`, 1}}},
		{"quote after closing quote is literal", `"ab"c"d,e` + "\n", comma, []wantRec{
			{[]string{`abc"d`, "e"}, `"ab"c"d,e`, 1}}},
		{"space before quote is unquoted", ` "a,b"` + "\n", comma, []wantRec{
			{[]string{` "a`, `b"`}, ` "a,b"`, 1}}},
		{"quoted at EOF", `a,"b"`, comma, []wantRec{
			{[]string{"a", "b"}, `a,"b"`, 1}}},
		{"quoted with CRLF at EOF", "a,\"b\r\n\"", comma, []wantRec{
			{[]string{"a", "b\r\n"}, "a,\"b\r\n\"", 1}}},
		{"CR CR LF keeps one CR", "a\r\r\nb\n", comma, []wantRec{
			{[]string{"a\r"}, "a\r", 1},
			{[]string{"b"}, "b", 2}}},
		{"pipe", "a|\"b|c\"|d\n", pipe, []wantRec{
			{[]string{"a", "b|c", "d"}, "a|\"b|c\"|d", 1}}},
		{"pipe ignores comma", "a,b|c\n", pipe, []wantRec{
			{[]string{"a,b", "c"}, "a,b|c", 1}}},
		{"tab", "a\tb c\t\"d\te\"\n", tab, []wantRec{
			{[]string{"a", "b c", "d\te"}, "a\tb c\t\"d\te\"", 1}}},
		{"header on is just the first record", "email\nx@y.z\n", Dialect{Delimiter: ',', Header: true, EmailColumn: 1}, []wantRec{
			{[]string{"email"}, "email", 1},
			{[]string{"x@y.z"}, "x@y.z", 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Tiny buffers exercise refills, compaction and growth.
			for _, bs := range []int{1, 2, 3, 5} {
				testBufSize = bs
				got, err := readAll(t, NewReader(strings.NewReader(tt.in), tt.d, Limits{}))
				testBufSize = 0
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Errorf("buffer %d:\n got %#v, %v\nwant %#v", bs, got, err, tt.want)
				}
			}
			// The result must not depend on how the source chunks reads.
			for _, src := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tt.in)},
				{"onebyte", iotest.OneByteReader(strings.NewReader(tt.in))},
				{"halfreader", iotest.HalfReader(strings.NewReader(tt.in))},
			} {
				got, err := readAll(t, NewReader(src.r, tt.d, Limits{}))
				if err != nil {
					t.Fatalf("%s: %v", src.name, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s:\n got %#v\nwant %#v", src.name, got, tt.want)
				}
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		lim      Limits
		nrec     int // records returned before the error
		reason   error
		msg      string
		line     int64
		d        Dialect
		skipHalf bool
	}{
		{name: "unterminated", in: "a,b\nc,\"d\ne\n", nrec: 1, reason: ErrUnterminatedQuote,
			msg: "unterminated quoted field: the quote opened on line 2 is never closed", line: 2},
		{name: "unterminated after multiline field", in: "a\n\"x\ny\",\"z\n", nrec: 1, reason: ErrUnterminatedQuote,
			msg: "unterminated quoted field: the quote opened on line 3 is never closed", line: 3},
		{name: "lone quote", in: `"`, reason: ErrUnterminatedQuote,
			msg: "unterminated quoted field: the quote opened on line 1 is never closed", line: 1},
		{name: "NUL", in: "a,b\nc\x00d\n", reason: ErrBinary,
			msg: "binary data: NUL byte at offset 5 (line 2); the file must be delimited text", line: 2},
		{name: "record too large", in: "abc\nabcdefghijk\nab\n", lim: Limits{MaxRecordBytes: 10}, nrec: 1, reason: ErrRecordTooLarge,
			msg: "the record on line 2 is larger than the limit of 10 bytes", line: 2},
		{name: "record at limit is fine then too large", in: "abcdefghij\r\nabcdefghijk", lim: Limits{MaxRecordBytes: 10}, nrec: 1, reason: ErrRecordTooLarge,
			msg: "the record on line 2 is larger than the limit of 10 bytes", line: 2},
		{name: "too large unterminated", in: "a\n\"abcdefghijk", lim: Limits{MaxRecordBytes: 10}, nrec: 1, reason: ErrRecordTooLarge,
			msg: "the record on line 2 is larger than the limit of 10 bytes", line: 2},
		{name: "bare CR hint", in: "abc\rdef\rghi\rjkl", lim: Limits{MaxRecordBytes: 10}, reason: ErrRecordTooLarge,
			msg: "the record on line 1 is larger than the limit of 10 bytes (the file seems to use bare CR line endings, which are not supported: save it with LF or CRLF line endings)", line: 1},
		{name: "bad delimiter", in: "a;b\n", d: Dialect{Delimiter: ';', EmailColumn: 1}, reason: ErrInvalidDialect,
			msg: `unsupported delimiter ';': use comma, pipe or tab`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.d
			if d.Delimiter == 0 {
				d = comma
			}
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, err := readAll(t, NewReader(r, d, tt.lim))
				if len(got) != tt.nrec {
					t.Errorf("got %d records before the error, want %d", len(got), tt.nrec)
				}
				if !errors.Is(err, tt.reason) || !IsBadInput(err) {
					t.Fatalf("err = %v, want reason %v", err, tt.reason)
				}
				if err.Error() != tt.msg {
					t.Errorf("message\n got %q\nwant %q", err.Error(), tt.msg)
				}
				var ie *InputError
				errors.As(err, &ie)
				if ie.Line != tt.line {
					t.Errorf("Line = %d, want %d", ie.Line, tt.line)
				}
			}
		})
	}
}

// A read error from the source is not bad input and is sticky.
func TestReaderIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := NewReader(io.MultiReader(strings.NewReader("a,b\n"), iotest.ErrReader(boom)), comma, Limits{})
	_, err := r.Next()
	if !errors.Is(err, boom) || IsBadInput(err) {
		t.Fatalf("err = %v, want wrapped I/O error", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Fatalf("error not sticky: %v", err2)
	}
}

// Records longer than the initial buffer (and multi-line quoted fields that
// straddle buffer refills) must parse the same.
func TestReaderLargeRecords(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	quoted := `"` + strings.Repeat("y,\n\"\"", 50<<10) + `"`
	in := "a," + big + "\n" + quoted + ",z\r\nlast"
	got, err := readAll(t, NewReader(strings.NewReader(in), comma, Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d records", len(got))
	}
	if got[0].fields[1] != big {
		t.Error("big field mangled")
	}
	if want := strings.Repeat("y,\n\"", 50<<10); got[1].fields[0] != want || got[1].fields[1] != "z" {
		t.Error("quoted field mangled")
	}
	if got[1].line != 2 || got[2].line != 3+(50<<10) {
		t.Errorf("lines = %d, %d", got[1].line, got[2].line)
	}
}

func TestFieldBytes(t *testing.T) {
	r := NewReader(strings.NewReader(`a,"b","c""d","e"f`+"\n"), comma, Limits{})
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.NumFields(); n != 4 {
		t.Fatalf("NumFields = %d", n)
	}
	// Values requested together stay valid.
	c, e := rec.FieldBytes(2), rec.FieldBytes(3)
	if string(c) != `c"d` || string(e) != "ef" {
		t.Errorf("got %q %q", c, e)
	}
	if rec.FieldBytes(4) != nil || rec.Field(9) != "" || rec.FieldBytes(-1) != nil {
		t.Error("out of range field not empty")
	}
	// Unquoted and simply quoted fields alias Raw (no allocation).
	if allocs := testing.AllocsPerRun(100, func() { rec.FieldBytes(0); rec.FieldBytes(1) }); allocs != 0 {
		t.Errorf("FieldBytes allocates %v times", allocs)
	}
}

// The hot loop must not allocate per record.
func TestReaderAllocs(t *testing.T) {
	data := bytes.Repeat([]byte("1,John,\"Doe, Jr\",john@example.com,\"12 \"\"Main\"\" St\"\n"), 5000)
	allocs := testing.AllocsPerRun(5, func() {
		r := NewReader(bytes.NewReader(data), comma, Limits{})
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			_ = rec.FieldBytes(3)
		}
	})
	if allocs > 20 {
		t.Errorf("%v allocations reading 5000 records", allocs)
	}
}

func TestShardReader(t *testing.T) {
	in := "\xEF\xBB\xBFh1,h2\r\na,1\r\n\"b\nb\",2\r\nc,3\r\n"
	// Shard starting at "\"b": offset 3+7+5 = 15, line 3.
	sh := Shard{Start: 15, End: int64(len(in)), FirstLine: 3}
	got, err := readAll(t, NewShardReader(strings.NewReader(in), comma, Limits{}, sh))
	if err != nil {
		t.Fatal(err)
	}
	want := []wantRec{{[]string{"b\nb", "2"}, "\"b\nb\",2", 3}, {[]string{"c", "3"}, "c,3", 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v want %#v", got, want)
	}
}

// A record of exactly MaxRecordBytes is accepted and one byte more is
// not, whatever the terminator and wherever buffer boundaries fall.
func TestReaderLimitBoundary(t *testing.T) {
	defer func() { testBufSize = 0 }()
	for limit := 1; limit <= 6; limit++ {
		rec := strings.Repeat("x", limit)
		quoted := `"` + strings.Repeat("\n", max(limit-2, 0)) + `"`
		for _, term := range []string{"\n", "\r\n", ""} {
			for _, ok := range []string{rec, quoted[:min(len(quoted), limit)]} {
				if len(ok) == 1 && ok == `"` {
					continue
				}
				for bs := 1; bs <= 12; bs++ {
					testBufSize = bs
					in := "a\r\n" + ok + term + "b" + term
					if term == "" {
						in = "a\r\n" + ok
					}
					if _, err := readAll(t, NewReader(strings.NewReader(in), comma, Limits{MaxRecordBytes: limit})); err != nil {
						t.Errorf("limit %d, buffer %d, %q: %v", limit, bs, in, err)
					}
					in = "a\r\n" + ok + "y" + term
					if _, err := readAll(t, NewReader(strings.NewReader(in), comma, Limits{MaxRecordBytes: limit})); !errors.Is(err, ErrRecordTooLarge) {
						t.Errorf("limit %d, buffer %d, %q: err %v, want too large", limit, bs, in, err)
					}
				}
			}
		}
	}
}
