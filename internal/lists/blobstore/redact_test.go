package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// Store.Redact drops the file store's directory from what a client reads:
// from the store's own errors (through gocloud's wrapping) and from plain
// text that names it.
func TestStoreRedact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	// A real error of the file store: a key under an object (a file where
	// a folder must be) fails in the store's own mkdir.
	if err := store.WriteAll(ctx, "lists/u1/input", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	storeErr := store.WriteAll(ctx, "lists/u1/input/part", []byte("x"), nil)
	if storeErr == nil || !strings.Contains(storeErr.Error(), dir) {
		t.Fatalf("the store's error %v does not name its directory: the test is void", storeErr)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"file store", fmt.Errorf("shard 0: write part: %w", storeErr),
			`shard 0: write part: blob (key "lists/u1/input/part") (code=Unknown): mkdir: not a directory`},
		{"the directory in plain text", fmt.Errorf("%s is not a directory", filepath.Join(dir, "lists")), blobstore.StoreRootMark + "/lists is not a directory"},
		{"content", errors.New(`line 3: unterminated quoted field`), `line 3: unterminated quoted field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Redact(tc.err); got != tc.want || strings.Contains(got, dir) {
				t.Errorf("Redact\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
