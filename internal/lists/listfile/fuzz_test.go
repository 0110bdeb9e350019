package listfile

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"reflect"
	"testing"
)

var fuzzDelims = []byte{',', '|', '\t'}

type fuzzRec struct {
	raw          string
	line, offset int64
	fields       []string
}

func readRecords(r *Reader) ([]fuzzRec, error) {
	var out []fuzzRec
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, fuzzRec{string(rec.Raw), rec.Line, rec.Offset, rec.Fields()})
	}
}

// FuzzScanReader checks that Scan and Reader agree: Scan succeeds iff a
// whole-file Reader does (except for the checks only Scan makes), record
// counts agree, and the shard readers of the plan yield exactly the
// whole-file reader's data records. For RFC 4180 input that encoding/csv
// accepts, fields must match encoding/csv's.
func FuzzScanReader(f *testing.F) {
	seeds := []string{
		"email,name\nx@y.z,X\n",
		"\xEF\xBB\xBFid,email\r\n1,\"a,b\"\r\n2,\"c\"\"d\"\r\n",
		"a|\"b\nc\"|d\n\ne|f",
		"\"ab\"c,d\nx\"y,z\n",
		"\"unterminated\nfoo",
		"a,b\x00c\n",
		"a\rb\rc\n",
		"\n\r\n\r\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i), i%2 == 0, uint8(1+i%3), uint16(0), uint16(1+i*7), uint8(1+i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, delimSel uint8, header bool, emailCol uint8, maxRec uint16, shardBytes uint16, maxShards uint8, bufSel uint8) {
		// Small reader buffers make short inputs cross buffer refills,
		// compaction and growth.
		if bufSel != 0 {
			testBufSize = int(bufSel % 32)
			defer func() { testBufSize = 0 }()
		}
		d := Dialect{Delimiter: fuzzDelims[int(delimSel)%len(fuzzDelims)], Header: header, EmailColumn: Column(1 + int(emailCol%8))}
		lim := Limits{MaxRecordBytes: int(maxRec % 256)} // 0 = default; small limits are the interesting ones
		whole, rerr := readRecords(NewReader(bytes.NewReader(data), d, lim))
		plan, serr := Scan(bytes.NewReader(data), d, lim, int64(shardBytes), int(maxShards))

		if rerr != nil && !IsBadInput(rerr) {
			t.Fatalf("reader error is not bad input: %v", rerr)
		}
		if serr != nil {
			if !IsBadInput(serr) {
				t.Fatalf("scan error is not bad input: %v", serr)
			}
			switch {
			case errors.Is(serr, ErrNotText), errors.Is(serr, ErrBareCR):
				// Checks only Scan makes.
			case errors.Is(serr, ErrNoData):
				if rerr == nil && (len(whole) > 1 || len(whole) == 1 && !header) {
					t.Fatalf("Scan says no data, reader read %d records", len(whole))
				}
			case errors.Is(serr, ErrEmailColumn):
				if rerr != nil {
					t.Fatalf("Scan: %v; reader: %v", serr, rerr)
				}
			default:
				if rerr == nil || rerr.Error() != serr.Error() {
					t.Fatalf("Scan: %v; reader: %v", serr, rerr)
				}
			}
			return
		}
		if rerr != nil {
			t.Fatalf("Scan succeeded, reader failed: %v", rerr)
		}
		// Ground truth from the bytes themselves: Raw is the input at
		// Offset, followed by a terminator, and Line counts line feeds.
		for i, r := range whole {
			end := r.offset + int64(len(r.raw))
			if r.offset < 0 || end > int64(len(data)) || string(data[r.offset:end]) != r.raw {
				t.Fatalf("record %d: Raw %q is not the input at offset %d", i, r.raw, r.offset)
			}
			if rest := data[end:]; len(rest) > 0 && rest[0] != '\n' && !bytes.HasPrefix(rest, []byte("\r\n")) {
				t.Fatalf("record %d: Raw %q followed by %q, not a terminator", i, r.raw, rest[:1])
			}
			if want := 1 + int64(bytes.Count(data[:r.offset], []byte{'\n'})); r.line != want {
				t.Fatalf("record %d: Line %d, want %d", i, r.line, want)
			}
		}
		dataRecs := whole
		if header {
			dataRecs = whole[1:]
			if !reflect.DeepEqual(plan.Header, whole[0].fields) {
				t.Fatalf("header %q, reader %q", plan.Header, whole[0].fields)
			}
		}
		if int64(len(dataRecs)) != plan.Records {
			t.Fatalf("Scan counted %d records, reader %d", plan.Records, len(dataRecs))
		}
		if plan.DataStart != dataRecs[0].offset {
			t.Fatalf("DataStart %d, first data record at %d", plan.DataStart, dataRecs[0].offset)
		}
		maxf := 0
		for _, r := range whole {
			maxf = max(maxf, len(r.fields))
		}
		if maxf != plan.MaxFields {
			t.Fatalf("MaxFields %d, reader %d", plan.MaxFields, maxf)
		}
		checkShards(t, data, plan, d, max(int(maxShards), 1))

		// Differential check against encoding/csv on input both accept
		// with the same meaning: no CR (we keep CRLF inside quotes, it
		// strips it), no BOM, and no NUL (we reject it).
		if bytes.ContainsAny(data, "\r\x00") || bytes.HasPrefix(data, utf8BOM) || maxRec%256 != 0 {
			return
		}
		cr := csv.NewReader(bytes.NewReader(data))
		cr.Comma = rune(d.Delimiter)
		cr.FieldsPerRecord = -1
		want, err := cr.ReadAll()
		if err != nil {
			return
		}
		if len(want) != len(whole) {
			t.Fatalf("encoding/csv read %d records, we read %d", len(want), len(whole))
		}
		for i := range want {
			if !reflect.DeepEqual(want[i], whole[i].fields) {
				t.Fatalf("record %d: encoding/csv %q, we %q", i, want[i], whole[i].fields)
			}
		}
	})
}

// FuzzOpenZip checks that OpenZip never panics, that every failure on an
// in-memory archive is classified as bad input, and that the content
// reader never yields more than the expansion limit.
func FuzzOpenZip(f *testing.F) {
	f.Add(buildZip(f, zipEntry{name: "list.csv", content: "email\nx@y.z\n"}))
	f.Add(buildZip(f, zipEntry{name: "a.csv", content: "x"}, zipEntry{name: "b.txt", content: "y"}))
	f.Add(buildZip(f, zipEntry{name: "../evil.csv", content: "x"}))
	f.Add(buildZip(f, zipEntry{name: "l.txt", content: "stored", method: 0x0}, zipEntry{name: "__MACOSX/._l.txt", content: "j"}))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	// A bomb (2 MiB of zeros in about 2 KB) and the same with headers
	// claiming 10 bytes: the expansion ratio stops both.
	bomb := buildZip(f, zipEntry{name: "bomb.csv", size: 2 << 20})
	f.Add(bomb)
	f.Add(lyingZip(f, bomb, 10))
	f.Fuzz(func(t *testing.T, data []byte) {
		// A small size limit, then the size limit above the ratio's, so
		// that the ratio is what stops a bomb.
		for _, lim := range []Limits{{MaxExpandedBytes: 1 << 16}, {MaxExpandedBytes: 8 << 20}} {
			bound, _ := lim.expansionLimit(int64(len(data)))
			if want := max(RatioFreeBytes, DefaultMaxExpansionRatio*int64(len(data))); bound > lim.MaxExpandedBytes || bound > want {
				t.Fatalf("limit %d for a %d-byte archive (max %d, ratio bound %d)", bound, len(data), lim.MaxExpandedBytes, want)
			}
			fuzzOpenZip(t, data, lim, bound)
		}
	})
}

// fuzzOpenZip opens data: every error is bad input, and no more than
// bound bytes come out.
func fuzzOpenZip(t *testing.T, data []byte, lim Limits, bound int64) {
	name, rc, err := OpenZip(bytes.NewReader(data), int64(len(data)), lim)
	if err != nil {
		if !IsBadInput(err) {
			t.Fatalf("OpenZip error is not bad input: %v", err)
		}
		return
	}
	defer rc.Close()
	if k, err := KindOf(name); err != nil || k == KindZip {
		t.Fatalf("inner name %q accepted", name)
	}
	n, err := io.Copy(io.Discard, rc)
	if n > bound {
		t.Fatalf("read %d bytes past the limit %d", n, bound)
	}
	if err != nil && !IsBadInput(err) {
		t.Fatalf("read error is not bad input: %v", err)
	}
}
