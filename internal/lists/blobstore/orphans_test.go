package blobstore_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// RemoveOrphanUploads on a file store: what a killed API leaves in the
// uploads folder (temporary files, objects no list names) goes once it is
// older than the cutoff; a list's upload, a young leftover, an upload
// being written and anything outside the uploads folder stay.
func TestRemoveOrphanUploadsFileStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	put := func(key string, size int, mtime time.Time) {
		t.Helper()
		if err := st.WriteAll(ctx, key, make([]byte, size), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, key), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	put("uploads/t1/a/list.csv", 10, old)                       // a live list's upload
	put("uploads/t1/b/list.csv.18c2f3a4b5c6d7e8.tmp", 100, old) // an API killed mid-upload
	put("uploads/t2/c/list.zip", 1000, old)                     // killed after the upload, before the list
	put("uploads/t1/d/list.csv.18c2f3a4b5c6d7e9.tmp", 7, now)   // young: may be someone's upload
	put("lists/u1/input.18c2f3a4b5c6d7ea.tmp", 5, old)          // not an upload: the list's own
	// An upload being written: its temporary file exists, fresh.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := st.NewWriter(wctx, "uploads/t1/e/list.csv", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}

	live := map[string]bool{"uploads/t1/a/list.csv": true}
	var asked []string
	res, err := st.RemoveOrphanUploads(ctx, now.Add(-24*time.Hour), func(key string) bool {
		asked = append(asked, key)
		return live[key]
	})
	if err != nil {
		t.Fatal(err)
	}
	if res != (blobstore.SweepResult{Objects: 2, Bytes: 1100}) {
		t.Errorf("removed %+v, want the 2 old orphans (1100 bytes)", res)
	}
	var left []string
	it := st.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break
		}
		left = append(left, obj.Key)
	}
	slices.Sort(left)
	for _, want := range []string{"lists/u1/input.18c2f3a4b5c6d7ea.tmp", "uploads/t1/a/list.csv", "uploads/t1/d/list.csv.18c2f3a4b5c6d7e9.tmp"} {
		if !slices.Contains(left, want) {
			t.Errorf("%s was removed; left %v", want, left)
		}
	}
	for _, gone := range []string{"uploads/t1/b/list.csv.18c2f3a4b5c6d7e8.tmp", "uploads/t2/c/list.zip"} {
		if slices.Contains(left, gone) {
			t.Errorf("%s is still there", gone)
		}
	}
	if len(left) != 4 { // the three above and the upload being written
		t.Errorf("left %v", left)
	}
	// keep is asked about old uploads only.
	slices.Sort(asked)
	if want := []string{"uploads/t1/a/list.csv", "uploads/t1/b/list.csv.18c2f3a4b5c6d7e8.tmp", "uploads/t2/c/list.zip"}; !slices.Equal(asked, want) {
		t.Errorf("keep asked about %v, want %v", asked, want)
	}
	// The upload being written completes.
	if err := w.Close(); err != nil {
		t.Fatalf("the upload being written failed: %v", err)
	}
	if n, err := st.Size(ctx, "uploads/t1/e/list.csv"); err != nil || n != 4096 {
		t.Errorf("completed upload: %d bytes, %v", n, err)
	}
}
