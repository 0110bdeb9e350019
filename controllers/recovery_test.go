package controllers_test

import (
	"context"
	"testing"
	"time"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// TestLateConfigMapRecovers: a list whose ConfigMap appears after the
// source grace has failed (SourceMissing); when the ConfigMap appears, the
// ConfigMap watch brings it back and it reaches Results.
func TestLateConfigMapRecovers(t *testing.T) {
	t.Parallel() // its list alone: most of its time is the source grace
	name := uniqueName("late")
	create(t, builders.MakeEmailList(nsLocal, name).ConfigMap(name, "list.csv").Obj())
	l := waitPhase(t, nsLocal, name, listsv1.PhaseFailed)
	if c := condition(l.Status.Conditions, listsv1.ConditionStalled); c == nil || c.Reason != controllers.ReasonSourceMissing {
		t.Fatalf("Stalled = %+v, want SourceMissing", c)
	}
	time.Sleep(time.Second)
	createConfigMap(t, nsLocal, name, "list.csv", "a@example.com\n")
	eventually(t, 20*time.Second, "the list to recover", func() (bool, string) {
		l = getList(t, nsLocal, name)
		return l.Status.Phase == listsv1.PhaseResults, string(l.Status.Phase) + " " + fmtConds(l.Status.Conditions)
	})
	if c := condition(l.Status.Conditions, listsv1.ConditionStalled); c != nil {
		t.Errorf("a recovered list is still Stalled: %+v", c)
	}
	if l.Status.Records != 1 {
		t.Errorf("records %d", l.Status.Records)
	}
}

// TestFailedListKeepsSize: a list that fails on its content still reports
// how large its file was.
func TestFailedListKeepsSize(t *testing.T) {
	data := []byte("a,b\nc,d\n")
	name := uniqueName("failed-size")
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, data), testTenant).EmailColumn(5).Obj())
	l := waitPhase(t, nsLocal, name, listsv1.PhaseFailed)
	if l.Status.SizeBytes != int64(len(data)) {
		t.Errorf("size %d, want %d", l.Status.SizeBytes, len(data))
	}
}

// TestPartsDeletedAfterMerge: once the outcome is saved, the shards'
// parts, summaries and progress files go; the plan and result stay.
func TestPartsDeletedAfterMerge(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("parts")
	var rows string
	for i := 0; len(rows) < 3*256; i++ {
		rows += "someone@example.com\n"
	}
	createConfigMap(t, nsLocal, name, "list.csv", rows)
	create(t, builders.MakeEmailList(nsLocal, name).ConfigMap(name, "list.csv").Obj())
	l := waitPhase(t, nsLocal, name, listsv1.PhaseResults)
	if l.Status.Shards < 2 {
		t.Fatalf("%d shards; the test wants several", l.Status.Shards)
	}
	keys := blobstore.ListKeys{UID: string(l.UID)}
	eventually(t, 10*time.Second, "parts deleted", func() (bool, string) {
		left := objectsUnder(t, keys.Parts())
		return len(left) == 0, (func() string {
			s := ""
			for _, k := range left {
				s += k + " "
			}
			return s
		})()
	})
	for _, k := range []string{keys.Plan(), l.Status.Result.Key} {
		if ok, _ := store.Exists(ctx, k); !ok {
			t.Errorf("%s was deleted", k)
		}
	}
}
