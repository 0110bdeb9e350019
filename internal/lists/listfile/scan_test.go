package listfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestScanPlan(t *testing.T) {
	hdr := Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	tests := []struct {
		name string
		in   string
		d    Dialect
		want Plan // Shards checked separately
	}{
		{"BOM and header", "\xEF\xBB\xBFid,email\r\n1,a@b.c\r\n2,d@e.f\r\n", hdr,
			Plan{Size: 31, DataStart: 13, Header: []string{"id", "email"}, Records: 2, MaxFields: 2, CRLF: true}},
		{"header with blank lines before data", "id,email\n\n\n1,a@b.c,x\n", hdr,
			Plan{Size: 21, DataStart: 11, Header: []string{"id", "email"}, Records: 1, MaxFields: 3}},
		{"quoted header", "\"e,mail\",\"na\"\"me\"\nx,y\n", Dialect{Delimiter: ',', Header: true, EmailColumn: 1},
			Plan{Size: 22, DataStart: 18, Header: []string{"e,mail", `na"me`}, Records: 1, MaxFields: 2}},
		{"no header", "a@b.c\nd@e.f,x,y\n\n", Dialect{Delimiter: ',', EmailColumn: 3},
			Plan{Size: 17, DataStart: 0, Records: 2, MaxFields: 3}},
		{"no header BOM", "\xEF\xBB\xBFa@b.c", Dialect{Delimiter: ',', EmailColumn: 1},
			Plan{Size: 8, DataStart: 3, Records: 1, MaxFields: 1}},
		{"leading blank lines", "\r\n\r\na|b\r\n", Dialect{Delimiter: '|', EmailColumn: 2},
			Plan{Size: 9, DataStart: 4, Records: 1, MaxFields: 2, CRLF: true}},
		{"multiline quoted counts once", "\"a\nb\nc\"\td\n", Dialect{Delimiter: '\t', EmailColumn: 2},
			Plan{Size: 10, DataStart: 0, Records: 1, MaxFields: 2}},
		{"stray CR at end of first record is fine", "a,b\r\r\nc,d\n", Dialect{Delimiter: ',', EmailColumn: 2},
			Plan{Size: 10, DataStart: 0, Records: 2, MaxFields: 2, CRLF: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Scan(iotest.HalfReader(strings.NewReader(tt.in)), tt.d, Limits{}, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			got := *p
			got.Shards = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
			checkShards(t, []byte(tt.in), p, tt.d, 4)
		})
	}
}

func TestScanErrors(t *testing.T) {
	hdr := Dialect{Delimiter: ',', Header: true, EmailColumn: 1}
	tests := []struct {
		name   string
		in     string
		d      Dialect
		lim    Limits
		reason error
		msg    string
		line   int64
		offset int64
	}{
		{"empty", "", comma, Limits{}, ErrNoData, "the file has no data rows", 0, -1},
		{"blank lines only", "\n\r\n\n", comma, Limits{}, ErrNoData, "the file has no data rows", 0, -1},
		{"header only", "email,name\r\n", hdr, Limits{}, ErrNoData, "the file has no data rows", 0, -1},
		{"BOM only", "\xEF\xBB\xBF", hdr, Limits{}, ErrNoData, "the file has no data rows", 0, -1},
		{"email column beyond", "a,b,c\nd,e\n", Dialect{Delimiter: ',', EmailColumn: 5}, Limits{}, ErrEmailColumn,
			"email column 5 is beyond the file's 3 columns", 0, -1},
		{"email column beyond one column", "a\n", Dialect{Delimiter: ',', EmailColumn: 2}, Limits{}, ErrEmailColumn,
			"email column 2 is beyond the file's 1 column", 0, -1},
		{"email column beyond, wrong delimiter", "a;b;c\n", Dialect{Delimiter: '|', EmailColumn: 2}, Limits{}, ErrEmailColumn,
			"email column 2 is beyond the file's 1 column", 0, -1},
		{"NUL", "a,b\nc,d\ne\x00\n", comma, Limits{}, ErrBinary,
			"binary data: NUL byte at offset 9 (line 3); the file must be delimited text", 3, 9},
		{"NUL far away", "a,b\n" + strings.Repeat("c,d\n", 100000) + "\x00", comma, Limits{}, ErrBinary,
			"binary data: NUL byte at offset 400004 (line 100002); the file must be delimited text", 100002, 400004},
		{"UTF-16", "\xFF\xFEe\x00m\x00", comma, Limits{}, ErrNotText,
			"the file is UTF-16 encoded text: save it as UTF-8", 0, 0},
		{"xlsx", "PK\x03\x04\x14\x00\x00\x00", comma, Limits{}, ErrNotText,
			"the file is a zip archive or an Excel .xlsx workbook, not delimited text: export it as CSV", 0, 0},
		{"xls", "\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1\x00", comma, Limits{}, ErrNotText,
			"the file is an Excel .xls workbook (or another Office document), not delimited text: export it as CSV", 0, 0},
		{"pdf", "%PDF-1.7\n", comma, Limits{}, ErrNotText, "the file is a PDF document, not delimited text", 0, 0},
		{"gzip", "\x1F\x8B\x08", comma, Limits{}, ErrNotText, "the file is gzip-compressed, not delimited text", 0, 0},
		{"control characters", "a\x01\x02\x03\x04,b\x05\x06\x07\x08\n", comma, Limits{}, ErrNotText,
			"the file does not look like text: 8 of its first 12 bytes are control characters", 0, 0},
		{"unterminated", "email\n\"a@b.c\nx,y\n", comma, Limits{}, ErrUnterminatedQuote,
			"unterminated quoted field: the quote opened on line 2 is never closed", 2, -1},
		{"record too large", "a\nb\n" + strings.Repeat("x", 101) + "\n", comma, Limits{MaxRecordBytes: 100}, ErrRecordTooLarge,
			"the record on line 3 is larger than the limit of 100 bytes", 3, 4},
		{"bare CR", "email\rname\ra@b.c\rX\r", comma, Limits{}, ErrBareCR,
			"line 1 contains a bare carriage return (CR without LF): classic Mac line endings are not supported; save the file with LF or CRLF line endings", 1, 5},
		{"dialect", "a\n", Dialect{Delimiter: ',', EmailColumn: 0}, Limits{}, ErrInvalidDialect,
			"email column must be 1 or greater, got 0", 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Scan(strings.NewReader(tt.in), tt.d, tt.lim, 0, 1)
			if err == nil {
				t.Fatalf("no error; plan %+v", p)
			}
			var ie *InputError
			if !errors.As(err, &ie) || !errors.Is(err, tt.reason) || !IsBadInput(err) {
				t.Fatalf("err = %v (%T), want reason %v", err, err, tt.reason)
			}
			if err.Error() != tt.msg {
				t.Errorf("message\n got %q\nwant %q", err.Error(), tt.msg)
			}
			if ie.Line != tt.line || ie.Offset != tt.offset {
				t.Errorf("line, offset = %d, %d; want %d, %d", ie.Line, ie.Offset, tt.line, tt.offset)
			}
		})
	}
}

func TestScanIOError(t *testing.T) {
	boom := errors.New("network down")
	for _, prefix := range []string{"", "a,b\n", strings.Repeat("a,b\n", 10000)} {
		_, err := Scan(io.MultiReader(strings.NewReader(prefix), iotest.ErrReader(boom)), comma, Limits{}, 0, 1)
		if !errors.Is(err, boom) || IsBadInput(err) {
			t.Errorf("prefix %d bytes: err = %v, want I/O error", len(prefix), err)
		}
	}
}

// fixedRecords returns n records of exactly 10 bytes each ("r0000001\r\n"
// style with LF: 9 chars + LF).
func fixedRecords(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%09d\n", i)
	}
	return b.Bytes()
}

func TestScanShards(t *testing.T) {
	tests := []struct {
		name       string
		data       []byte
		d          Dialect
		shardBytes int64
		maxShards  int
		wantStarts []int64
		wantRows   []int64
	}{
		{"even split", fixedRecords(100), comma, 100, 100,
			[]int64{0, 100, 200, 300, 400, 500, 600, 700, 800, 900},
			[]int64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}},
		{"one shard when small", fixedRecords(5), comma, 1000, 10, []int64{0}, []int64{5}},
		{"default shard size", fixedRecords(5), comma, 0, 10, []int64{0}, []int64{5}},
		{"maxShards caps and grows shards", fixedRecords(100), comma, 10, 4,
			[]int64{0, 250, 500, 750}, []int64{25, 25, 25, 25}},
		{"maxShards 0 means 1", fixedRecords(100), comma, 10, 0, []int64{0}, []int64{100}},
		{"uneven split rounds to records", fixedRecords(10), comma, 35, 100,
			[]int64{0, 30, 70}, []int64{3, 4, 3}},
		{"more shards than records", fixedRecords(3), comma, 1, 100, []int64{0, 10, 20}, []int64{1, 1, 1}},
		{"header excluded", append([]byte("email\n"), fixedRecords(4)...), Dialect{Delimiter: ',', Header: true, EmailColumn: 1}, 20, 10,
			[]int64{6, 26}, []int64{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Scan(bytes.NewReader(tt.data), tt.d, Limits{}, tt.shardBytes, tt.maxShards)
			if err != nil {
				t.Fatal(err)
			}
			var starts, rows []int64
			for _, s := range p.Shards {
				starts = append(starts, s.Start)
				rows = append(rows, s.Rows)
			}
			if !reflect.DeepEqual(starts, tt.wantStarts) || !reflect.DeepEqual(rows, tt.wantRows) {
				t.Errorf("starts %v rows %v; want %v %v", starts, rows, tt.wantStarts, tt.wantRows)
			}
			checkShards(t, tt.data, p, tt.d, tt.maxShards)
		})
	}
}

// A large file with many candidate boundaries exercises thinning; shards
// must stay balanced and capped.
func TestScanShardsLarge(t *testing.T) {
	data := fixedRecords(200000) // 2 MB
	for _, tc := range []struct {
		shardBytes int64
		maxShards  int
		want       int
	}{
		{1000, 8, 8}, {1, 3, 3}, {100000, 1000, 20}, {1 << 30, 10, 1}, {64, 1 << 20, 31250}, {16, 1 << 20, MaxShards},
	} {
		p, err := Scan(bytes.NewReader(data), comma, Limits{}, tc.shardBytes, tc.maxShards)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Shards) != tc.want {
			t.Errorf("shardBytes %d maxShards %d: %d shards, want %d", tc.shardBytes, tc.maxShards, len(p.Shards), tc.want)
		}
		ideal := int64(len(data)) / int64(len(p.Shards))
		for _, s := range p.Shards {
			if size := s.End - s.Start; size < ideal*3/4-10 || size > ideal*5/4+10 {
				t.Errorf("shardBytes %d maxShards %d: shard %d has %d bytes, ideal %d", tc.shardBytes, tc.maxShards, s.Index, size, ideal)
				break
			}
		}
		checkShards(t, data, p, comma, tc.maxShards)
	}
}

// checkShards verifies the covering property: shards are contiguous from
// DataStart to Size, non-empty, and reading each shard yields exactly the
// data records of a whole-file reader, in order, with the same lines and
// offsets.
func checkShards(t testing.TB, data []byte, p *Plan, d Dialect, maxShards int) {
	t.Helper()
	if p.Size != int64(len(data)) {
		t.Fatalf("Size %d, want %d", p.Size, len(data))
	}
	if n := len(p.Shards); n < 1 || n > max(maxShards, 1) {
		t.Fatalf("%d shards with maxShards %d", n, maxShards)
	}
	type rec struct {
		raw          string
		line, offset int64
	}
	var whole []rec
	r := NewReader(bytes.NewReader(data), d, Limits{})
	for {
		rc, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("whole-file reader: %v", err)
		}
		whole = append(whole, rec{string(rc.Raw), rc.Line, rc.Offset})
	}
	if d.Header {
		whole = whole[1:]
	}
	if int64(len(whole)) != p.Records {
		t.Fatalf("plan has %d records, reader %d", p.Records, len(whole))
	}
	var sharded []rec
	next, row := p.DataStart, int64(0)
	for i, s := range p.Shards {
		if s.Index != i || s.Start != next || s.End <= s.Start || s.Rows < 1 || s.FirstRow != row {
			t.Fatalf("bad shard %d: %+v (want start %d, first row %d)", i, s, next, row)
		}
		next, row = s.End, row+s.Rows
		sr := NewShardReader(bytes.NewReader(data), d, Limits{}, s)
		n := int64(0)
		for {
			rc, err := sr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("shard %d: %v", i, err)
			}
			if n == 0 && rc.Line != s.FirstLine {
				t.Fatalf("shard %d first line %d, want %d", i, rc.Line, s.FirstLine)
			}
			sharded = append(sharded, rec{string(rc.Raw), rc.Line, rc.Offset})
			n++
		}
		if n != s.Rows {
			t.Fatalf("shard %d yielded %d rows, plan says %d", i, n, s.Rows)
		}
	}
	if next != p.Size || row != p.Records {
		t.Fatalf("shards end at %d with %d rows; want %d, %d", next, row, p.Size, p.Records)
	}
	if !reflect.DeepEqual(sharded, whole) {
		t.Fatalf("shard readers disagree with the whole-file reader")
	}
}

// The realistic benchmark list: the plan covers it exactly, and the
// pipeline's output reads back with the input fields unchanged and the
// appended columns aligned.
func TestPipelineRealistic(t *testing.T) {
	if testing.Short() {
		t.Skip("16 MB")
	}
	data := benchCSV()
	p, err := Scan(bytes.NewReader(data), benchDialect, Limits{}, 1<<20, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Shards) != 16 || p.MaxFields != 8 || !p.CRLF || p.Header[3] != "email" {
		t.Fatalf("plan: %d shards, %d fields, CRLF %v, header %q", len(p.Shards), p.MaxFields, p.CRLF, p.Header)
	}
	checkShards(t, data, p, benchDialect, 64)

	var out bytes.Buffer
	w := NewWriter(&out, ',', p.CRLF)
	if err := w.WriteFields(append(p.Header, "status", "note, quoted")); err != nil {
		t.Fatal(err)
	}
	in := NewReader(bytes.NewReader(data), benchDialect, Limits{})
	var inputs [][]string
	for {
		rec, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Offset < p.DataStart {
			continue // header
		}
		inputs = append(inputs, rec.Fields())
		if err := w.WriteRaw(rec.Raw, rec.NumFields(), p.MaxFields, []string{"ok", `a "b", c`}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back := NewReader(&out, benchDialect, Limits{})
	hdr, err := back.Next()
	if err != nil || hdr.Field(9) != "note, quoted" {
		t.Fatalf("header %v %v", hdr, err)
	}
	for i, want := range inputs {
		rec, err := back.Next()
		if err != nil {
			t.Fatal(err)
		}
		got := rec.Fields()
		if !reflect.DeepEqual(got[:8], want) || got[8] != "ok" || got[9] != `a "b", c` || len(got) != 10 {
			t.Fatalf("row %d: got %q from %q", i, got, want)
		}
	}
	if _, err := back.Next(); err != io.EOF {
		t.Fatalf("extra output: %v", err)
	}
}

// ScanEach hands over every data record, numbered from 0, with the same
// fields a Reader gives, header or not, quoted or not; its plan is Scan's;
// an error from each stops the scan.
func TestScanEach(t *testing.T) {
	data := "\ufeffid,email,note\r\n1,a@x.com,plain\r\n\r\n2,\"b@x.com\",\"multi\r\nline, with comma\"\r\n3,\"c \"\"q\"\"\",x\r\n4\r\n"
	for _, header := range []bool{true, false} {
		d := Dialect{Delimiter: ',', Header: header, EmailColumn: 2}
		var got []string
		p, err := ScanEach(strings.NewReader(data), d, Limits{}, 0, 4, func(row int64, rec *Record) error {
			got = append(got, fmt.Sprintf("%d:%q", row, rec.FieldBytes(1)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		rd := NewReader(strings.NewReader(data), d, Limits{})
		for row := int64(0); ; {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if header && rec.Line == 1 {
				continue
			}
			want = append(want, fmt.Sprintf("%d:%q", row, rec.FieldBytes(1)))
			row++
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("header=%v: each got %v, want %v", header, got, want)
		}
		plain, err := Scan(strings.NewReader(data), d, Limits{}, 0, 4)
		if err != nil || !reflect.DeepEqual(p, plain) {
			t.Errorf("header=%v: ScanEach plan %+v, Scan plan %+v (%v)", header, p, plain, err)
		}
	}
	stop := errors.New("stop")
	if _, err := ScanEach(strings.NewReader(data), Dialect{Delimiter: ',', EmailColumn: 1}, Limits{}, 0, 4, func(row int64, _ *Record) error {
		if row == 2 {
			return stop
		}
		return nil
	}); err != stop {
		t.Errorf("err %v, want each's error", err)
	}
}
