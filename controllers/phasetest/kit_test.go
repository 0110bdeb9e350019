// Package phasetest_test runs the reconcilers' phase logic (EmailList,
// Purchase, Dataset) on controller-runtime's fake client with a fake clock
// injected through their Clock field: time-outs, grace periods, requeues,
// phase transitions and kstatus conditions, in milliseconds. It is a
// package of its own so that it runs without the envtest suite package
// controllers starts in its TestMain; what needs a real API server (CEL
// rules, field selectors, the Job controller, RBAC) stays there.
package phasetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// ns is the operator's namespace in these tests (the API's, and the one
// where Datasets are honoured).
const ns = "emaildata-system"

// t0 is when every test starts: whole seconds, as metav1.Time keeps them.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a fake cluster, a fake clock, an in-memory store and a recorder.
type world struct {
	t      *testing.T
	c      client.Client
	clock  *clocktesting.FakeClock
	store  *blobstore.Store
	events *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(kubescheme.New()).
		WithStatusSubresource(&listsv1.EmailList{}, &listsv1.Purchase{}, &listsv1.Dataset{}).
		WithObjects(objs...)
	for _, ix := range controllers.Indexes() {
		b = b.WithIndex(ix.Object, ix.Field, ix.Extract)
	}
	store, err := blobstore.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &world{t: t, c: b.Build(), clock: clocktesting.NewFakeClock(t0), store: store, events: events.NewFakeRecorder(100)}
}

// reconcile runs r once for obj and fails the test on an error unless
// wantErr.
func (w *world) reconcile(r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, obj client.Object, wantErr bool) ctrl.Result {
	w.t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if (err != nil) != wantErr {
		w.t.Fatalf("reconcile %s: error %v, want an error: %v", obj.GetName(), err, wantErr)
	}
	return res
}

func (w *world) create(objs ...client.Object) {
	w.t.Helper()
	for _, o := range objs {
		if err := w.c.Create(context.Background(), o); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) list(name string) *listsv1.EmailList {
	w.t.Helper()
	var l listsv1.EmailList
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l); err != nil {
		w.t.Fatal(err)
	}
	return &l
}

func (w *world) purchase(name string) *listsv1.Purchase {
	w.t.Helper()
	var p listsv1.Purchase
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		w.t.Fatal(err)
	}
	return &p
}

func (w *world) dataset(name string) *listsv1.Dataset {
	w.t.Helper()
	var d listsv1.Dataset
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		w.t.Fatal(err)
	}
	return &d
}

// takeEvents returns the events recorded since the last call.
func (w *world) takeEvents() []string {
	var out []string
	for {
		select {
		case e := <-w.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// wantEvent fails unless exactly one of the new events starts with prefix
// (e.g. "Warning SourceMissing"); other events are ignored.
func (w *world) wantEvent(prefix string) {
	w.t.Helper()
	n := 0
	evs := w.takeEvents()
	for _, e := range evs {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	if n != 1 {
		w.t.Errorf("%d events %q, want one; events: %q", n, prefix, evs)
	}
}

// noWarnings fails on a new Warning event.
func (w *world) noWarnings() {
	w.t.Helper()
	for _, e := range w.takeEvents() {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			w.t.Errorf("unexpected event %q", e)
		}
	}
}

// kstatus is the expected condition trio: the reason of Ready (always
// there), and whether Reconciling and Stalled are True (else absent).
type kstatus struct {
	readyTrue   bool
	reconciling bool
	stalled     bool
	reason      string
	message     string // a substring of Ready's message, when not ""
}

// checkConditions checks the kstatus trio, and that every condition and
// the status describe generation gen.
func checkConditions(t *testing.T, conds []metav1.Condition, observed, gen int64, want kstatus) {
	t.Helper()
	if observed != gen {
		t.Errorf("status.observedGeneration %d, want %d", observed, gen)
	}
	for _, c := range conds {
		if c.ObservedGeneration != gen {
			t.Errorf("condition %s observedGeneration %d, want %d", c.Type, c.ObservedGeneration, gen)
		}
	}
	ready := meta.FindStatusCondition(conds, listsv1.ConditionReady)
	switch {
	case ready == nil:
		t.Fatalf("no Ready condition in %+v", conds)
	case (ready.Status == metav1.ConditionTrue) != want.readyTrue || ready.Reason != want.reason:
		t.Errorf("Ready %s/%s (%s), want true=%v reason %s", ready.Status, ready.Reason, ready.Message, want.readyTrue, want.reason)
	case want.message != "" && !strings.Contains(ready.Message, want.message):
		t.Errorf("Ready message %q, want it to contain %q", ready.Message, want.message)
	}
	for typ, on := range map[string]bool{listsv1.ConditionReconciling: want.reconciling, listsv1.ConditionStalled: want.stalled} {
		c := meta.FindStatusCondition(conds, typ)
		if on && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != want.reason) {
			t.Errorf("%s %+v, want True with reason %s", typ, c, want.reason)
		}
		if !on && c != nil {
			t.Errorf("%s %+v, want none", typ, c)
		}
	}
}

// wantRequeue checks a result asks to be looked at again after d.
func wantRequeue(t *testing.T, res ctrl.Result, d time.Duration) {
	t.Helper()
	if res.RequeueAfter != d {
		t.Errorf("RequeueAfter %v, want %v", res.RequeueAfter, d)
	}
}

func sameTime(t *testing.T, what string, got *metav1.Time, want time.Time) {
	t.Helper()
	if got == nil || !got.Time.Equal(want) {
		t.Errorf("%s %v, want %v", what, got, want)
	}
}

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }
