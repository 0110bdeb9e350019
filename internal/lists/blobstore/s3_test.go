package blobstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/emaildata/emaildata/internal/kits/s3server"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// The operator's store and users' own buckets on a real S3-compatible
// server (SeaweedFS, built by hack/s3-server.sh): where S3 servers differ
// from a file system or a fake are multipart uploads, paginated listings,
// signatures and per-bucket permissions.

var (
	s3Admin = s3server.Identity{Name: "operator", AccessKey: "AKOPERATOR", SecretKey: "operator-secret"}
	s3TeamB = s3server.Identity{Name: "team-b", AccessKey: "AKIDTEAMB", SecretKey: "team-b-secret", Buckets: []string{"team-b"}}
)

// TestS3 runs the tests below on one server.
func TestS3(t *testing.T) {
	srv := s3server.ForTest(t, s3server.Options{Identities: []s3server.Identity{s3Admin, s3TeamB}, Buckets: []string{"store", "team-b"}})
	for name, test := range map[string]func(*testing.T, *s3server.Server){
		"StoreMultipart": testS3StoreMultipart, "StoreDeletePrefix": testS3StoreDeletePrefix,
		"StoreBasics": testS3StoreBasics, "OpenExternal": testOpenExternal, "WriterBounded": testS3WriterBounded,
		"OrphanUploads": testS3OrphanUploads,
	} {
		t.Run(name, func(t *testing.T) { test(t, srv) })
	}
}

// openS3Store opens the store as the operator does: its s3:// URL, the
// credentials from the environment.
func openS3Store(t *testing.T, srv *s3server.Server) *blobstore.Store {
	t.Helper()
	for _, kv := range s3Admin.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	st, err := blobstore.Open(context.Background(), srv.StoreURL("store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pattern is n deterministic bytes that differ from part to part.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/4099)
	}
	return b
}

// An object of many parts (past the AWS SDK transfer manager's own 16 MiB
// multipart threshold too), written with the options the pipeline writes
// parts and results with, goes up as a multipart upload
// (parts smaller than MinPartSize would be refused), and reads back whole
// and by ranges across parts.
func testS3StoreMultipart(t *testing.T, srv *s3server.Server) {
	st := openS3Store(t, srv)
	ctx := context.Background()
	data := pattern(40<<20 + 12345)
	opts := blobstore.WriterOptions("text/csv")
	w, err := st.NewWriter(ctx, "lists/u1/result.csv", &opts)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 1 << 20 { // as a merge writes: in pieces
		if _, err := w.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	attrs, err := st.Attributes(ctx, "lists/u1/result.csv")
	if err != nil {
		t.Fatal(err)
	}
	// S3 gives a multipart object the ETag "<md5 of the parts' md5s>-<parts>".
	if attrs.Size != int64(len(data)) || !strings.Contains(attrs.ETag, "-") {
		t.Fatalf("size %d etag %s: want %d bytes uploaded in parts", attrs.Size, attrs.ETag, len(data))
	}
	got, err := st.ReadAll(ctx, "lists/u1/result.csv")
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("read back %d bytes (%v), not what was written", len(got), err)
	}
	ra, size, err := st.NewReaderAt(ctx, "lists/u1/result.csv")
	if err != nil || size != int64(len(data)) {
		t.Fatalf("reader at: size %d, %v", size, err)
	}
	for _, off := range []int64{0, blobstore.MinPartSize - 100, 16<<20 - 1, int64(len(data)) - 50} {
		buf := make([]byte, 200)
		n, err := ra.ReadAt(buf, off)
		want := data[off:min(off+200, int64(len(data)))]
		if !bytes.Equal(buf[:n], want) || (n < 200 && err != io.EOF) {
			t.Errorf("ReadAt(%d) = %d bytes, %v", off, n, err)
		}
	}
}

// Every writer of the store is bounded, whatever options its caller gave:
// with none (as a REST upload writes) or with parts too small for S3 (1
// MiB), a 40 MiB object goes up in parts of MinPartSize, and writing it
// allocates a few parts' worth (the transfer manager's defaults allocate
// about 90 MiB: 34 MiB reading its 16 MiB multipart threshold, 48 MiB of
// parts; with the part size and concurrency alone, about 56 MiB).
func testS3WriterBounded(t *testing.T, srv *s3server.Server) {
	st := openS3Store(t, srv)
	ctx := context.Background()
	data := pattern(40<<20 + 12345)
	wantParts := (len(data) + blobstore.MinPartSize - 1) / blobstore.MinPartSize
	for name, opts := range map[string]*blob.WriterOptions{
		"none":     nil,
		"1MiB":     {ContentType: "text/csv", BufferSize: 1 << 20},
		"pipeline": ptrTo(blobstore.WriterOptions("text/csv")),
	} {
		key := "bounded/" + name
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w, err := st.NewWriter(ctx, key, opts)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 32 << 10 { // as a part is written: in small pieces
			if _, err := w.Write(data[off:min(off+32<<10, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.ReadMemStats(&after)
		attrs, err := st.Attributes(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if attrs.Size != int64(len(data)) || !strings.HasSuffix(attrs.ETag, fmt.Sprintf("-%d\"", wantParts)) {
			t.Errorf("%s: %d bytes, ETag %s: want %d bytes in %d parts of MinPartSize", name, attrs.Size, attrs.ETag, len(data), wantParts)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 40<<20 {
			t.Errorf("%s: writing %d MiB allocated %d MiB, want at most 40 (about 3 parts and a part's first read)", name, len(data)>>20, alloc>>20)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// Deleting a list's prefix deletes every object under it, past the first
// page of a listing (1000 keys), and nothing beside it.
func testS3StoreDeletePrefix(t *testing.T, srv *s3server.Server) {
	st := openS3Store(t, srv)
	ctx := context.Background()
	const n = 1100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- st.WriteAll(ctx, fmt.Sprintf("dp/doomed/parts/%05d.part", i), []byte("x"), nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"dp/doomed-not/keep", "dp/other/keep", "dp/doomed"} {
		if err := st.WriteAll(ctx, k, []byte("keep"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(t, st, "dp/doomed/"); got != n {
		t.Fatalf("listed %d objects under the prefix, want %d", got, n)
	}
	if err := st.DeletePrefix(ctx, "dp/doomed/"); err != nil {
		t.Fatal(err)
	}
	if got := count(t, st, "dp/doomed/"); got != 0 {
		t.Errorf("%d objects left under the prefix", got)
	}
	if got := count(t, st, "dp/"); got != 3 {
		t.Errorf("%d objects beside the prefix, want the 3 kept", got)
	}
	if _, err := st.Size(ctx, "dp/doomed/parts/00000.part"); !blobstore.IsNotFound(err) {
		t.Errorf("deleted object: %v, want not found", err)
	}
}

func count(t *testing.T, st *blobstore.Store, prefix string) int {
	t.Helper()
	n, err := st.Count(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The store's small objects, missing objects and its URLs on S3.
func testS3StoreBasics(t *testing.T, srv *s3server.Server) {
	st := openS3Store(t, srv)
	ctx := context.Background()
	if _, err := st.Size(ctx, "lists/none/plan.json"); !blobstore.IsNotFound(err) {
		t.Errorf("missing object: %v, want not found", err)
	}
	type plan struct{ Shards int }
	if err := st.WriteJSON(ctx, "lists/u2/plan.json", plan{Shards: 3}); err != nil {
		t.Fatal(err)
	}
	var p plan
	if err := st.ReadJSON(ctx, "lists/u2/plan.json", 1<<10, &p); err != nil || p.Shards != 3 {
		t.Errorf("read back %+v, %v", p, err)
	}
	if err := st.ReadJSON(ctx, "lists/u2/plan.json", 4, &p); err == nil || !strings.Contains(err.Error(), "more than the 4 allowed") {
		t.Errorf("oversized JSON: %v", err)
	}
	if key, err := st.KeyFromURL("s3://store/lists/u2/plan.json"); err != nil || key != "lists/u2/plan.json" {
		t.Errorf("KeyFromURL = %q, %v", key, err)
	}
	if _, err := st.KeyFromURL("s3://team-b/in/list.csv"); err == nil {
		t.Error("another bucket's URL was taken for the store's")
	}
}

// testOpenExternal reads a user's object from their bucket with the
// Secret's credentials, which the server checks: a wrong secret, and the
// right key pair on a bucket it has no rights to, are refused.
func testOpenExternal(t *testing.T, srv *s3server.Server) {
	ctx := context.Background()
	if _, err := srv.Client(s3TeamB).PutObject(ctx, putInput("team-b", "in/list.csv", "a@example.com\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(s3Admin).PutObject(ctx, putInput("store", "lists/x/result.csv", "secret@victim.example\n")); err != nil {
		t.Fatal(err)
	}
	open := func(raw string, c blobstore.Credentials) (*blob.Bucket, blobstore.ExternalURL) {
		t.Helper()
		ext, err := blobstore.ParseExternalURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		b, err := blobstore.OpenExternal(ctx, ext, c, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b, ext
	}
	good := blobstore.Credentials{AccessKeyID: s3TeamB.AccessKey, SecretAccessKey: s3TeamB.SecretKey}
	b, ext := open("s3://team-b/in/list.csv?region=eu-west-1&endpoint="+srv.Endpoint, good)
	if data, err := b.ReadAll(ctx, ext.Key); err != nil || string(data) != "a@example.com\n" {
		t.Fatalf("read %q, %v", data, err)
	}
	if _, err := b.ReadAll(ctx, "in/missing.csv"); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing object: %v, want NotFound", err)
	}
	wrong := blobstore.Credentials{AccessKeyID: s3TeamB.AccessKey, SecretAccessKey: "guess"}
	b, ext = open("s3://team-b/in/list.csv?endpoint="+srv.Endpoint, wrong)
	if data, err := b.ReadAll(ctx, ext.Key); !blobstore.IsAccessDenied(err) {
		t.Errorf("wrong secret: read %q, %v; want access denied", data, err)
	}
	b, ext = open("s3://store/lists/x/result.csv?endpoint="+srv.Endpoint, good)
	if data, err := b.ReadAll(ctx, ext.Key); !blobstore.IsAccessDenied(err) {
		t.Errorf("team-b's key on the operator's bucket: read %q, %v; want access denied", data, err)
	}
}

func putInput(bucket, key, body string) *s3.PutObjectInput {
	return &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}
}

// BenchmarkS3Writer writes one 60 MB object the way a part is written (32
// KiB at a time) through gocloud's S3 writer with the transfer manager's
// defaults (sdk-defaults: what a writer without options had), with
// blobstore.WriterOptions alone (sdk-writeroptions), and through
// Store.NewWriter (store: every writer now). rss-MiB is the process's peak
// RSS above its RSS before the write (VmHWM, reset with clear_refs), the
// largest of the iterations.
//
//	go test -run '^$' -bench BenchmarkS3Writer -benchtime 5x ./internal/lists/blobstore/
func BenchmarkS3Writer(b *testing.B) {
	srv := s3server.ForTest(b, s3server.Options{Identities: []s3server.Identity{s3Admin}, Buckets: []string{"store"}})
	for _, kv := range s3Admin.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	ctx := context.Background()
	st, err := blobstore.Open(ctx, srv.StoreURL("store"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	chunk := pattern(32 << 10)
	const size = 60 << 20
	wo := blobstore.WriterOptions("text/csv")
	for _, bc := range []struct {
		name string
		open func(key string) (*blob.Writer, error)
	}{
		{"sdk-defaults", func(key string) (*blob.Writer, error) { return st.Bucket.NewWriter(ctx, key, nil) }},
		{"sdk-writeroptions", func(key string) (*blob.Writer, error) { return st.Bucket.NewWriter(ctx, key, &wo) }},
		{"store", func(key string) (*blob.Writer, error) { return st.NewWriter(ctx, key, nil) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			var peak int64
			for i := 0; b.Loop(); i++ {
				runtime.GC()
				debug.FreeOSMemory()
				_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
				base := procStatus(b, "VmRSS:")
				w, err := bc.open(fmt.Sprintf("bench/%s/%d", bc.name, i))
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n < size; n += len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				peak = max(peak, procStatus(b, "VmHWM:")-base)
			}
			b.ReportMetric(float64(peak)/(1<<20), "rss-MiB")
		})
	}
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// On S3 a killed API leaves an incomplete multipart upload: invisible to
// listings, still stored. RemoveOrphanUploads aborts those under the
// uploads folder whose last part is older than the cutoff (none while they
// are young), removes old objects no list claims, and leaves a claimed
// one and everything outside the uploads folder.
func testS3OrphanUploads(t *testing.T, srv *s3server.Server) {
	st := openS3Store(t, srv)
	ctx := context.Background()
	c := srv.Client(s3Admin)
	start := func(key string) {
		t.Helper()
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("store"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("store"), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(pattern(blobstore.MinPartSize))}); err != nil {
			t.Fatal(err)
		}
	}
	start("uploads/t1/killed/list.csv")
	start("lists/u1/input") // a list's own: not the sweep's
	for _, key := range []string{"uploads/t1/live/list.csv", "uploads/t1/orphan/list.csv"} {
		if err := st.WriteAll(ctx, key, []byte("a@example.com\n"), nil); err != nil {
			t.Fatal(err)
		}
	}
	multiparts := func(prefix string) int {
		t.Helper()
		out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("store"), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	keep := func(key string) bool { return key == "uploads/t1/live/list.csv" }

	// Everything is young: nothing goes.
	if res, err := st.RemoveOrphanUploads(ctx, time.Now().Add(-time.Hour), keep); err != nil || res != (blobstore.SweepResult{}) {
		t.Fatalf("young: removed %+v, %v", res, err)
	}
	if multiparts("uploads/") != 1 {
		t.Fatal("the young multipart upload was aborted")
	}
	// With the cutoff past them, the orphans go.
	res, err := st.RemoveOrphanUploads(ctx, time.Now().Add(time.Hour), keep)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 1 || res.Multiparts != 1 {
		t.Errorf("removed %+v, want 1 object and 1 multipart upload", res)
	}
	if n := multiparts("uploads/"); n != 0 {
		t.Errorf("%d multipart uploads left under uploads/", n)
	}
	if n := multiparts("lists/"); n != 1 {
		t.Errorf("%d multipart uploads under lists/, want the list's own 1", n)
	}
	if _, err := st.Size(ctx, "uploads/t1/live/list.csv"); err != nil {
		t.Errorf("the live list's upload: %v", err)
	}
	if _, err := st.Size(ctx, "uploads/t1/orphan/list.csv"); !blobstore.IsNotFound(err) {
		t.Errorf("the orphaned object: %v, want gone", err)
	}
}
