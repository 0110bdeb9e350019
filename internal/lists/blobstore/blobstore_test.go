package blobstore

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

func memStore(t *testing.T, rawURL string) *Store {
	t.Helper()
	s := FromBucket(memblob.OpenBucket(nil), rawURL)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestKeyFromURL(t *testing.T) {
	tests := []struct {
		store string
		url   string
		want  string // "" means an error is expected
		msg   string // part of the error message
	}{
		// Bucket stores: scheme and bucket must match, the path is the key.
		{"s3://my-bucket?region=eu-west-1", "s3://my-bucket/lists/a/source.csv", "lists/a/source.csv", ""},
		{"s3://my-bucket", "s3://my-bucket/upload.zip", "upload.zip", ""},
		{"s3://my-bucket", "S3://my-bucket/upload.zip", "upload.zip", ""}, // schemes are case-insensitive
		{"s3://my-bucket", "s3://my-bucket/a/b?versionId=3", "a/b", ""},
		{"s3://my-bucket", "s3://my-bucket/a%20b.csv", "a b.csv", ""},
		{"s3://my-bucket", "gs://my-bucket/upload.zip", "", "not in the configured store"},
		{"s3://my-bucket", "s3://other-bucket/upload.zip", "", "not in the configured store"},
		{"s3://my-bucket", "https://my-bucket/upload.zip", "", "not in the configured store"},
		{"s3://my-bucket", "upload.zip", "", "not in the configured store"},
		{"s3://my-bucket", "s3://my-bucket/", "", "empty"},
		{"s3://my-bucket", "s3://my-bucket", "", "outside"},
		{"s3://my-bucket", "s3://my-bucket/../x", "", "relative path"},
		{"s3://my-bucket", "s3://my-bucket/lists/../../x", "", "relative path"},
		{"s3://my-bucket", "s3://my-bucket/lists/%2e%2e/x", "", "relative path"},
		{"s3://my-bucket", "s3://my-bucket/./x", "", "relative path"},
		{"s3://my-bucket", "s3://my-bucket/a%5Cb", "", "not a clean relative path"},
		{"s3://my-bucket", "s3://my-bucket//etc/passwd", "", "not a clean relative path"},
		{"s3://my-bucket", "s3://my-bucket/a%00b", "", "not a clean relative path"},
		{"s3://my-bucket", "s3://my-bucket/%zz", "", "not a URL"},
		{"gs://b", "gs://b/x/y", "x/y", ""},
		{"mem://", "mem:///lists/a/input", "lists/a/input", ""},
		{"mem://", "mem://other/lists/a/input", "", "not in the configured store"},

		// File stores: the URL must lie under the store's directory.
		{"file:///data/store", "file:///data/store/lists/a/source.csv", "lists/a/source.csv", ""},
		{"file:///data/store/", "file:///data/store/upload.csv", "upload.csv", ""},
		{"file:///data/store?create_dir=true", "file:///data/store/upload.csv", "upload.csv", ""},
		{"file:///data/store", "file:/data/store/upload.csv", "upload.csv", ""},
		{"file:///data/store", "file:///data/store", "", "outside"},
		{"file:///data/store", "file:///data/store/", "", "empty"},
		{"file:///data/store", "file:///data/storex/upload.csv", "", "outside"},
		{"file:///data/store", "file:///data/other/upload.csv", "", "outside"},
		{"file:///data/store", "file:///etc/passwd", "", "outside"},
		{"file:///data/store", "file:///data/store/../other/x", "", "relative path"},
		{"file:///data/store", "file:///data/store/lists/../../other/x", "", "relative path"},
		{"file:///data/store", "file:///data/store/%2E%2E/other/x", "", "relative path"},
		{"file:///data/store", "file:///data/store/lists/..", "", "relative path"},
		{"file:///data/store", "file://host/data/store/x", "", "not in the configured store"},
		{"file:///data/store", "s3://data/store/x", "", "not in the configured store"},
	}
	for _, tt := range tests {
		s := memStore(t, tt.store)
		got, err := s.KeyFromURL(tt.url)
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("store %s: KeyFromURL(%q) = %q, %v; want an error containing %q", tt.store, tt.url, got, err, tt.msg)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("store %s: KeyFromURL(%q) = %q, %v; want %q", tt.store, tt.url, got, err, tt.want)
		}
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"lists/uid/input", true},
		{"uploads/My List (1).csv", true},
		{"..a", true},
		{"a..b/c..", true},
		{".hidden/x", true},
		{"", false},
		{"..", false},
		{".", false},
		{"../a", false},
		{"a/../b", false},
		{"a/..", false},
		{"./a", false},
		{"a/./b", false},
		{"/a", false},
		{"//a", false},
		{`a\b`, false},
		{`..\a`, false},
		{"a\x00b", false},
	}
	for _, tt := range tests {
		err := ValidKey(tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("ValidKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
		}
	}
}

func TestListKeys(t *testing.T) {
	k := ListKeys{UID: "0f9c-uid"}
	tests := map[string]string{
		k.Prefix():                          "lists/0f9c-uid/",
		k.Input():                           "lists/0f9c-uid/input",
		k.Source():                          "lists/0f9c-uid/source",
		k.Plan():                            "lists/0f9c-uid/plan.json",
		k.Part(3):                           "lists/0f9c-uid/parts/00003.part",
		k.Summary(12):                       "lists/0f9c-uid/parts/00012.summary.json",
		k.Progress(0):                       "lists/0f9c-uid/parts/00000.progress.json",
		k.Result("list-7-results.csv"):      "lists/0f9c-uid/result/list-7-results.csv",
		k.Result("../x/list-7-results.csv"): "lists/0f9c-uid/result/list-7-results.csv",
	}
	for got, want := range tests {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
		if err := ValidKey(strings.TrimSuffix(got, "/")); err != nil || !strings.HasPrefix(got, k.Prefix()) {
			t.Errorf("key %q: %v", got, err)
		}
	}
	// Part keys sort in shard order.
	var parts []string
	for _, i := range []int{10, 2, 0, 99, 1} {
		parts = append(parts, k.Part(i))
	}
	slices.Sort(parts)
	if parts[0] != k.Part(0) || parts[2] != k.Part(2) || parts[4] != k.Part(99) {
		t.Errorf("part keys sort as %q", parts)
	}
}

func TestSizeAndIsNotFound(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, "mem://")
	if err := s.WriteAll(ctx, "a/b", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Size(ctx, "a/b"); n != 5 || err != nil {
		t.Errorf("Size = %d, %v", n, err)
	}
	if err := s.WriteAll(ctx, "empty", nil, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Size(ctx, "empty"); n != 0 || err != nil {
		t.Errorf("Size(empty) = %d, %v", n, err)
	}
	_, err := s.Size(ctx, "missing")
	if !IsNotFound(err) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Size(missing) error %v", err)
	}
	// gocloud's own not-found errors count too.
	_, err = s.ReadAll(ctx, "missing")
	if err == nil || !IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = false", err)
	}
	for _, err := range []error{nil, errors.New("object not found"), context.Canceled} {
		if IsNotFound(err) {
			t.Errorf("IsNotFound(%v) = true", err)
		}
	}
}

type doc struct {
	Name  string           `json:"name"`
	Rows  int64            `json:"rows"`
	Count map[string]int64 `json:"count,omitempty"`
}

func TestWriteReadJSON(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, "mem://")
	in := doc{Name: "x", Rows: 42, Count: map[string]int64{"valid": 3}}
	if err := s.WriteJSON(ctx, "d.json", in); err != nil {
		t.Fatal(err)
	}
	a, err := s.Attributes(ctx, "d.json")
	if err != nil || a.ContentType != "application/json" {
		t.Errorf("attributes %+v, %v", a, err)
	}
	size := a.Size

	var out doc
	if err := s.ReadJSON(ctx, "d.json", size, &out); err != nil {
		t.Fatalf("ReadJSON with max = size: %v", err)
	}
	if out.Name != in.Name || out.Rows != in.Rows || out.Count["valid"] != 3 {
		t.Errorf("read back %+v", out)
	}

	err = s.ReadJSON(ctx, "d.json", size-1, &out)
	if err == nil || !strings.Contains(err.Error(), "more than the") || IsNotFound(err) {
		t.Errorf("ReadJSON over max: %v", err)
	}

	err = s.ReadJSON(ctx, "missing.json", 1<<20, &out)
	if !IsNotFound(err) || !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadJSON(missing) = %v", err)
	}

	if err := s.WriteAll(ctx, "bad.json", []byte(`{"name":`), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadJSON(ctx, "bad.json", 1<<20, &out); err == nil || !strings.Contains(err.Error(), "decode bad.json") {
		t.Errorf("ReadJSON(truncated) = %v", err)
	}
	if err := s.WriteAll(ctx, "type.json", []byte(`{"rows":"many"}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadJSON(ctx, "type.json", 1<<20, &out); err == nil {
		t.Error("ReadJSON decoded a string into an int")
	}

	if err := s.WriteJSON(ctx, "chan.json", make(chan int)); err == nil || !strings.Contains(err.Error(), "encode chan.json") {
		t.Errorf("WriteJSON(chan) = %v", err)
	}
	if ok, _ := s.Exists(ctx, "chan.json"); ok {
		t.Error("WriteJSON stored an object it could not encode")
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WriteJSON(cctx, "c.json", in); err == nil || IsNotFound(err) {
		t.Errorf("WriteJSON with a cancelled context = %v", err)
	}
}

func keysOf(t *testing.T, s *Store) []string {
	t.Helper()
	var keys []string
	it := s.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}

// Count and DeletePrefix see the same objects under a prefix.
func TestDeletePrefix(t *testing.T) {
	for _, kind := range []string{"mem", "file"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			var s *Store
			if kind == "mem" {
				s = memStore(t, "mem://")
			} else {
				var err error
				s, err = Open(ctx, "file://"+t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
			all := []string{
				"lists/a/input", "lists/a/plan.json", "lists/a/parts/00000.part", "lists/a/result/r.csv",
				"lists/ab/input", "lists/b/input", "other/lists/a/input", "lists/a.csv",
			}
			for _, k := range all {
				if err := s.WriteAll(ctx, k, []byte(k), nil); err != nil {
					t.Fatal(err)
				}
			}
			for prefix, want := range map[string]int{"lists/a/": 4, "lists/a": 6, "lists/": 7, "": 8, "nothing/": 0} {
				if n, err := s.Count(ctx, prefix); err != nil || n != want {
					t.Errorf("Count(%q) = %d, %v; want %d", prefix, n, err, want)
				}
			}
			if err := s.DeletePrefix(ctx, ListKeys{UID: "a"}.Prefix()); err != nil {
				t.Fatal(err)
			}
			want := []string{"lists/a.csv", "lists/ab/input", "lists/b/input", "other/lists/a/input"}
			if got := keysOf(t, s); !slices.Equal(got, want) {
				t.Errorf("after DeletePrefix: %q, want %q", got, want)
			}
			if err := s.DeletePrefix(ctx, "nothing/"); err != nil {
				t.Errorf("DeletePrefix(nothing) = %v", err)
			}
			if err := s.DeletePrefix(ctx, "lists/a/"); err != nil {
				t.Errorf("second DeletePrefix = %v", err)
			}
		})
	}
}

func TestReaderAt(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, "mem://")
	if err := s.WriteAll(ctx, "obj", []byte("0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	ra, size, err := s.NewReaderAt(ctx, "obj")
	if err != nil || size != 10 {
		t.Fatalf("NewReaderAt = %d, %v", size, err)
	}
	tests := []struct {
		off  int64
		n    int
		want string
		err  error
	}{
		{0, 4, "0123", nil},
		{3, 3, "345", nil},
		{6, 4, "6789", nil},
		{8, 4, "89", io.EOF},
		{9, 1, "9", nil},
		{10, 4, "", io.EOF},
		{0, 10, "0123456789", nil},
		{0, 20, "0123456789", io.EOF},
	}
	for _, tt := range tests {
		p := make([]byte, tt.n)
		n, err := ra.ReadAt(p, tt.off)
		if string(p[:n]) != tt.want || err != tt.err {
			t.Errorf("ReadAt(%d bytes at %d) = %q, %v; want %q, %v", tt.n, tt.off, p[:n], err, tt.want, tt.err)
		}
	}
	if n, err := ra.ReadAt(make([]byte, 4), 11); n != 0 || err == nil {
		t.Errorf("ReadAt past the end = %d, %v", n, err)
	}
	if _, _, err := s.NewReaderAt(ctx, "missing"); !IsNotFound(err) {
		t.Errorf("NewReaderAt(missing) = %v", err)
	}

	// archive/zip reads a zip in the store through it.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("list.csv")
	io.WriteString(w, "email\na@x.com\n")
	zw.Close()
	if err := s.WriteAll(ctx, "z.zip", buf.Bytes(), nil); err != nil {
		t.Fatal(err)
	}
	zra, zsize, err := s.NewReaderAt(ctx, "z.zip")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(zra, zsize)
	if err != nil || len(zr.File) != 1 || zr.File[0].Name != "list.csv" {
		t.Fatalf("zip through ReaderAt: %v", err)
	}
	rc, _ := zr.File[0].Open()
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != "email\na@x.com\n" {
		t.Errorf("zip entry %q, %v", got, err)
	}
}

func TestOpenFileStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nested", "store")
	s, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("store directory not created: %v", err)
	}
	keys := ListKeys{UID: "u1"}
	if err := s.WriteAll(ctx, keys.Input(), []byte("email\na@x.com\n"), &blob.WriterOptions{ContentType: "text/csv"}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(ctx, keys.Plan(), doc{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	// An aborted write (cancelled before Close) leaves nothing behind.
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.NewWriter(wctx, "lists/u1/parts/00000.part", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("x"), 4096)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.Close(); err == nil {
		t.Error("Close after cancel succeeded")
	}

	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{keys.Input(), keys.Plan()}; !slices.Equal(files, want) {
		t.Errorf("files in the store directory: %q, want %q (no .attrs sidecars or temp files)", files, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, "lists", "u1", "input"))
	if err != nil || string(data) != "email\na@x.com\n" {
		t.Errorf("object on disk %q, %v", data, err)
	}
	var d doc
	if err := s.ReadJSON(ctx, keys.Plan(), 1<<10, &d); err != nil || d.Name != "p" {
		t.Errorf("ReadJSON = %+v, %v", d, err)
	}

	// URLs of objects in the store map back to their keys.
	if k, err := s.KeyFromURL("file://" + dir + "/" + keys.Input()); err != nil || k != keys.Input() {
		t.Errorf("KeyFromURL = %q, %v", k, err)
	}
	if _, err := s.KeyFromURL("file://" + filepath.Dir(dir) + "/x"); err == nil {
		t.Error("KeyFromURL accepted a URL outside the store directory")
	}

	// An existing directory opens too; explicit query parameters are kept.
	s2, err := Open(ctx, "file://"+dir+"?metadata=skip")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, err := s2.Size(ctx, keys.Input()); err != nil || n != 14 {
		t.Errorf("Size through a second store = %d, %v", n, err)
	}
	if k, err := s2.KeyFromURL("file://" + dir + "/a"); err != nil || k != "a" {
		t.Errorf("KeyFromURL with a query in the store URL = %q, %v", k, err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"nosuchscheme://x", "://bad", "file://" + t.TempDir() + "/x?metadata=bogus"} {
		if s, err := Open(ctx, u); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

// TestCopyTo copies an object whole into a plain file (the file store's
// in-kernel path) and into a buffer, from a file and a memory store; a
// missing object is not found.
func TestCopyTo(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("row,of,a,part\n"), 100_000) // 1.4 MB: several copy calls
	for _, tc := range []struct {
		name, url string
		toFile    bool
	}{
		{"file store to file", "file://" + filepath.ToSlash(t.TempDir()), true},
		{"file store to buffer", "file://" + filepath.ToSlash(t.TempDir()), false},
		{"mem store to file", "mem://", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.WriteAll(ctx, "lists/x/parts/00000.part", data, nil); err != nil {
				t.Fatal(err)
			}
			var got []byte
			var n int64
			if tc.toFile {
				path := filepath.Join(t.TempDir(), "out")
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString("header\n")
				n, err = s.CopyTo(ctx, f, "lists/x/parts/00000.part")
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
				got, _ = os.ReadFile(path)
				var ok bool // the copy goes after what the file had, at its offset
				if got, ok = bytes.CutPrefix(got, []byte("header\n")); !ok {
					t.Errorf("the file's first line was overwritten")
				}
			} else {
				var buf bytes.Buffer
				n, err = s.CopyTo(ctx, &buf, "lists/x/parts/00000.part")
				if err != nil {
					t.Fatal(err)
				}
				got = buf.Bytes()
			}
			if n != int64(len(data)) || !bytes.Equal(got, data) {
				t.Errorf("copied %d bytes, %d in the destination; want %d, equal", n, len(got), len(data))
			}
			if _, err := s.CopyTo(ctx, io.Discard, "lists/x/parts/00001.part"); !IsNotFound(err) {
				t.Errorf("missing object: error %v, want not found", err)
			}
		})
	}
}
