package controllers_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
)

var nameSeq atomic.Int64

// uniqueName keeps tests independent of each other.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1))
}

// testTenant is the tenant label of the test's API-made lists.
const testTenant = "t-test"

// putUpload puts data in the store under a fresh key of testTenant's
// upload folder, as the REST API does, and returns the key.
func putUpload(t *testing.T, data []byte) string {
	t.Helper()
	key := blobstore.UploadPrefix(testTenant) + uniqueName("u")
	if err := store.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
	return key
}

func createConfigMap(t *testing.T, ns, name, key, data string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{key: data}}
	if err := k8s.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
}

func getList(t *testing.T, ns, name string) *listsv1.EmailList {
	t.Helper()
	var l listsv1.EmailList
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

// waitPhase waits for a list to reach phase, failing fast on Failed.
func waitPhase(t *testing.T, ns, name string, phase listsv1.Phase) *listsv1.EmailList {
	t.Helper()
	return waitPhaseWithin(t, ns, name, phase, 60*time.Second)
}

func waitPhaseWithin(t *testing.T, ns, name string, phase listsv1.Phase, timeout time.Duration) *listsv1.EmailList {
	t.Helper()
	var l *listsv1.EmailList
	eventually(t, timeout, fmt.Sprintf("list %s/%s to be %s", ns, name, phase), func() (bool, string) {
		l = getList(t, ns, name)
		if l.Status.Phase == listsv1.PhaseFailed && phase != listsv1.PhaseFailed {
			t.Fatalf("list failed: %v", l.Status.Conditions)
		}
		return l.Status.Phase == phase, fmt.Sprintf("phase=%q conditions=%v", l.Status.Phase, l.Status.Conditions)
	})
	return l
}

func ptrTo[T any](v T) *T { return &v }

func testLimits() listfile.Limits {
	return listfile.Limits{MaxExpandedBytes: testLimit, MaxRecordBytes: 4096}
}

func condition(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}

// warningEvents returns the Warning events about an object.
func warningEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

func readResult(t *testing.T, l *listsv1.EmailList) []byte {
	t.Helper()
	data, err := store.ReadAll(context.Background(), l.Status.Result.Key)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func fmtConds(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "[%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
