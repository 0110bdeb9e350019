package pipeline

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// upperService appends the upper-cased email and the 0-based data row
// number, and counts rows per mail domain.
type upperService struct{ checkErr error }

const upperName = "upper"

func (upperService) Columns() []string { return []string{"email_upper", "row_number"} }

func (s upperService) Check(listservice.Input) error { return s.checkErr }

func (upperService) NewProcessor(_ context.Context, in listservice.Input) (listservice.Processor, error) {
	return &upperProc{col: in.EmailIndex, report: listservice.Reporting{}}, nil
}

type upperProc struct {
	col    int
	report listservice.Reporting
}

func (p *upperProc) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	for i, r := range rows {
		e := r.Field(p.col)
		out[i][0] = strings.ToUpper(e)
		out[i][1] = strconv.FormatInt(r.Number, 10)
		domain := "(none)"
		if at := strings.LastIndexByte(e, '@'); at >= 0 {
			domain = strings.ToLower(e[at+1:])
		}
		p.report.Add("domain", domain, 1)
	}
	return nil
}

func (p *upperProc) Reporting() listservice.Reporting { return p.report }
func (p *upperProc) Close() error                     { return nil }

// failService's processors fail every batch with err.
type failService struct{ err error }

func (failService) Columns() []string             { return []string{"x"} }
func (failService) Check(listservice.Input) error { return nil }
func (s failService) NewProcessor(context.Context, listservice.Input) (listservice.Processor, error) {
	return failProc(s), nil
}

type failProc struct{ err error }

func (p failProc) ProcessBatch(context.Context, []listservice.Row, [][]string) error { return p.err }
func (failProc) Reporting() listservice.Reporting                                    { return nil }
func (failProc) Close() error                                                        { return nil }

func testRegistry() *listservice.Registry {
	reg := listservice.NewRegistry()
	reg.Register(upperName, upperService{})
	return reg
}

func memStore(t testing.TB) *blobstore.Store {
	t.Helper()
	s, err := blobstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t testing.TB, s *blobstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, s *blobstore.Store, key string) []byte {
	t.Helper()
	b, err := s.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Limits = listfile.Limits{MaxExpandedBytes: 1 << 20, MaxRecordBytes: 4 << 10}
	return cfg
}

type result struct {
	plan *Plan
	out  *Outcome
	data []byte // the stored result object
}

// process runs Prepare, RunShard for every shard and Merge on data, stored
// under uploads/<uid>/<name>, with upperService.
func process(t testing.TB, s *blobstore.Store, uid, name string, data []byte, d listfile.Dialect, cfg Config) result {
	return processWith(t, s, upperName, upperService{}, uid, name, data, d, cfg)
}

// processWith is process with the service svc, registered as svcName.
func processWith(t testing.TB, s *blobstore.Store, svcName string, svc listservice.Service, uid, name string, data []byte, d listfile.Dialect, cfg Config) result {
	t.Helper()
	return processRequest(t, s, svcName, svc, uid, name, data, Request{Dialect: d}, cfg)
}

// processRequest is processWith for a request with more than a dialect
// (its Source and Service are set here).
func processRequest(t testing.TB, s *blobstore.Store, svcName string, svc listservice.Service, uid, name string, data []byte, req Request, cfg Config) result {
	t.Helper()
	ctx := context.Background()
	keys := blobstore.ListKeys{UID: uid}
	src := "uploads/" + uid + "/" + name
	put(t, s, src, data)
	req.Source, req.Service = Source{Key: src, Name: name}, svcName
	plan, err := Prepare(ctx, s, keys, req, svc, cfg)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	reg := listservice.NewRegistry()
	reg.Register(svcName, svc)
	for i := range plan.Shards {
		sum, err := RunShard(ctx, s, keys, i, reg, cfg.Limits)
		if err != nil {
			t.Fatalf("RunShard(%d): %v", i, err)
		}
		if sum.Index != i || sum.Rows != plan.Shards[i].Rows || sum.Error != "" {
			t.Fatalf("RunShard(%d) summary = %+v, want %d rows", i, sum, plan.Shards[i].Rows)
		}
	}
	out, err := Merge(ctx, s, keys, plan, ResultFileName(name, 7))
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	return result{plan: plan, out: out, data: get(t, s, out.Key)}
}

func dom(counts map[string]int64) listservice.Reporting {
	return listservice.Reporting{"domain": counts}
}

var (
	comma = listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 1}
	bom   = "\xEF\xBB\xBF"
)

func TestEndToEnd(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		in      string
		dialect listfile.Dialect
		want    string
		report  listservice.Reporting
		width   int
		crlf    bool
	}{
		{
			name: "csv with header", file: "list.csv", dialect: comma,
			in:     "email,name\na@x.com,Ann\nb@y.org,Bob\n",
			want:   "email,name,email_upper,row_number\na@x.com,Ann,A@X.COM,0\nb@y.org,Bob,B@Y.ORG,1\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 2,
		},
		{
			name: "txt without header, tab, email in column 2", file: "list.txt",
			dialect: listfile.Dialect{Delimiter: '\t', EmailColumn: 2},
			in:      "Ann\ta@x.com\t1\nBob\tb@x.com\t2\n",
			want:    "column_1\temail\tcolumn_3\temail_upper\trow_number\nAnn\ta@x.com\t1\tA@X.COM\t0\nBob\tb@x.com\t2\tB@X.COM\t1\n",
			report:  dom(map[string]int64{"x.com": 2}), width: 3,
		},
		{
			name: "pipe with header", file: "LIST.CSV",
			dialect: listfile.Dialect{Delimiter: '|', Header: true, EmailColumn: 2},
			in:      "id|email\n1|a@x.com\n2|b@y.org\n",
			want:    "id|email|email_upper|row_number\n1|a@x.com|A@X.COM|0\n2|b@y.org|B@Y.ORG|1\n",
			report:  dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 2,
		},
		{
			name: "comma without header", file: "list.txt",
			dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 1},
			in:      "a@x.com\nb@y.org,extra\n",
			want:    "email,column_2,email_upper,row_number\na@x.com,,A@X.COM,0\nb@y.org,extra,B@Y.ORG,1\n",
			report:  dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 2,
		},
		{
			name: "CRLF kept, last line unterminated", file: "list.csv", dialect: comma,
			in:     "email,n\r\na@x.com,1\r\nb@y.org,2",
			want:   "email,n,email_upper,row_number\r\na@x.com,1,A@X.COM,0\r\nb@y.org,2,B@Y.ORG,1\r\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 2, crlf: true,
		},
		{
			name: "LF file with a CRLF line ends every line in LF", file: "list.csv", dialect: comma,
			in:     "email\na@x.com\r\nb@y.org\n",
			want:   "email,email_upper,row_number\na@x.com,A@X.COM,0\nb@y.org,B@Y.ORG,1\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 1,
		},
		{
			// The header row is re-written from its parsed fields, so
			// the BOM does not reach the result.
			name: "UTF-8 BOM with header is dropped", file: "list.csv", dialect: comma,
			in:     bom + "email,n\r\na@x.com,1\r\n",
			want:   "email,n,email_upper,row_number\r\na@x.com,1,A@X.COM,0\r\n",
			report: dom(map[string]int64{"x.com": 1}), width: 2, crlf: true,
		},
		{
			name: "UTF-8 BOM without header is dropped", file: "list.txt",
			dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 1},
			in:      bom + "a@x.com\n",
			want:    "email,email_upper,row_number\na@x.com,A@X.COM,0\n",
			report:  dom(map[string]int64{"x.com": 1}), width: 1,
		},
		{
			name: "ragged rows padded to the widest row", file: "list.csv", dialect: comma,
			in: "email,a,b\nx@x.com\ny@y.org,1,2,3\nz@z.net,1\n",
			want: "email,a,b,column_4,email_upper,row_number\n" +
				"x@x.com,,,,X@X.COM,0\n" +
				"y@y.org,1,2,3,Y@Y.ORG,1\n" +
				"z@z.net,1,,,Z@Z.NET,2\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1, "z.net": 1}), width: 4,
		},
		{
			name: "quoted fields preserved byte for byte", file: "list.csv",
			dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2},
			in: "\"Name, Full\",\"email\"\n" +
				"\"Doe, John\",\"a@x.com\"\n" +
				"\"line1\nline2\r\nline3\",b@y.org\n" +
				"\"He said \"\"hi\"\"\",\"\"\"j,d\"\"@z.net\"\n" +
				"ab\"c,\"d@w.io\"trail\n",
			want: "\"Name, Full\",email,email_upper,row_number\n" +
				"\"Doe, John\",\"a@x.com\",A@X.COM,0\n" +
				"\"line1\nline2\r\nline3\",b@y.org,B@Y.ORG,1\n" +
				"\"He said \"\"hi\"\"\",\"\"\"j,d\"\"@z.net\",\"\"\"J,D\"\"@Z.NET\",2\n" +
				"ab\"c,\"d@w.io\"trail,D@W.IOTRAIL,3\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1, "z.net": 1, "w.iotrail": 1}), width: 2,
		},
		{
			name: "blank lines are not rows", file: "list.csv", dialect: comma,
			in:     "email\n\na@x.com\n\r\n\nb@y.org\n\n",
			want:   "email,email_upper,row_number\na@x.com,A@X.COM,0\nb@y.org,B@Y.ORG,1\n",
			report: dom(map[string]int64{"x.com": 1, "y.org": 1}), width: 1,
		},
		{
			name: "empty email and whitespace-only row", file: "list.csv",
			dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2},
			in:      "n,email\n1,\n  \n",
			want:    "n,email,email_upper,row_number\n1,,,0\n  ,,,1\n",
			report:  dom(map[string]int64{"(none)": 2}), width: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memStore(t)
			r := process(t, s, "l1", tt.file, []byte(tt.in), tt.dialect, testConfig())
			if got := string(r.data); got != tt.want {
				t.Errorf("result:\n got %q\nwant %q", got, tt.want)
			}
			if r.plan.Width != tt.width || r.plan.CRLF != tt.crlf {
				t.Errorf("plan width %d crlf %v, want %d %v", r.plan.Width, r.plan.CRLF, tt.width, tt.crlf)
			}
			if !maps.EqualFunc(r.out.Reporting, tt.report, maps.Equal) {
				t.Errorf("reporting = %v, want %v", r.out.Reporting, tt.report)
			}
			checkOutcome(t, s, r, ResultFileName(tt.file, 7))
			if a, err := s.Attributes(context.Background(), r.out.Key); err != nil {
				t.Fatal(err)
			} else if want := ContentType(r.out.FileName); a.ContentType != want {
				t.Errorf("result content type %q, want %q", a.ContentType, want)
			}
		})
	}
}

// checkOutcome checks the Outcome against the stored object and the plan.
func checkOutcome(t *testing.T, s *blobstore.Store, r result, fileName string) {
	t.Helper()
	sum := sha256.Sum256(r.data)
	keys := blobstore.ListKeys{UID: "l1"}
	if r.out.FileName != fileName || r.out.Key != keys.Result(fileName) {
		t.Errorf("outcome name %q key %q, want %q %q", r.out.FileName, r.out.Key, fileName, keys.Result(fileName))
	}
	if r.out.Bytes != int64(len(r.data)) || r.out.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("outcome bytes %d sha %s, stored object has %d bytes sha %x", r.out.Bytes, r.out.SHA256, len(r.data), sum)
	}
	if r.out.Rows != r.plan.Records {
		t.Errorf("outcome rows %d, plan records %d", r.out.Rows, r.plan.Records)
	}
	if size, err := s.Size(context.Background(), r.out.Key); err != nil || size != r.out.Bytes {
		t.Errorf("Size(result) = %d, %v; want %d", size, err, r.out.Bytes)
	}
}

type zipFile struct {
	name string
	data string
	// raw, when set, is written as the entry's compressed data with the
	// given method and flags (for corrupt, encrypted and unknown-method
	// entries).
	raw    bool
	method uint16
	flags  uint16
}

func makeZip(t testing.TB, files ...zipFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		var w io.Writer
		var err error
		if f.raw {
			w, err = zw.CreateRaw(&zip.FileHeader{
				Name: f.name, Method: f.method, Flags: f.flags,
				CRC32:              crc32.ChecksumIEEE([]byte(f.data)),
				CompressedSize64:   uint64(len(f.data)),
				UncompressedSize64: uint64(len(f.data)),
			})
		} else {
			w, err = zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate})
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readZip(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("result is not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(b)
	}
	return out
}

func TestZipInZipOut(t *testing.T) {
	csv := "email,name\r\na@x.com,\"Doe, Ann\"\r\nb@y.org,Bob\r\n"
	wantCSV := "email,name,email_upper,row_number\r\na@x.com,\"Doe, Ann\",A@X.COM,0\r\nb@y.org,Bob,B@Y.ORG,1\r\n"
	tests := []struct {
		name      string
		inner     string
		wantEntry string
	}{
		{"csv in a folder", "export/contacts.csv", "upload-7-results.csv"},
		{"txt keeps .txt", "contacts.TXT", "upload-7-results.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memStore(t)
			z := makeZip(t, zipFile{name: "__MACOSX/._x.csv", data: "junk"}, zipFile{name: tt.inner, data: csv})
			r := process(t, s, "l1", "upload.zip", z, comma, testConfig())
			if !r.plan.Zip || r.plan.ZipEntry != tt.inner[strings.LastIndexByte(tt.inner, '/')+1:] {
				t.Errorf("plan zip %v entry %q", r.plan.Zip, r.plan.ZipEntry)
			}
			keys := blobstore.ListKeys{UID: "l1"}
			if r.plan.InputKey != keys.Input() {
				t.Errorf("plan input key %q, want %q", r.plan.InputKey, keys.Input())
			}
			if got := string(get(t, s, keys.Input())); got != csv {
				t.Errorf("extracted input %q, want %q", got, csv)
			}
			if r.out.FileName != "upload-7-results.zip" {
				t.Errorf("result file name %q", r.out.FileName)
			}
			entries := readZip(t, r.data)
			if len(entries) != 1 || entries[tt.wantEntry] != wantCSV {
				t.Errorf("zip entries %q, want exactly {%q: %q}", entries, tt.wantEntry, wantCSV)
			}
			checkOutcome(t, s, r, "upload-7-results.zip")
			if a, err := s.Attributes(context.Background(), r.out.Key); err != nil {
				t.Fatal(err)
			} else if a.ContentType != "application/zip" {
				t.Errorf("content type %q", a.ContentType)
			}
		})
	}
}

// genList returns a list of n rows (CRLF, a header, 4 columns) with quoted
// fields that hold commas, doubled quotes and line breaks, and blank lines.
func genList(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 9))
	var b bytes.Buffer
	b.WriteString("id,email,note,city\r\n")
	domains := []string{"x.com", "y.org", "z.net"}
	for i := range n {
		fmt.Fprintf(&b, "%d,user%d@%s,", i, i, domains[i%len(domains)])
		switch rng.IntN(6) {
		case 0:
			b.WriteString("\"multi\r\nline, note\"")
		case 1:
			b.WriteString("\"say \"\"hi\"\"\"")
		case 2:
			b.WriteString("\"\n\n\"")
		default:
			b.WriteString("plain")
		}
		if rng.IntN(5) == 0 { // ragged: no city
			b.WriteString("\r\n")
		} else {
			b.WriteString(",Springfield\r\n")
		}
		if rng.IntN(20) == 0 {
			b.WriteString("\r\n")
		}
	}
	return b.Bytes()
}

func TestManyShards(t *testing.T) {
	const n = 400
	data := genList(n)
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}

	s := memStore(t)
	one := process(t, s, "one", "list.csv", data, d, testConfig())
	if len(one.plan.Shards) != 1 {
		t.Fatalf("default config planned %d shards for %d bytes", len(one.plan.Shards), len(data))
	}
	cfg := testConfig()
	cfg.ShardBytes = 300
	cfg.MaxShards = 64
	many := process(t, s, "many", "list.csv", data, d, cfg)
	if len(many.plan.Shards) < 20 {
		t.Fatalf("ShardBytes 300 planned only %d shards for %d bytes", len(many.plan.Shards), len(data))
	}
	if !bytes.Equal(many.data, one.data) {
		t.Fatalf("%d-shard result differs from the 1-shard result", len(many.plan.Shards))
	}
	if many.out.SHA256 != one.out.SHA256 || many.out.Rows != n || one.out.Rows != n {
		t.Errorf("outcomes differ: %+v vs %+v", many.out, one.out)
	}
	want := dom(map[string]int64{"x.com": 134, "y.org": 133, "z.net": 133})
	if !maps.EqualFunc(many.out.Reporting, want, maps.Equal) || !maps.EqualFunc(one.out.Reporting, want, maps.Equal) {
		t.Errorf("reporting %v / %v, want %v", many.out.Reporting, one.out.Reporting, want)
	}

	// Rows come out in input order: row_number counts up and id matches.
	rd := listfile.NewReader(bytes.NewReader(many.data), d, listfile.Limits{})
	hdr, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hdr.Fields(), ","); got != "id,email,note,city,email_upper,row_number" {
		t.Errorf("header %q", got)
	}
	for i := 0; ; i++ {
		rec, err := rd.Next()
		if err == io.EOF {
			if i != n {
				t.Errorf("result has %d rows, want %d", i, n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumFields() != 6 || rec.Field(0) != strconv.Itoa(i) || rec.Field(5) != strconv.Itoa(i) ||
			rec.Field(4) != strings.ToUpper(rec.Field(1)) {
			t.Fatalf("row %d: %q", i, rec.Fields())
		}
	}

	// Sum of shard rows and reporting equals the whole.
	var rows int64
	total := listservice.Reporting{}
	sums, err := Summaries(context.Background(), s, blobstore.ListKeys{UID: "many"}, many.plan)
	if err != nil {
		t.Fatal(err)
	}
	for i, sm := range sums {
		if sm.Index != i {
			t.Errorf("summary %d has index %d", i, sm.Index)
		}
		rows += sm.Rows
		total.Merge(sm.Reporting)
	}
	if rows != n || !maps.EqualFunc(total, want, maps.Equal) {
		t.Errorf("summaries add up to %d rows %v", rows, total)
	}
}

func TestManyShardsZip(t *testing.T) {
	data := genList(300)
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	s := memStore(t)
	plain := process(t, s, "plain", "list.csv", data, d, testConfig())
	cfg := testConfig()
	cfg.ShardBytes = 500
	z := process(t, s, "zip", "list.zip", makeZip(t, zipFile{name: "list.csv", data: string(data)}), d, cfg)
	if len(z.plan.Shards) < 10 {
		t.Fatalf("only %d shards", len(z.plan.Shards))
	}
	entries := readZip(t, z.data)
	if len(entries) != 1 || entries["list-7-results.csv"] != string(plain.data) {
		t.Errorf("zipped %d-shard result differs from the plain 1-shard result (entries %d)", len(z.plan.Shards), len(entries))
	}
}

func TestPrepareBadInput(t *testing.T) {
	good := "email\na@x.com\n"
	tests := []struct {
		name    string
		file    string
		data    *string // nil: the source object is missing
		dialect listfile.Dialect
		cfg     func(*Config)
		svc     listservice.Service
		reason  error // listfile reason, when there is one
		msg     string
	}{
		{name: "missing source", file: "list.csv", msg: "missing from the store"},
		{name: "bad extension", file: "list.xlsx", data: &good, reason: listfile.ErrExtension},
		{name: "no extension", file: "list", data: &good, reason: listfile.ErrExtension},
		{name: "bad delimiter", file: "list.csv", data: &good, dialect: listfile.Dialect{Delimiter: ';', EmailColumn: 1}, reason: listfile.ErrInvalidDialect},
		{name: "email column 0", file: "list.csv", data: &good, dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 0}, reason: listfile.ErrInvalidDialect},
		{name: "email column out of range", file: "list.csv", data: ptr("a,b\n1,2\n"), dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 3}, reason: listfile.ErrEmailColumn},
		{name: "empty", file: "list.csv", data: ptr(""), reason: listfile.ErrNoData},
		{name: "header only", file: "list.csv", data: ptr("email\n"), reason: listfile.ErrNoData},
		{name: "blank lines only", file: "list.txt", data: ptr("\n\r\n\n"), dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 1}, reason: listfile.ErrNoData},
		{name: "binary NUL", file: "list.csv", data: ptr("email\na@x.com\x00\n"), reason: listfile.ErrBinary},
		{name: "PDF", file: "list.csv", data: ptr("%PDF-1.7\n..."), reason: listfile.ErrNotText},
		{name: "xlsx named csv", file: "list.csv", data: ptr(string(makeZip(t, zipFile{name: "x.xml", data: "<a/>"}))), reason: listfile.ErrNotText},
		{name: "UTF-16", file: "list.csv", data: ptr("\xFF\xFEe\x00"), reason: listfile.ErrNotText},
		{name: "unterminated quote", file: "list.csv", data: ptr("email\n\"a@x.com\n"), reason: listfile.ErrUnterminatedQuote},
		{name: "bare CR", file: "list.csv", data: ptr("email\ra@x.com\rb@y.org\r"), reason: listfile.ErrBareCR},
		{name: "record too large", file: "list.csv", data: ptr("email\n" + strings.Repeat("a", 100) + "\n"), cfg: func(c *Config) { c.Limits.MaxRecordBytes = 50 }, reason: listfile.ErrRecordTooLarge},
		{name: "service check", file: "list.csv", data: &good, svc: upperService{checkErr: errors.New("needs a first_name column")}, msg: "needs a first_name column"},

		{name: "zip: not a zip", file: "list.zip", data: ptr("email\na@x.com\n"), reason: listfile.ErrNotZip},
		{name: "zip: truncated", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: good})[:20])), reason: listfile.ErrNotZip},
		{name: "zip: empty", file: "list.zip", data: ptr(string(makeZip(t))), reason: listfile.ErrZipEmpty},
		{name: "zip: only junk", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "__MACOSX/._a.csv", data: good}, zipFile{name: ".DS_Store", data: "x"}))), reason: listfile.ErrZipEmpty},
		{name: "zip: two files", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: good}, zipFile{name: "b.csv", data: good}))), reason: listfile.ErrZipMultipleFiles},
		{name: "zip: inner xlsx", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.xlsx", data: good}))), reason: listfile.ErrZipInnerExtension},
		{name: "zip: inner zip", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.zip", data: good}))), reason: listfile.ErrZipInnerExtension},
		{name: "zip: unsafe path", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "../a.csv", data: good}))), reason: listfile.ErrZipUnsafePath},
		{name: "zip: encrypted", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: good, raw: true, method: zip.Store, flags: 1}))), reason: listfile.ErrZipEncrypted},
		{name: "zip: unknown method", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: good, raw: true, method: 12}))), reason: listfile.ErrZipMethod},
		{name: "zip: corrupt deflate", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: "\xff\xff\xff\xff\xff\xff", raw: true, method: zip.Deflate}))), reason: listfile.ErrZipCorrupt},
		{name: "zip: bad checksum", file: "list.zip", data: ptr(string(badCRCZip(t, good))), reason: listfile.ErrZipCorrupt},
		{name: "zip: too large", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: "email\n" + strings.Repeat("a@x.com\n", 200)}))), cfg: func(c *Config) { c.Limits.MaxExpandedBytes = 100 }, reason: listfile.ErrZipTooLarge},
		// 4.8 MB of rows in about 10 KB: refused by the manager's default
		// expansion ratio (100), whatever the size limit.
		{name: "zip: expansion ratio", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: "email\n" + strings.Repeat("a@x.com\n", 600_000)}))),
			cfg: func(c *Config) { c.Limits = DefaultConfig().Limits }, reason: listfile.ErrZipRatio},
		{name: "zip: inner binary", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: "email\n\x00\n"}))), reason: listfile.ErrBinary},
		{name: "zip: inner empty", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: ""}))), reason: listfile.ErrNoData},
		{name: "zip: inner email column", file: "list.zip", data: ptr(string(makeZip(t, zipFile{name: "a.csv", data: good}))), dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}, reason: listfile.ErrEmailColumn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memStore(t)
			keys := blobstore.ListKeys{UID: "l1"}
			if tt.data != nil {
				put(t, s, "src", []byte(*tt.data))
			}
			d := tt.dialect
			if d == (listfile.Dialect{}) {
				d = comma
			}
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			svc := tt.svc
			if svc == nil {
				svc = upperService{}
			}
			plan, err := Prepare(context.Background(), s, keys, Request{Source: Source{Key: "src", Name: tt.file}, Dialect: d, Service: upperName}, svc, cfg)
			if err == nil {
				t.Fatalf("Prepare succeeded: %+v", plan)
			}
			t.Logf("error: %v", err)
			if !IsBadInput(err) {
				t.Fatalf("Prepare error %q (%T) is not bad input", err, err)
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.Error() != err.Error() {
				t.Errorf("error %q is not a pipeline.InputError at the top", err)
			}
			if tt.reason != nil && !errors.Is(err, tt.reason) {
				t.Errorf("error %q, want reason %q", err, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want it to contain %q", err, tt.msg)
			}
			for _, k := range []string{keys.Plan(), keys.Input()} {
				if ok, _ := s.Exists(context.Background(), k); ok {
					t.Errorf("%s was stored for bad input", k)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

// badCRCZip returns a zip whose one entry has a wrong CRC-32.
func badCRCZip(t *testing.T, content string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "a.csv", Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte(content)) ^ 1,
		CompressedSize64: uint64(len(content)), UncompressedSize64: uint64(len(content))})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPrepareStoreFailureIsNotBadInput(t *testing.T) {
	for _, name := range []string{"list.csv", "list.zip"} {
		t.Run(name, func(t *testing.T) {
			s := memStore(t)
			data := []byte("email\na@x.com\n")
			if name == "list.zip" {
				data = makeZip(t, zipFile{name: "a.csv", data: string(data)})
			}
			put(t, s, "src", data)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := Prepare(ctx, s, blobstore.ListKeys{UID: "l1"}, Request{Source: Source{Key: "src", Name: name}, Dialect: comma, Service: upperName}, upperService{}, testConfig())
			if err == nil {
				t.Fatal("Prepare with a cancelled context succeeded")
			}
			t.Logf("error: %v", err)
			if IsBadInput(err) {
				t.Errorf("store failure %q classified as bad input", err)
			}
		})
	}
}

func TestStoreReadFailureIsNotBadInput(t *testing.T) {
	const huge = 1 << 40
	list := genList(500) // about 20 KB
	z := makeZip(t, zipFile{name: "list.csv", data: string(list)})
	tests := []struct {
		name     string
		file     string
		data     []byte
		from, to int64 // reads of the source fail on these bytes
		attrs    bool  // Attributes of the source fail
	}{
		{name: "csv: stat fails", file: "list.csv", data: list, attrs: true},
		{name: "csv: open fails", file: "list.csv", data: list, from: 0, to: huge},
		{name: "csv: fails in the sniffed head", file: "list.csv", data: list, from: 100, to: huge},
		{name: "csv: fails mid-file", file: "list.csv", data: list, from: 15000, to: 15001},
		{name: "zip: stat fails", file: "list.zip", data: z, attrs: true},
		{name: "zip: central directory read fails", file: "list.zip", data: z, from: int64(len(z)) - 30, to: huge},
		{name: "zip: fails while inflating", file: "list.zip", data: z, from: 200, to: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fb := newFaultStore(t)
			put(t, s, "src", tt.data)
			if tt.attrs {
				fb.failAttributes("src")
			} else {
				fb.failReads("src", tt.from, tt.to)
			}
			keys := blobstore.ListKeys{UID: "l1"}
			_, err := Prepare(context.Background(), s, keys, Request{Source: Source{Key: "src", Name: tt.file}, Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}, Service: upperName}, upperService{}, testConfig())
			t.Logf("error: %v", err)
			if err == nil {
				t.Fatal("Prepare succeeded")
			}
			if IsBadInput(err) || !errors.Is(err, errInjected) {
				t.Errorf("error %q: bad input %v, wraps the store error %v", err, IsBadInput(err), errors.Is(err, errInjected))
			}
			for _, k := range []string{keys.Plan(), keys.Input()} {
				if ok, _ := s.Exists(context.Background(), k); ok {
					t.Errorf("%s was stored", k)
				}
			}
		})
	}

	t.Run("shard input read fails", func(t *testing.T) {
		ctx := context.Background()
		s, fb := newFaultStore(t)
		keys, plan := prepared(t, s, string(list), 1<<20)
		fb.failReads("src", plan.Shards[0].Start+5000, plan.Shards[0].Start+5001)
		_, err := RunShard(ctx, s, keys, 0, testRegistry(), testConfig().Limits)
		if err == nil || IsBadInput(err) || !errors.Is(err, errInjected) {
			t.Fatalf("RunShard error %v (bad input %v)", err, IsBadInput(err))
		}
		var sum Summary
		if err := s.ReadJSON(ctx, keys.Summary(0), 1<<20, &sum); err != nil || sum.Error == "" || sum.BadInput {
			t.Errorf("summary %+v, %v", sum, err)
		}
	})

	t.Run("part read fails in Merge", func(t *testing.T) {
		ctx := context.Background()
		for _, zipped := range []bool{false, true} {
			s, fb := newFaultStore(t)
			keys, plan := prepared(t, s, string(list), 1<<20)
			if _, err := RunShard(ctx, s, keys, 0, testRegistry(), testConfig().Limits); err != nil {
				t.Fatal(err)
			}
			fb.failReads(keys.Part(0), 3000, 3001)
			plan.Zip = zipped
			name := "list-7-results.csv"
			if zipped {
				name = "list-7-results.zip"
			}
			_, err := Merge(ctx, s, keys, plan, name)
			if err == nil || IsBadInput(err) || !errors.Is(err, errInjected) {
				t.Errorf("zip %v: Merge error %v", zipped, err)
			}
			if ok, _ := s.Exists(ctx, keys.Result(name)); ok {
				t.Errorf("zip %v: a partial result was stored", zipped)
			}
		}
	})
}

func TestBadInputHelpers(t *testing.T) {
	if BadInput(nil) != nil {
		t.Error("BadInput(nil) != nil")
	}
	e := BadInputf("bad %d", 1)
	if !IsBadInput(e) || e.Error() != "bad 1" {
		t.Errorf("BadInputf = %q", e)
	}
	if BadInput(e) != e {
		t.Error("BadInput re-wrapped an InputError")
	}
	wrapped := fmt.Errorf("ctx: %w", e)
	if BadInput(wrapped) != wrapped || !IsBadInput(wrapped) {
		t.Error("wrapped InputError not recognised")
	}
	if IsBadInput(errors.New("x")) || IsBadInput(nil) {
		t.Error("plain error is bad input")
	}
}

// prepared stores data and prepares it with small shards.
func prepared(t *testing.T, s *blobstore.Store, data string, shardBytes int64) (blobstore.ListKeys, *Plan) {
	t.Helper()
	keys := blobstore.ListKeys{UID: "l1"}
	put(t, s, "src", []byte(data))
	cfg := testConfig()
	cfg.ShardBytes = shardBytes
	plan, err := Prepare(context.Background(), s, keys, Request{Source: Source{Key: "src", Name: "list.csv"}, Dialect: comma, Service: upperName}, upperService{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return keys, plan
}

func TestRunShardIdempotent(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	keys, plan := prepared(t, s, "email\na@x.com\nb@y.org\nc@x.com\n", 1<<20)
	reg := testRegistry()
	var parts, sums []string
	for range 2 {
		if _, err := RunShard(ctx, s, keys, 0, reg, testConfig().Limits); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(get(t, s, keys.Part(0))))
		sums = append(sums, string(get(t, s, keys.Summary(0))))
	}
	if parts[0] != parts[1] || sums[0] != sums[1] {
		t.Errorf("second run differs:\n%q\n%q\n%s\n%s", parts[0], parts[1], sums[0], sums[1])
	}
	if want := "a@x.com,A@X.COM,0\nb@y.org,B@Y.ORG,1\nc@x.com,C@X.COM,2\n"; parts[0] != want {
		t.Errorf("part %q, want %q", parts[0], want)
	}
	if len(plan.Shards) != 1 || plan.Records != 3 {
		t.Fatalf("plan %+v", plan)
	}
	lp, err := LoadPlan(ctx, s, keys)
	if err != nil {
		t.Fatal(err)
	}
	if lp.Records != 3 || lp.InputKey != "src" || strings.Join(lp.OutputHeader, ",") != "email,email_upper,row_number" {
		t.Errorf("LoadPlan = %+v", lp)
	}
}

func TestRunShardFailures(t *testing.T) {
	const data = "email,n\na@x.com,1\nb@y.org,2\n"
	tests := []struct {
		name     string
		index    int
		change   string // new content of the input after planning
		reg      func() *listservice.Registry
		plan     func(*Plan)
		msg      string
		badInput bool
	}{
		{name: "input changed: more rows", change: "email,n\na@x.com\n1\nb@y.org\n2\n", msg: "the input changed after it was prepared"},
		{name: "input changed: fewer rows", change: "email,n\na@x.com,1,b@y.org,2,,\n", msg: "the input changed after it was prepared"},
		{name: "input changed: binary", change: "email,n\na@x.com,1\nb@y.org\x002\n", msg: "NUL byte", badInput: true},
		{name: "input changed: unterminated quote", change: "email,n\n\"a@x.com,1\nb@y.org,2\n", msg: "unterminated", badInput: true},
		{name: "input deleted", change: "-", msg: "shard input"},
		{name: "index out of range", index: 5, msg: "outside the plan"},
		{name: "service not registered", reg: listservice.NewRegistry, msg: "not available"},
		{name: "processor fails", reg: func() *listservice.Registry {
			r := listservice.NewRegistry()
			r.Register(upperName, failService{errors.New("verifier down")})
			return r
		}, msg: "verifier down"},
		{name: "processor reports bad input", reg: func() *listservice.Registry {
			r := listservice.NewRegistry()
			r.Register(upperName, failService{BadInputf("row 1 is unusable")})
			return r
		}, msg: "unusable", badInput: true},
		{name: "plan version", plan: func(p *Plan) { p.Version = 99 }, msg: "version 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := memStore(t)
			keys, plan := prepared(t, s, data, 1<<20)
			switch tt.change {
			case "":
			case "-":
				if err := s.Delete(ctx, "src"); err != nil {
					t.Fatal(err)
				}
			default:
				put(t, s, "src", []byte(tt.change))
			}
			if tt.plan != nil {
				tt.plan(plan)
				if err := s.WriteJSON(ctx, keys.Plan(), plan); err != nil {
					t.Fatal(err)
				}
			}
			reg := testRegistry()
			if tt.reg != nil {
				reg = tt.reg()
			}
			sum, err := RunShard(ctx, s, keys, tt.index, reg, testConfig().Limits)
			if err == nil {
				t.Fatalf("RunShard succeeded: %+v (part %q)", sum, get(t, s, keys.Part(tt.index)))
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.msg) || IsBadInput(err) != tt.badInput {
				t.Errorf("error %q (bad input %v), want %q (bad input %v)", err, IsBadInput(err), tt.msg, tt.badInput)
			}
			var got Summary
			if err := s.ReadJSON(ctx, keys.Summary(tt.index), 1<<20, &got); err != nil {
				t.Fatalf("no failure summary: %v", err)
			}
			if got.Index != tt.index || got.Error != err.Error() || got.BadInput != tt.badInput || got.Rows != 0 {
				t.Errorf("summary %+v for error %q", got, err)
			}
			if tt.index == 0 {
				failed, err := ShardFailure(ctx, s, keys, plan)
				if err != nil || failed == nil || failed.Error != got.Error {
					t.Errorf("ShardFailure = %+v, %v", failed, err)
				}
				if _, err := Merge(ctx, s, keys, plan, "list-7-results.csv"); err == nil || !strings.Contains(err.Error(), "shard 0 failed") {
					t.Errorf("Merge after a failed shard: %v", err)
				}
			}
		})
	}
}

// TestShardFailurePrefersBadInput: a shard stopped because another
// index's bad input failed the Job writes its cancellation as its error;
// the failure reported is the bad input, whichever shard comes first.
func TestShardFailurePrefersBadInput(t *testing.T) {
	cancelled := Summary{Index: 0, Error: "context canceled"}
	bad := Summary{Index: 2, Error: "line 7: NUL byte", BadInput: true}
	other := Summary{Index: 1, Error: "store unreachable"}
	for _, tc := range []struct {
		name string
		sums []Summary
		want Summary
	}{
		{"bad input after a cancelled shard", []Summary{cancelled, bad}, bad},
		{"bad input between failures", []Summary{cancelled, other, bad}, bad},
		{"no bad input: the first failure", []Summary{other, cancelled}, cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := memStore(t)
			keys, plan := sixtyRowsPrepared(t, s)
			for _, sum := range tc.sums {
				if err := s.WriteJSON(ctx, keys.Summary(sum.Index), sum); err != nil {
					t.Fatal(err)
				}
			}
			f, err := ShardFailure(ctx, s, keys, plan)
			if err != nil || f == nil || f.Index != tc.want.Index || f.Error != tc.want.Error || f.BadInput != tc.want.BadInput {
				t.Errorf("ShardFailure = %+v, %v; want %+v", f, err, tc.want)
			}
		})
	}
}

// sixtyRowsPrepared prepares a list of 60 addresses in s, in shards of
// 200 bytes: at least 3 of them.
func sixtyRowsPrepared(t *testing.T, s *blobstore.Store) (blobstore.ListKeys, *Plan) {
	t.Helper()
	var b strings.Builder
	b.WriteString("email\n")
	for i := range 60 {
		fmt.Fprintf(&b, "u%02d@x.com\n", i)
	}
	keys, plan := prepared(t, s, b.String(), 200)
	if len(plan.Shards) < 3 {
		t.Fatalf("want at least 3 shards, got %d", len(plan.Shards))
	}
	return keys, plan
}

func TestProgressAndShardFailure(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	keys, plan := sixtyRowsPrepared(t, s)
	reg := testRegistry()

	check := func(want int64) {
		t.Helper()
		got, err := Progress(ctx, s, keys, plan)
		if err != nil || got != want {
			t.Errorf("Progress = %d, %v; want %d", got, err, want)
		}
	}
	check(0)
	if f, err := ShardFailure(ctx, s, keys, plan); f != nil || err != nil {
		t.Errorf("ShardFailure before any run = %+v, %v", f, err)
	}
	if _, err := Merge(ctx, s, keys, plan, "r.csv"); err == nil || !blobstore.IsNotFound(err) {
		t.Errorf("Merge without summaries: %v", err)
	}

	// Shard 0 done; shard 1 running with a progress doc.
	sum0, err := RunShard(ctx, s, keys, 0, reg, testConfig().Limits)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(ctx, keys.Progress(1), ProgressDoc{Rows: 3}); err != nil {
		t.Fatal(err)
	}
	check(sum0.Rows + 3)

	// Shard 2 failed after 2 rows: its progress still counts, and it is
	// the failure.
	failed := Summary{Index: 2, Error: "boom", BadInput: true}
	if err := s.WriteJSON(ctx, keys.Summary(2), failed); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(ctx, keys.Progress(2), ProgressDoc{Rows: 2}); err != nil {
		t.Fatal(err)
	}
	check(sum0.Rows + 3 + 2)
	f, err := ShardFailure(ctx, s, keys, plan)
	if err != nil || f == nil || f.Index != 2 || f.Error != "boom" || !f.BadInput {
		t.Errorf("ShardFailure = %+v, %v", f, err)
	}

	// A summary supersedes the progress doc.
	sum1, err := RunShard(ctx, s, keys, 1, reg, testConfig().Limits)
	if err != nil {
		t.Fatal(err)
	}
	check(sum0.Rows + sum1.Rows + 2)

	// Every shard done.
	for i := 2; i < len(plan.Shards); i++ {
		if _, err := RunShard(ctx, s, keys, i, reg, testConfig().Limits); err != nil {
			t.Fatal(err)
		}
	}
	check(60)
	if f, err := ShardFailure(ctx, s, keys, plan); f != nil || err != nil {
		t.Errorf("ShardFailure after the rerun = %+v, %v", f, err)
	}

	// A corrupt summary is an error, not a silent zero.
	put(t, s, keys.Summary(1), []byte("{not json"))
	if _, err := Progress(ctx, s, keys, plan); err == nil {
		t.Error("Progress ignored a corrupt summary")
	}
	if _, err := ShardFailure(ctx, s, keys, plan); err == nil {
		t.Error("ShardFailure ignored a corrupt summary")
	}
}

func TestResultFileName(t *testing.T) {
	tests := []struct {
		name string
		id   int64
		want string
	}{
		{"list.csv", 7, "list-7-results.csv"},
		{"My List.CSV", 12, "My List-12-results.csv"},
		{"data.TXT", 1, "data-1-results.txt"},
		{"archive.Zip", 3, "archive-3-results.zip"},
		{"a.b.c.csv", 5, "a.b.c-5-results.csv"},
		{"dir/list.csv", 9, "list-9-results.csv"},
		{".csv", 4, "list-4-results.csv"},
		{"noext", 2, "noext-2-results"},
		{"list.csv", 0, "list-0-results.csv"},
	}
	for _, tt := range tests {
		if got := ResultFileName(tt.name, tt.id); got != tt.want {
			t.Errorf("ResultFileName(%q, %d) = %q, want %q", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestContentType(t *testing.T) {
	tests := map[string]string{
		"r.zip":  "application/zip",
		"r.ZIP":  "application/zip",
		"r.csv":  "text/csv; charset=utf-8",
		"r.Csv":  "text/csv; charset=utf-8",
		"r.txt":  "text/plain; charset=utf-8",
		"r":      "text/plain; charset=utf-8",
		"r.json": "text/plain; charset=utf-8",
	}
	for name, want := range tests {
		if got := ContentType(name); got != want {
			t.Errorf("ContentType(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestZipEntryName(t *testing.T) {
	tests := []struct{ inner, file, want string }{
		{"list.csv", "up-1-results.zip", "up-1-results.csv"},
		{"list.TXT", "up-1-results.zip", "up-1-results.txt"},
		{"list.dat", "up-1-results.zip", "up-1-results.csv"},
		{"", "up-1-results.zip", "up-1-results.csv"},
	}
	for _, tt := range tests {
		if got := zipEntryName(tt.inner, tt.file); got != tt.want {
			t.Errorf("zipEntryName(%q, %q) = %q, want %q", tt.inner, tt.file, got, tt.want)
		}
	}
}

// constService appends one constant column and does nothing else: the
// benchmark measures the pipeline, not a service.
type constService struct{}

func (constService) Columns() []string             { return []string{"checked"} }
func (constService) Check(listservice.Input) error { return nil }
func (constService) NewProcessor(context.Context, listservice.Input) (listservice.Processor, error) {
	return constProc{}, nil
}

type constProc struct{}

func (constProc) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	for i := range rows {
		out[i][0] = "yes"
	}
	return nil
}
func (constProc) Reporting() listservice.Reporting { return listservice.Reporting{} }
func (constProc) Close() error                     { return nil }

// benchList returns a realistic list of about size bytes: a header and 8
// columns (id, first, last, email, street, city, state, zip); about 1 row
// in 5 has a quoted last name (with a comma or doubled quotes) and 1 in 4 a
// quoted street with a comma; CRLF line endings.
func benchList(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	first := []string{"James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "William", "Élodie"}
	last := []string{"Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "O'Brien", "Rodriguez"}
	streets := []string{"Main St", "Oak Ave", "Pine Rd", "Maple Dr", "Cedar Ln", "Elm St", "Washington Blvd"}
	cities := []string{"Springfield", "Riverside", "Franklin", "Greenville", "Bristol", "Clinton", "Salem"}
	states := []string{"CA", "TX", "NY", "FL", "IL", "PA", "OH"}
	domains := []string{"gmail.com", "yahoo.com", "example.org", "outlook.com", "company.co.uk"}
	var b bytes.Buffer
	b.Grow(size + 256)
	b.WriteString("id,first_name,last_name,email,street,city,state,zip\r\n")
	for id := 1; b.Len() < size; id++ {
		f, l := first[rng.IntN(len(first))], last[rng.IntN(len(last))]
		fmt.Fprintf(&b, "%d,%s,", id, f)
		switch rng.IntN(10) {
		case 0:
			fmt.Fprintf(&b, "\"%s, Jr.\",", l)
		case 1:
			fmt.Fprintf(&b, "\"%s \"\"The Rock\"\"\",", l)
		default:
			fmt.Fprintf(&b, "%s,", l)
		}
		fmt.Fprintf(&b, "%s.%s%d@%s,", f, l, rng.IntN(1000), domains[rng.IntN(len(domains))])
		if rng.IntN(4) == 0 {
			fmt.Fprintf(&b, "\"%d %s, Apt %d\",", rng.IntN(9999), streets[rng.IntN(len(streets))], rng.IntN(300))
		} else {
			fmt.Fprintf(&b, "%d %s,", rng.IntN(9999), streets[rng.IntN(len(streets))])
		}
		fmt.Fprintf(&b, "%s,%s,%05d\r\n", cities[rng.IntN(len(cities))], states[rng.IntN(len(states))], rng.IntN(100000))
	}
	return b.Bytes()
}

// BenchmarkPipeline runs a ~32 MB list through Prepare, every RunShard (one
// after the other, as on one core) and Merge, with a service that appends
// one constant column. Besides MB/s it reports MB/cpu-s (bytes per second
// of process CPU time), which does not drop when other processes compete
// for the cores; run with -cpu 1.
//
// The stores: mem:// (as the tests use), mem://?nomd5 (memblob without the
// MD5 it computes of every object written, which no production store here
// pays: blobstore.Open opens file:// stores with metadata=skip) and
// file:// in a temp dir (the embedded default).
func BenchmarkPipeline(b *testing.B) {
	data := benchList(32 << 20)
	for _, store := range []string{"mem", "mem-nomd5", "file"} {
		b.Run("store="+store, func(b *testing.B) {
			url := map[string]string{"mem": "mem://", "mem-nomd5": "mem://?nomd5", "file": "file://" + b.TempDir()}[store]
			s, err := blobstore.Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchPipeline(b, s, data)
		})
	}
}

func benchPipeline(b *testing.B, s *blobstore.Store, data []byte) {
	ctx := context.Background()
	put(b, s, "upload.csv", data)
	reg := listservice.NewRegistry()
	reg.Register("const", constService{})
	keys := blobstore.ListKeys{UID: "bench"}
	cfg := DefaultConfig()
	req := Request{
		Source:  Source{Key: "upload.csv", Name: "upload.csv"},
		Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 4},
		Service: "const",
	}
	var out *Outcome
	var shards int
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Self()
	for b.Loop() {
		plan, err := Prepare(ctx, s, keys, req, constService{}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		shards = len(plan.Shards)
		for i := range plan.Shards {
			if _, err := RunShard(ctx, s, keys, i, reg, cfg.Limits); err != nil {
				b.Fatal(err)
			}
		}
		if out, err = Merge(ctx, s, keys, plan, "upload-1-results.csv"); err != nil {
			b.Fatal(err)
		}
	}
	if cpu1 := cputime.Self(); cpu1 > cpu0 {
		b.ReportMetric(float64(len(data))*float64(b.N)/1e6/(cpu1-cpu0).Seconds(), "MB/cpu-s")
	}
	b.ReportMetric(float64(shards), "shards")
	if out.Rows == 0 || out.Bytes <= int64(len(data)) {
		b.Fatalf("outcome %+v", out)
	}
}

// inputService records the Input each shard's processor got.
type inputService struct {
	constService
	mu  *sync.Mutex
	got *[]listservice.Input
}

func (s inputService) NewProcessor(ctx context.Context, in listservice.Input) (listservice.Processor, error) {
	s.mu.Lock()
	*s.got = append(*s.got, in)
	s.mu.Unlock()
	return constProc{}, nil
}

// ShardKey makes the service a HostSharder, for domain mode.
func (inputService) ShardKey(email string) string {
	_, d, _ := strings.Cut(email, "@")
	return d
}

// The list's history tenant and maximum age travel in the stored plan to
// every shard's processor, in rows and domain mode alike: a Job pod reads
// them there, as the manager's local executor does.
func TestHistoryTenantReachesShards(t *testing.T) {
	week := 7 * 24 * time.Hour
	for _, by := range []string{ShardByRows, ShardByDomain} {
		t.Run(by, func(t *testing.T) {
			s := memStore(t)
			ctx := context.Background()
			keys := blobstore.ListKeys{UID: "tenant-" + by}
			put(t, s, "uploads/t/list.csv", genList(400))
			cfg := testConfig()
			cfg.ShardBytes, cfg.ShardBy = 2<<10, by
			var mu sync.Mutex
			var got []listservice.Input
			svc := inputService{mu: &mu, got: &got}
			req := Request{Source: Source{Key: "uploads/t/list.csv", Name: "list.csv"}, Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2},
				Service: "svc", MaxAge: &week, HistoryTenant: "namespace/team-a"}
			plan, err := Prepare(ctx, s, keys, req, svc, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Shards) < 2 {
				t.Fatalf("%d shards, want several", len(plan.Shards))
			}
			reg := listservice.NewRegistry()
			reg.Register("svc", svc)
			for i := range plan.Shards {
				if _, err := RunShard(ctx, s, keys, i, reg, cfg.Limits); err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != len(plan.Shards) {
				t.Fatalf("%d processors for %d shards", len(got), len(plan.Shards))
			}
			for i, in := range got {
				if in.HistoryTenant != "namespace/team-a" || in.MaxAge == nil || *in.MaxAge != week {
					t.Errorf("shard %d got tenant %q, max age %v", i, in.HistoryTenant, in.MaxAge)
				}
			}
		})
	}
}
