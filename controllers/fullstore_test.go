package controllers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/operator"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory until the
// test ends: a store that really fills up, with the kernel's ENOSPC. It
// needs root (as make test and CI run); elsewhere the test skips, and
// under CI=true it fails.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (CI=true): %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs (not root?): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillTo writes a file into the filesystem of dir until only free bytes
// are left.
func fillTo(t *testing.T, dir string, free int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * st.Bsize
	if avail <= free {
		t.Fatalf("only %d bytes free in %s, want more than %d", avail, dir, free)
	}
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, avail-free), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFullStoreMessagesNameNoPath: with the store's disk full, what a
// list's owner reads (its conditions and events, which the REST API shows
// as the list's error) names the condition, "no space left on device",
// and never the store's path on the server. A list whose shards cannot
// write fails saying so; a zip that cannot be extracted waits, saying why.
// The store is a real filesystem that fills up (a tmpfs).
func TestFullStoreMessagesNameNoPath(t *testing.T) {
	ctx := context.Background()
	mnt := mountTmpfs(t, 1<<20)
	storeDir := filepath.Join(mnt, "store")
	full, err := blobstore.Open(ctx, "file://"+storeDir)
	if err != nil {
		t.Fatal(err)
	}
	ns := uniqueName("full-store")
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	o := baseOptions
	o.Store, o.BlobURL = full, "file://"+storeDir
	o.Executor, o.Namespace, o.WatchNamespaces = operator.ExecutorLocal, ns, []string{ns}
	o.Pipeline.Limits = listfile.DefaultLimits()
	defer startManager(t, o)()

	// 200 KB of rows, in 8 shards whose parts need more room than is left;
	// and the same rows zipped, whose extraction needs it too.
	var rows strings.Builder
	for i := 0; rows.Len() < 200<<10; i++ {
		fmt.Fprintf(&rows, "user%d@example%d.com\n", i, i%50)
	}
	put := func(data []byte) string {
		key := blobstore.UploadPrefix(testTenant) + uniqueName("u")
		if err := full.WriteAll(ctx, key, data, nil); err != nil {
			t.Fatal(err)
		}
		return key
	}
	plain, zipped := put([]byte(rows.String())), put(zipOf(t, map[string]string{"rows.csv": rows.String()}))
	fillTo(t, mnt, 64<<10)

	noPath := func(what, msg string) {
		t.Helper()
		if strings.Contains(msg, mnt) || strings.Contains(msg, "/store/") {
			t.Errorf("%s names the store's path: %q", what, msg)
		}
		if !strings.Contains(msg, "no space left on device") {
			t.Errorf("%s does not name the condition: %q", what, msg)
		}
	}
	t.Run("shards", func(t *testing.T) {
		name := uniqueName("full")
		create(t, builders.MakeEmailList(ns, name).APIUpload(plain, testTenant).Obj())
		l := waitPhase(t, ns, name, listsv1.PhaseFailed)
		noPath("the Stalled condition", condition(l.Status.Conditions, listsv1.ConditionStalled).Message)
		eventually(t, 10*time.Second, "a Warning event", func() (bool, string) {
			evs := warningEvents(t, ns, name)
			return len(evs) > 0, ""
		})
		for _, e := range warningEvents(t, ns, name) {
			noPath("the event", e)
		}
	})
	// The failed list keeps its upload (200 KB): the store stays full.
	t.Run("extraction", func(t *testing.T) {
		name := uniqueName("full-zip")
		create(t, builders.MakeEmailList(ns, name).FileName("rows.zip").APIUpload(zipped, testTenant).Obj())
		eventually(t, 30*time.Second, "the list to say why it waits", func() (bool, string) {
			l := getList(t, ns, name)
			c := condition(l.Status.Conditions, listsv1.ConditionReconciling)
			return c != nil && strings.Contains(c.Message, "retried"), fmt.Sprintf("%+v", l.Status.Conditions)
		})
		l := getList(t, ns, name)
		if l.Status.Phase != listsv1.PhasePending {
			t.Errorf("phase %s, want Pending (retried, nothing is wrong with the list)", l.Status.Phase)
		}
		noPath("the Reconciling condition", condition(l.Status.Conditions, listsv1.ConditionReconciling).Message)
	})
}
