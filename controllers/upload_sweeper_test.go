package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// TestOrphanedUploadsRemoved: a real manager removes what an API killed
// mid-upload leaves in the store (the temporary file of an upload nothing
// wrote for longer than --orphan-upload-age), counts it in
// emaildata_orphan_uploads_removed_total, and keeps a younger leftover
// (which may be an upload under way) and the upload a live list reads,
// however old.
func TestOrphanedUploadsRemoved(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ctx := context.Background()
	dir := t.TempDir()
	st, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	const age = time.Hour
	ns := uniqueName("sweep")
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	prefix := blobstore.UploadPrefix(testTenant)
	put := func(key string, mtime time.Time) string {
		t.Helper()
		if err := st.WriteAll(ctx, key, []byte("a@example.com\n"), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, key), mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return key
	}
	old, young := time.Now().Add(-2*age), time.Now()
	killed := put(prefix+"killed/list.csv.18c2f3a4b5c6d7e8.tmp", old) // the API died writing it
	fresh := put(prefix+"fresh/list.csv.18c2f3a4b5c6d7e9.tmp", young) // may be an upload under way
	live := put(prefix+"live/list.csv", old)                          // a list reads it
	name := uniqueName("swept")
	create(t, builders.MakeEmailList(ns, name).APIUpload(live, testTenant).Obj())

	removed := func() float64 {
		return managerSample(t, metrics.OrphanUploads, map[string]string{"kind": blobstore.OrphanObject})
	}
	sweeps := func() float64 {
		return managerSample(t, metrics.UploadSweeps, map[string]string{"outcome": metrics.SweepSucceeded})
	}
	before := removed()
	o := baseOptions
	o.Store, o.BlobURL = st, "file://"+dir
	o.Executor, o.Namespace, o.WatchNamespaces = operator.ExecutorLocal, ns, []string{ns}
	o.OrphanUploadAge, o.UploadSweepInterval = age, 50*time.Millisecond
	defer startManager(t, o)()

	exists := func(key string) bool {
		_, err := os.Stat(filepath.Join(dir, key))
		return err == nil
	}
	eventually(t, 30*time.Second, "the killed upload to be removed", func() (bool, string) {
		return !exists(killed) && removed() == before+1, fmt.Sprintf("exists %v, removed %v (from %v)", exists(killed), removed(), before)
	})
	// A few more sweeps of this manager (the suite's others sweep every
	// 10 minutes): nothing else goes.
	done := sweeps()
	eventually(t, 30*time.Second, "three more sweeps", func() (bool, string) {
		return sweeps() >= done+3, fmt.Sprint(sweeps())
	})
	for _, key := range []string{fresh, live} {
		if !exists(key) {
			t.Errorf("%s was removed", key)
		}
	}
	if got := removed(); got != before+1 {
		t.Errorf("%v orphans counted, want %v", got, before+1)
	}
	if l := waitPhase(t, ns, name, listsv1.PhaseResults); l.Status.Result.Rows != 1 {
		t.Errorf("the live list's result has %d rows, want 1", l.Status.Result.Rows)
	}
}
