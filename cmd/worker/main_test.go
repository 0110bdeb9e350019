package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/wiring"
)

const evHeader = "ev_status,ev_status_code,ev_domain_type,ev_role_account,ev_correction,ev_duplicate,ev_valid,ev_from_history"

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func zipOf(t *testing.T, name, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, content)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRunLocal(t *testing.T) {
	tests := []struct {
		name  string
		in    string // input file name
		data  []byte
		out   string // output file name
		flags []string
		want  string // output content (the zip entry's for zip output)
		entry string // zip entry name, for zip output
	}{
		{
			name: "csv with header, email in column 2", in: "list.csv", out: "result.csv",
			data:  []byte("name,email\r\nAnn,ann@example.com\r\n\"Doe, Bob\",not-an-email\r\n"),
			flags: []string{"--delimiter", "comma", "--header", "--email-column", "2"},
			want: "name,email," + evHeader + "\r\n" +
				"Ann,ann@example.com,valid,10,biz,false,,false,true,false\r\n" +
				"\"Doe, Bob\",not-an-email,invalid,150,,false,,false,false,false\r\n",
		},
		{
			name: "defaults: tab, no header, column 1", in: "list.txt", out: "result.txt",
			data: []byte("ann@example.com\tAnn\n@example.com\n"),
			want: "email\tcolumn_2\t" + strings.ReplaceAll(evHeader, ",", "\t") + "\n" +
				"ann@example.com\tAnn\tvalid\t10\tbiz\tfalse\t\tfalse\ttrue\tfalse\n" +
				"@example.com\t\tinvalid\t140\t\tfalse\t\tfalse\tfalse\tfalse\n",
		},
		{
			name: "pipe", in: "list.csv", out: "result.csv",
			data:  []byte("email|x\na@example.org|1\n"),
			flags: []string{"--delimiter", "|", "--header"},
			want:  "email|x|" + strings.ReplaceAll(evHeader, ",", "|") + "\na@example.org|1|valid|10|biz|false||false|true|false\n",
		},
		{
			name: "zip in, zip out", in: "upload.zip", out: "upload-results.zip", entry: "upload-results.csv",
			data:  zipOf(t, "list.csv", "email\na@example.org\nb@@example.org\n"),
			flags: []string{"--delimiter", "comma", "--header"},
			want:  "email," + evHeader + "\na@example.org,valid,10,biz,false,,false,true,false\nb@@example.org,invalid,155,,false,b@example.org,false,false,false\n",
		},
		{
			name: "corrections, roles and duplicates", in: "list.csv", out: "result.csv",
			data:  []byte("email\ninfo@example.com\njohn@gmial.com\nx@mailinator.com\n\" INFO@Example.com\"\ninfo@example.com\n"),
			flags: []string{"--delimiter", "comma", "--header"},
			want: "email," + evHeader + "\n" +
				"info@example.com,valid,10,biz,true,,false,true,false\n" +
				"john@gmial.com,invalid,505,freeisp,false,john@gmail.com,false,false,false\n" +
				"x@mailinator.com,trap,525,disposable,false,,false,false,false\n" +
				"\" INFO@Example.com\",valid,10,biz,true,,true,true,false\n" +
				"info@example.com,valid,10,biz,true,,true,true,false\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := writeFile(t, dir, tt.in, tt.data)
			out := filepath.Join(dir, tt.out)
			var stderr bytes.Buffer
			args := append([]string{"run", "--in", in, "--out", out, offline(t)}, tt.flags...)
			if code := run(context.Background(), args, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if tt.entry != "" {
				zr, err := zip.NewReader(bytes.NewReader(got), int64(len(got)))
				if err != nil {
					t.Fatalf("output is not a zip: %v", err)
				}
				if len(zr.File) != 1 || zr.File[0].Name != tt.entry {
					t.Fatalf("zip entries %v, want one named %q", zr.File, tt.entry)
				}
				rc, _ := zr.File[0].Open()
				got, _ = io.ReadAll(rc)
				rc.Close()
			}
			if string(got) != tt.want {
				t.Errorf("output:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// ev_duplicate spans the processor's batches (512 rows each): a repeat
// hundreds of rows later, in another case and padded, is still flagged.
func TestRunLocalDuplicatesAcrossBatches(t *testing.T) {
	const n = 1200
	var b strings.Builder
	b.WriteString("Ann@Example.com\n")
	for i := 1; i < n-2; i++ {
		b.WriteString("user" + strconv.Itoa(i) + "@example.com\n")
	}
	b.WriteString(" ann@example.COM \nuser1@EXAMPLE.com\n")
	dir := t.TempDir()
	in := writeFile(t, dir, "list.txt", []byte(b.String()))
	out := filepath.Join(dir, "result.txt")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--in", in, "--out", out, offline(t)}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != n+1 {
		t.Fatalf("%d lines, want %d", len(lines), n+1)
	}
	const dupCol = 1 + 5 // after the email column: ev_status, ..., ev_duplicate
	for i, line := range lines[1:] {
		f := strings.Split(line, "\t")
		if len(f) != 9 {
			t.Fatalf("row %d: %q", i+1, line)
		}
		want := "false"
		if i >= n-2 {
			want = "true"
		}
		if f[dupCol] != want {
			t.Errorf("row %d %q: ev_duplicate %q, want %q", i+1, f[0], f[dupCol], want)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.csv", []byte("email\na@example.com\n"))
	binary := writeFile(t, dir, "binary.csv", []byte("email\na@example.com\x00\x01\x02\n"))
	xlsx := writeFile(t, dir, "book.xlsx", []byte("email\na@example.com\n"))
	pdf := writeFile(t, dir, "doc.csv", []byte("%PDF-1.4\n"))
	empty := writeFile(t, dir, "empty.csv", nil)
	out := filepath.Join(dir, "out.csv")
	t.Setenv("JOB_COMPLETION_INDEX", "")
	t.Setenv("BLOB_URL", "")

	tests := []struct {
		name string
		args []string
		code int
		msg  string // part of what run wrote to stderr
	}{
		{"no command", nil, 2, "usage"},
		{"unknown command", []string{"merge"}, 2, `unknown command "merge"`},
		{"run without --out", []string{"run", "--in", good}, 2, "--in and --out are required"},
		{"run without --in", []string{"run", "--out", out}, 2, "--in and --out are required"},
		{"run with a bad delimiter", []string{"run", "--in", good, "--out", out, "--delimiter", "semicolon"}, 2, "--delimiter"},
		{"run with an unknown service", []string{"run", "--in", good, "--out", out, "--service", "email_append"}, 2, "not available"},
		{"run with an unknown flag", []string{"run", "--bogus"}, 2, "bogus"},
		{"shard without --list-uid", []string{"shard", "--blob-url", "mem://", "--index", "0"}, 2, "--list-uid and a store (store.url, $BLOB_URL or --blob-url) are required"},
		{"shard without --blob-url", []string{"shard", "--list-uid", "u", "--index", "0"}, 2, "--list-uid and a store (store.url, $BLOB_URL or --blob-url) are required"},
		{"shard without an index", []string{"shard", "--list-uid", "u", "--blob-url", "mem://"}, 2, "JOB_COMPLETION_INDEX"},
		{"shard with an unknown flag", []string{"shard", "--shards", "3"}, 2, "shards"},
		{"shard with a setting as a flag", []string{"shard", "--list-uid", "u", "--dns-server", "off"}, 2, "dns-server"},
		{"help", []string{"-h"}, 0, "usage: worker <command>"},
		{"run help", []string{"run", "-h"}, 0, "usage: worker run --in"},
		{"shard help", []string{"shard", "--help"}, 0, "-list-uid"},

		{"binary input", []string{"run", "--in", binary, "--out", out, "--delimiter", "comma", "--header"}, 42, "bad input: binary data"},
		{"PDF input", []string{"run", "--in", pdf, "--out", out}, 42, "bad input: the file is a PDF"},
		{"empty input", []string{"run", "--in", empty, "--out", out}, 42, "bad input: the file has no data rows"},
		{"bad extension", []string{"run", "--in", xlsx, "--out", out}, 42, `bad input: unsupported file type ".xlsx"`},
		{"email column out of range", []string{"run", "--in", good, "--out", out, "--email-column", "3"}, 42, "bad input: email column 3"},
		{"bad email column", []string{"run", "--in", good, "--out", out, "--email-column", "0"}, 42, "bad input: email column must be 1 or greater"},
		{"record over --max-record-bytes", []string{"run", "--in", good, "--out", out, configArg(t, "pipeline:\n  limits:\n    maxRecordBytes: 4\n")}, 42, "bad input: the record on line 1"},

		{"missing input file", []string{"run", "--in", filepath.Join(dir, "nope.csv"), "--out", out}, 1, "error:"},
		{"unwritable output", []string{"run", "--in", good, "--out", filepath.Join(dir, "no", "such", "dir", "out.csv"), "--delimiter", "comma", "--header"}, 1, "error:"},
		{"shard without a plan", []string{"shard", "--list-uid", "u", "--blob-url", "file://" + filepath.Join(dir, "store"), "--index", "0"}, 1, "error:"},
		{"shard on an unknown store", []string{"shard", "--list-uid", "u", "--blob-url", "nosuch://x", "--index", "0"}, 1, "error:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			if tt.code != 2 || tt.msg != "bogus" && tt.msg != "shards" { // flag parse errors go to the flag set's output
				if !strings.Contains(stderr.String(), tt.msg) {
					t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.msg)
				}
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed run wrote %s", out)
	}
}

// prepareFileStore prepares data as list uid in a file:// store in a temp
// dir, with shards of about shardBytes, and returns the store URL.
func prepareFileStore(t *testing.T, uid string, data string, shardBytes int64) (string, *pipeline.Plan) {
	t.Helper()
	ctx := context.Background()
	url := "file://" + filepath.Join(t.TempDir(), "store")
	store, err := blobstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.WriteAll(ctx, "uploads/list.csv", []byte(data), nil); err != nil {
		t.Fatal(err)
	}
	svc, err := wiring.Registry(nil).Lookup("email_validation")
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	cfg.ShardBytes = shardBytes
	plan, err := pipeline.Prepare(ctx, store, blobstore.ListKeys{UID: uid}, pipeline.Request{
		Source:  pipeline.Source{Key: "uploads/list.csv", Name: "list.csv"},
		Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2},
		Service: "email_validation",
	}, svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return url, plan
}

func readSummary(t *testing.T, url, uid string, i int) pipeline.Summary {
	t.Helper()
	dir := strings.TrimPrefix(url, "file://")
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(blobstore.ListKeys{UID: uid}.Summary(i))))
	if err != nil {
		t.Fatalf("summary %d: %v", i, err)
	}
	var s pipeline.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestShard(t *testing.T) {
	const uid = "3d4c-uid"
	url, plan := prepareFileStore(t, uid, "name,email\nAnn,ann@example.com\nBob,bob@example\nAnn,Ann@Example.com\n", 1<<20)
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"shard", "--list-uid", uid, "--blob-url", url, "--index", "0", offline(t)}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	dir := strings.TrimPrefix(url, "file://")
	keys := blobstore.ListKeys{UID: uid}
	part, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(keys.Part(0))))
	if err != nil {
		t.Fatal(err)
	}
	// Offline (verification.dns.server off): syntax, corrections and lists.
	if want := "Ann,ann@example.com,valid,10,biz,false,,false,true,false\n" +
		"Bob,bob@example,invalid,115,,false,,false,false,false\n" +
		"Ann,Ann@Example.com,valid,10,biz,false,,true,true,false\n"; string(part) != want {
		t.Errorf("part %q, want %q", part, want)
	}
	sum := readSummary(t, url, uid, 0)
	if sum.Index != 0 || sum.Rows != 3 || sum.Error != "" ||
		sum.Reporting["status"]["valid"] != 2 || sum.Reporting["status"]["invalid"] != 1 || sum.Reporting["status_code"]["115"] != 1 {
		t.Errorf("summary %+v", sum)
	}

	// The controller's Merge reads what the worker wrote.
	store, err := blobstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	res, err := pipeline.Merge(context.Background(), store, keys, plan, "list-1-results.csv")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := store.ReadAll(context.Background(), res.Key)
	if want := "name,email," + evHeader + "\n" + string(part); string(got) != want {
		t.Errorf("merged %q, want %q", got, want)
	}
	// No metadata sidecars in the file store.
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".attrs") {
			t.Errorf("sidecar file %s", p)
		}
		return nil
	})
}

func TestShardFromJobIndex(t *testing.T) {
	const uid = "u2"
	var b strings.Builder
	b.WriteString("name,email\n")
	for i := range 40 {
		b.WriteString("n,user" + string(rune('a'+i%26)) + "@example.com\n")
	}
	url, plan := prepareFileStore(t, uid, b.String(), 200)
	if len(plan.Shards) < 2 {
		t.Fatalf("%d shards", len(plan.Shards))
	}
	t.Setenv("BLOB_URL", url)
	var total int64
	for i := range plan.Shards {
		t.Setenv("JOB_COMPLETION_INDEX", strconv.Itoa(i))
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{"shard", "--list-uid", uid, offline(t)}, &stderr); code != 0 {
			t.Fatalf("index %d: exit %d: %s", i, code, stderr.String())
		}
		s := readSummary(t, url, uid, i)
		if s.Index != i || s.Rows != plan.Shards[i].Rows {
			t.Errorf("summary %d: %+v", i, s)
		}
		total += s.Rows
	}
	if total != 40 {
		t.Errorf("shards did %d rows, want 40", total)
	}
}

func TestShardBadInput(t *testing.T) {
	const uid = "u3"
	url, _ := prepareFileStore(t, uid, "name,email\nAnn,ann@example.com\n", 1<<20)
	// The upload changes after planning into something binary.
	dir := strings.TrimPrefix(url, "file://")
	writeFile(t, filepath.Join(dir, "uploads"), "list.csv", []byte("name,email\nAnn,ann@e\x00ample.com\n"))
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"shard", "--list-uid", uid, "--blob-url", url, "--index", "0", offline(t)}, &stderr)
	if code != 42 || !strings.Contains(stderr.String(), "bad input: row 1: binary data") {
		t.Errorf("exit %d, stderr %q; want 42 and a binary-data message", code, stderr.String())
	}
	if s := readSummary(t, url, uid, 0); !s.BadInput || !strings.Contains(s.Error, "NUL byte") {
		t.Errorf("summary %+v", s)
	}

	// An index outside the plan is worth reporting but not bad input.
	stderr.Reset()
	if code := run(context.Background(), []string{"shard", "--list-uid", uid, "--blob-url", url, "--index", "7", offline(t)}, &stderr); code != 1 {
		t.Errorf("index 7: exit %d, stderr %q", code, stderr.String())
	}
}
