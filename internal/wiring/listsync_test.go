package wiring

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// TestPublishedLists: the manager publishes the ConfigMap's extensions to
// the store; a worker applies them, so Job workers see operator lists.
func TestPublishedLists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "disposable.txt"), []byte("quickthrow-test.io\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	last, err := PublishLists(ctx, store, dir, ListsBlobKey, nil)
	if err != nil || last == nil {
		t.Fatal(err)
	}
	// Unchanged files are not rewritten.
	if again, err := PublishLists(ctx, store, dir, ListsBlobKey, last); err != nil || again != last {
		t.Fatalf("republished unchanged lists: %v", err)
	}

	worker := OfflineEngine()
	if r := worker.Verify(ctx, "x@quickthrow-test.io", verify.Options{}); r.Code == verify.CodeSpamTrap {
		t.Fatal("the embedded lists should not know quickthrow-test.io")
	}
	if err := ApplyPublishedLists(ctx, worker, store, ListsBlobKey); err != nil {
		t.Fatal(err)
	}
	r := worker.Verify(ctx, "x@quickthrow-test.io", verify.Options{})
	if r.Code != verify.CodeSpamTrap || r.DomainType != "disposable" {
		t.Fatalf("published extension not applied: %d %s", r.Code, r.DomainType)
	}
	// No published object: the embedded lists stay.
	if err := ApplyPublishedLists(ctx, OfflineEngine(), store, "config/missing.json"); err != nil {
		t.Fatal(err)
	}
}
