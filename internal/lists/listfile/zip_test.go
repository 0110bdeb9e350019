package listfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

type zipEntry struct {
	name    string
	content string
	method  uint16
	flags   uint16
	size    int // when > 0, content is size zero bytes (zip bomb)
}

func buildZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		method := e.method
		if method == 0 && !strings.HasSuffix(e.name, "/") {
			method = zip.Deflate
		}
		if e.method == 99 { // pretend method: write stored data, then patch the header
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: method, Flags: e.flags})
		if err != nil {
			t.Fatal(err)
		}
		if e.size > 0 {
			chunk := make([]byte, 1<<20)
			for n := e.size; n > 0; n -= len(chunk) {
				if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
					t.Fatal(err)
				}
			}
		} else if _, err := io.WriteString(w, e.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for _, e := range entries {
		if e.method == 99 {
			// Patch the method in both the local and central headers.
			for _, sig := range []string{"PK\x03\x04", "PK\x01\x02"} {
				i := bytes.Index(b, []byte(sig))
				off := 8 // local header: method at 8
				if sig == "PK\x01\x02" {
					off = 10
				}
				b[i+off], b[i+off+1] = 99, 0
			}
		}
	}
	return b
}

func TestOpenZip(t *testing.T) {
	csv := "email\nx@y.z\n"
	tests := []struct {
		name     string
		zip      []byte
		lim      Limits
		wantName string
		reason   error  // error from OpenZip
		readErr  error  // error reading the content
		msg      string // message of either error
	}{
		{name: "good", zip: buildZip(t, zipEntry{name: "list.csv", content: csv}), wantName: "list.csv"},
		{name: "good stored txt in folder", zip: buildZip(t, zipEntry{name: "dir/", content: ""}, zipEntry{name: "dir/List.TXT", content: csv, method: zip.Store}), wantName: "List.TXT"},
		{name: "macOS junk ignored", zip: buildZip(t,
			zipEntry{name: "list.csv", content: csv},
			zipEntry{name: "__MACOSX/", content: ""},
			zipEntry{name: "__MACOSX/._list.csv", content: "junk"},
			zipEntry{name: "._list.csv", content: "junk"},
			zipEntry{name: ".DS_Store", content: "junk"},
			zipEntry{name: "sub/.DS_Store", content: "junk"},
		), wantName: "list.csv"},
		{name: "not a zip", zip: []byte("email\nx@y.z\n"), reason: ErrNotZip, msg: "the file is not a valid zip archive"},
		{name: "empty input", zip: nil, reason: ErrNotZip, msg: "the file is not a valid zip archive"},
		{name: "truncated", zip: buildZip(t, zipEntry{name: "list.csv", content: csv})[:40], reason: ErrNotZip, msg: "the file is not a valid zip archive"},
		{name: "no file", zip: buildZip(t), reason: ErrZipEmpty,
			msg: "the zip archive contains no file: it must contain exactly one .csv or .txt file"},
		{name: "only junk", zip: buildZip(t, zipEntry{name: "d/", content: ""}, zipEntry{name: "__MACOSX/._x.csv", content: "j"}), reason: ErrZipEmpty,
			msg: "the zip archive contains no file: it must contain exactly one .csv or .txt file"},
		{name: "two files", zip: buildZip(t, zipEntry{name: "a.csv", content: csv}, zipEntry{name: "b.csv", content: csv}), reason: ErrZipMultipleFiles,
			msg: `the zip archive contains 2 files ("a.csv", "b.csv"): it must contain exactly one .csv or .txt file`},
		{name: "many files truncated", zip: buildZip(t,
			zipEntry{name: "1.csv"}, zipEntry{name: "2.csv"}, zipEntry{name: "3.csv"}, zipEntry{name: "4.csv"},
			zipEntry{name: strings.Repeat("n", 70) + ".csv"}, zipEntry{name: "6.csv"}, zipEntry{name: "7.csv"}), reason: ErrZipMultipleFiles,
			msg: `the zip archive contains 7 files ("1.csv", "2.csv", "3.csv", "4.csv", "` + strings.Repeat("n", 60) + `…" and 2 more): it must contain exactly one .csv or .txt file`},
		{name: "path traversal", zip: buildZip(t, zipEntry{name: "../evil.csv", content: csv}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "../evil.csv" (absolute path or "..")`},
		{name: "nested traversal", zip: buildZip(t, zipEntry{name: "a/../../evil.csv", content: csv}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "a/../../evil.csv" (absolute path or "..")`},
		{name: "backslash traversal", zip: buildZip(t, zipEntry{name: `..\evil.csv`, content: csv}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "..\\evil.csv" (absolute path or "..")`},
		{name: "traversal hidden in junk", zip: buildZip(t, zipEntry{name: "list.csv", content: csv}, zipEntry{name: "__MACOSX/../../x", content: "j"}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "__MACOSX/../../x" (absolute path or "..")`},
		{name: "absolute", zip: buildZip(t, zipEntry{name: "/etc/list.csv", content: csv}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "/etc/list.csv" (absolute path or "..")`},
		{name: "windows absolute", zip: buildZip(t, zipEntry{name: `C:\list.csv`, content: csv}), reason: ErrZipUnsafePath,
			msg: `the zip archive contains an unsafe file name "C:\\list.csv" (absolute path or "..")`},
		{name: "backslash folder is fine", zip: buildZip(t, zipEntry{name: `folder\list.csv`, content: csv}), wantName: "list.csv"},
		{name: "wrong extension", zip: buildZip(t, zipEntry{name: "list.xlsx", content: "x"}), reason: ErrZipInnerExtension,
			msg: `the file in the zip archive, "list.xlsx", must be a .csv or .txt file`},
		{name: "nested zip", zip: buildZip(t, zipEntry{name: "inner.zip", content: "x"}), reason: ErrZipInnerExtension,
			msg: `the file in the zip archive, "inner.zip", must be a .csv or .txt file`},
		{name: "encrypted", zip: buildZip(t, zipEntry{name: "list.csv", content: csv, flags: 1}), reason: ErrZipEncrypted,
			msg: `the file "list.csv" in the zip archive is encrypted: upload an archive without a password`},
		{name: "unsupported method", zip: buildZip(t, zipEntry{name: "list.csv", content: csv, method: 99}), reason: ErrZipMethod,
			msg: `the file "list.csv" in the zip archive uses compression method 99: only stored and deflated files are supported`},
		{name: "zip bomb", zip: buildZip(t, zipEntry{name: "bomb.csv", size: 64 << 20}), lim: Limits{MaxExpandedBytes: 1 << 20},
			reason: ErrZipTooLarge, msg: "the file in the zip archive expands beyond 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, rc, err := OpenZip(bytes.NewReader(tt.zip), int64(len(tt.zip)), tt.lim)
			if tt.reason != nil {
				if !errors.Is(err, tt.reason) || !IsBadInput(err) {
					t.Fatalf("err = %v, want reason %v", err, tt.reason)
				}
				if err.Error() != tt.msg {
					t.Errorf("message\n got %q\nwant %q", err.Error(), tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if name != tt.wantName {
				t.Errorf("name = %q, want %q", name, tt.wantName)
			}
			got, err := io.ReadAll(rc)
			if err != nil || string(got) != csv {
				t.Errorf("content %q, %v", got, err)
			}
		})
	}
}

// The size recorded in the headers must not be trusted: a bomb whose
// headers claim a tiny size fails while reading, as bad input, without
// producing more than the claimed bytes.
func TestOpenZipLyingHeader(t *testing.T) {
	const limit = 1 << 20
	z := lyingZip(t, buildZip(t, zipEntry{name: "bomb.csv", size: 8 << 20}), 10)
	name, rc, err := OpenZip(bytes.NewReader(z), int64(len(z)), Limits{MaxExpandedBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if name != "bomb.csv" {
		t.Errorf("name %q", name)
	}
	n, err := io.Copy(io.Discard, rc)
	if !IsBadInput(err) || n > limit {
		t.Fatalf("err = %v after %d bytes, want bad input", err, n)
	}
}

// lyingZip is a copy of the one-entry zip z whose central header claims
// size uncompressed bytes.
func lyingZip(t testing.TB, z []byte, size uint32) []byte {
	t.Helper()
	z = bytes.Clone(z)
	i := bytes.LastIndex(z, []byte("PK\x01\x02"))
	if i < 0 {
		t.Fatal("no central header")
	}
	binary.LittleEndian.PutUint32(z[i+24:], size) // the uncompressed size's offset
	return z
}

// A zip's file expands to at most MaxExpansionRatio times the archive,
// checked on the declared size at once and on the bytes read; files up to
// RatioFreeBytes are exempt, and the size limit applies when it is lower.
func TestZipExpansionRatio(t *testing.T) {
	bomb := buildZip(t, zipEntry{name: "bomb.csv", size: 4 << 20}) // about 4 KB
	var rows strings.Builder
	for i := 0; rows.Len() < 3<<20; i++ {
		fmt.Fprintf(&rows, "%d,user%d.%x@example%d.com,%d\n", i, i*7919, i*104729, i%97, i*31%1000)
	}
	list := buildZip(t, zipEntry{name: "list.csv", content: rows.String()})
	small := buildZip(t, zipEntry{name: "small.csv", content: strings.Repeat("a@b.c\n", 100000)}) // 600 KB in about 1 KB
	bombRatio := func(ratio int64) string {
		return fmt.Sprintf("the file in the zip archive expands beyond %d bytes, %d times the archive's %d bytes: "+
			"a list compresses far less than that (a zip bomb?); upload it unzipped or compressed less", max(RatioFreeBytes, ratio*int64(len(bomb))), ratio, len(bomb))
	}
	tests := []struct {
		name     string
		zip      []byte
		lim      Limits
		openErr  error // at OpenZip, from the declared size
		readErr  error // while reading, from the bytes read
		msg      string
		wantRead int64 // bytes read before readErr, or all of them
	}{
		{name: "bomb: refused at once by the default ratio", zip: bomb, openErr: ErrZipRatio, msg: bombRatio(DefaultMaxExpansionRatio)},
		{name: "bomb: a configured ratio", zip: bomb, lim: Limits{MaxExpansionRatio: 10}, openErr: ErrZipRatio, msg: bombRatio(10)},
		// archive/zip itself refuses more bytes than declared, before our
		// count of them (TestZipExpansionLimit) would.
		{name: "bomb with a lying header: stopped by the bytes read", zip: lyingZip(t, bomb, RatioFreeBytes), readErr: ErrZipCorrupt,
			msg: "the zip archive is corrupt: zip: not a valid zip file", wantRead: RatioFreeBytes},
		{name: "bomb: size limit lower than the ratio's", zip: bomb, lim: Limits{MaxExpandedBytes: 1000}, openErr: ErrZipTooLarge,
			msg: "the file in the zip archive expands beyond 1000 bytes"},
		{name: "bomb: ratio off", zip: bomb, lim: Limits{MaxExpansionRatio: -1}, wantRead: 4 << 20},
		{name: "bomb: a ratio high enough", zip: bomb, lim: Limits{MaxExpansionRatio: 2000}, wantRead: 4 << 20},
		{name: "a list of 3 MiB", zip: list, wantRead: int64(rows.Len())},
		{name: "small and repetitive: exempt", zip: small, wantRead: 600000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rc, err := OpenZip(bytes.NewReader(tt.zip), int64(len(tt.zip)), tt.lim)
			if tt.openErr != nil {
				if !errors.Is(err, tt.openErr) || !IsBadInput(err) || err.Error() != tt.msg {
					t.Fatalf("OpenZip: %v, want %v: %s", err, tt.openErr, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			n, err := io.Copy(io.Discard, rc)
			if tt.readErr == nil && err != nil || tt.readErr != nil && (!errors.Is(err, tt.readErr) || err.Error() != tt.msg) {
				t.Fatalf("read: %v, want %v", err, tt.readErr)
			}
			if n != tt.wantRead {
				t.Errorf("read %d bytes, want %d", n, tt.wantRead)
			}
		})
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// The expansion limit counts the bytes actually produced.
func TestZipExpansionLimit(t *testing.T) {
	for _, limit := range []int64{1, 1000, 1 << 20} {
		z := &limitedZipReader{rc: io.NopCloser(endless{}), limit: limit}
		n, err := io.Copy(io.Discard, z)
		if n != limit || !errors.Is(err, ErrZipTooLarge) {
			t.Errorf("limit %d: read %d bytes, err %v", limit, n, err)
		}
	}
	// Past a limit the ratio set, the ratio's error.
	z := &limitedZipReader{rc: io.NopCloser(endless{}), limit: 1 << 20, tooLarge: func() error { return tooHighRatio(1<<20, 1000, 100) }}
	if n, err := io.Copy(io.Discard, z); n != 1<<20 || !errors.Is(err, ErrZipRatio) || !IsBadInput(err) {
		t.Errorf("ratio: read %d bytes, err %v", n, err)
	}
	// Exactly at the limit is fine.
	z = &limitedZipReader{rc: io.NopCloser(strings.NewReader("abcd")), limit: 4}
	if b, err := io.ReadAll(z); err != nil || string(b) != "abcd" {
		t.Errorf("at limit: %q %v", b, err)
	}
}

// Scanning through a reader that exceeds its expansion limit fails with
// that limit's message, classified as bad input.
func TestScanZipBomb(t *testing.T) {
	rc := &limitedZipReader{rc: io.NopCloser(strings.NewReader(strings.Repeat("a@b.c,x\n", 100000))), limit: 100 << 10}
	_, err := Scan(rc, comma, Limits{}, 0, 1)
	if !errors.Is(err, ErrZipTooLarge) || err.Error() != "the file in the zip archive expands beyond 102400 bytes" {
		t.Fatalf("err = %v, want ErrZipTooLarge", err)
	}
	// A real bomb is refused from its headers before any inflating.
	z := buildZip(t, zipEntry{name: "bomb.csv", size: 16 << 20})
	if _, _, err := OpenZip(bytes.NewReader(z), int64(len(z)), Limits{MaxExpandedBytes: 100 << 10}); !errors.Is(err, ErrZipTooLarge) {
		t.Fatalf("err = %v, want ErrZipTooLarge", err)
	}
}

func TestOpenZipCorruptData(t *testing.T) {
	z := buildZip(t, zipEntry{name: "list.csv", content: strings.Repeat("a@b.c,x\n", 1000)})
	// Flip bytes in the compressed data (after the 30-byte local header
	// and the 8-byte name).
	for i := 40; i < 60; i++ {
		z[i] ^= 0xFF
	}
	_, rc, err := OpenZip(bytes.NewReader(z), int64(len(z)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	if !errors.Is(err, ErrZipCorrupt) || !strings.HasPrefix(err.Error(), "the zip archive is corrupt: ") {
		t.Fatalf("err = %v, want ErrZipCorrupt", err)
	}
}

func TestWriteZip(t *testing.T) {
	content := strings.Repeat("email,status\r\nx@y.z,valid\r\n", 1000)
	var buf bytes.Buffer
	if err := WriteZip(&buf, "result.csv", strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() >= len(content)/5 {
		t.Errorf("zip is %d bytes for %d bytes of content: not compressed?", buf.Len(), len(content))
	}
	name, rc, err := OpenZip(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || name != "result.csv" || string(got) != content {
		t.Fatalf("round trip: %q, %d bytes, %v", name, len(got), err)
	}
	for _, bad := range []string{"", "../x.csv", "a/b.csv", `a\b.csv`} {
		if err := WriteZip(io.Discard, bad, strings.NewReader("")); err == nil {
			t.Errorf("WriteZip accepted name %q", bad)
		}
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name string
		want Kind
		msg  string
	}{
		{"list.csv", KindCSV, ""},
		{"LIST.CSV", KindCSV, ""},
		{"a.b.Txt", KindTXT, ""},
		{"dir/x.ZIP", KindZip, ""},
		{`C:\Users\me\x.zip`, KindZip, ""},
		{"list.xlsx", 0, `unsupported file type ".xlsx": allowed extensions are .csv, .txt, .zip`},
		{"list", 0, `file "list" has no extension: allowed extensions are .csv, .txt, .zip`},
		{"list.csv.gz", 0, `unsupported file type ".gz": allowed extensions are .csv, .txt, .zip`},
		{"csv", 0, `file "csv" has no extension: allowed extensions are .csv, .txt, .zip`},
	}
	for _, tt := range tests {
		k, err := KindOf(tt.name)
		if tt.msg == "" {
			if err != nil || k != tt.want {
				t.Errorf("KindOf(%q) = %v, %v; want %v", tt.name, k, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, ErrExtension) || err.Error() != tt.msg {
			t.Errorf("KindOf(%q) error = %v, want %q", tt.name, err, tt.msg)
		}
	}
	if KindCSV.String() != ".csv" || KindZip.String() != ".zip" || KindTXT.String() != ".txt" {
		t.Error("Kind.String")
	}
}

func TestDialectValidate(t *testing.T) {
	for _, d := range []Dialect{{Delimiter: ',', EmailColumn: 1}, {Delimiter: '|', Header: true, EmailColumn: 3}, {Delimiter: '\t', EmailColumn: 100}} {
		if err := d.Validate(); err != nil {
			t.Errorf("%+v: %v", d, err)
		}
	}
	for d, msg := range map[Dialect]string{
		{Delimiter: ';', EmailColumn: 1}:                `unsupported delimiter ';': use comma, pipe or tab`,
		{Delimiter: 0, EmailColumn: 1}:                  `unsupported delimiter '\x00': use comma, pipe or tab`,
		{Delimiter: ',', EmailColumn: 0}:                `email column must be 1 or greater, got 0`,
		{Delimiter: '|', Header: true, EmailColumn: -2}: `email column must be 1 or greater, got -2`,
	} {
		if err := d.Validate(); !errors.Is(err, ErrInvalidDialect) || err.Error() != msg {
			t.Errorf("%+v: %v, want %q", d, err, msg)
		}
	}
}

// Zero Limits are the defaults every binary starts with: a process given
// no limits (the REST API in make run was) checks an upload against the
// same numbers as the manager that prepares it.
func TestZeroLimitsAreTheDefaults(t *testing.T) {
	zero, def := Limits{}, DefaultLimits()
	if zero.maxExpanded() != def.MaxExpandedBytes || zero.maxRecord() != def.MaxRecordBytes || zero.ratioOf() != def.MaxExpansionRatio {
		t.Errorf("zero Limits apply %d, %d, %d; DefaultLimits are %+v", zero.maxExpanded(), zero.maxRecord(), zero.ratioOf(), def)
	}
	for _, size := range []int64{0, 1, 1000, 1 << 20, 1 << 30} {
		zl, zr := zero.expansionLimit(size)
		dl, dr := def.expansionLimit(size)
		if zl != dl || zr != dr {
			t.Errorf("archive of %d bytes: zero Limits allow %d (ratio %v), DefaultLimits %d (ratio %v)", size, zl, zr, dl, dr)
		}
	}
}
