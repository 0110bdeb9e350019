package restapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestUploadToFullStore: with the store's disk full (a real filesystem
// that fills up: a 1 MiB tmpfs), a submission is answered 507
// InsufficientStorage naming the condition, never the store's path on the
// server, and nothing of the upload is kept. The tmpfs needs root (as make
// test and CI run); elsewhere the test skips, and under CI=true it fails.
func TestUploadToFullStore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1048576", "tmpfs", mnt).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (CI=true): %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs (not root?): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	st, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(mnt, &fs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, int64(fs.Bavail)*fs.Bsize-32<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := startAPIStore(ctx, restapi.Config{}, st)
	if err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for i := 0; rows.Len() < 200<<10; i++ {
		fmt.Fprintf(&rows, "user%d@example.com\n", i)
	}
	body, ct := multipartFile(t, "big.csv", []byte(rows.String()))
	req := newRequest(t, http.MethodPost, "/v5/list", keyAcme, body, ct)
	req.URL.Host = addr
	r := do(t, req)
	if r.code != http.StatusInsufficientStorage {
		t.Fatalf("status %d, want 507: %s", r.code, r.body)
	}
	m := r.json(t)
	msg, _ := m["message"].(string)
	if m["error"] != "InsufficientStorage" || !strings.Contains(msg, "store is full") {
		t.Errorf("%v, want InsufficientStorage saying the store is full", m)
	}
	if strings.Contains(string(r.body), mnt) || strings.Contains(string(r.body), "/store") {
		t.Errorf("the answer names the store's path: %s", r.body)
	}
	if n, err := st.Count(ctx, blobstore.UploadsFolder); err != nil || n != 0 {
		t.Errorf("%d objects left in the uploads folder (%v)", n, err)
	}
}
