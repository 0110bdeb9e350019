package phasetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// fakeLoad is a DatasetLoader whose import is whatever the test says.
type fakeLoad struct {
	exec   controllers.Execution
	starts []string // the keys started
}

func (f *fakeLoad) Start(_ context.Context, _ *listsv1.Dataset, key string) error {
	f.starts = append(f.starts, key)
	return nil
}

func (f *fakeLoad) Observe(context.Context, *listsv1.Dataset) (controllers.Execution, error) {
	return f.exec, nil
}

func (f *fakeLoad) Release(context.Context, *listsv1.Dataset) error { return nil }

func (w *world) datasetReconciler(l controllers.DatasetLoader) *controllers.DatasetReconciler {
	return &controllers.DatasetReconciler{
		Client: w.c, APIReader: w.c, Scheme: kubescheme.New(), Recorder: w.events, Store: w.store, Loader: l,
		Namespace: ns, SourceGrace: grace, PollInterval: poll, PodStartGrace: startGrace, Clock: w.clock,
	}
}

// peopleDataset is a Dataset of ConfigMap name, created at t0.
func peopleDataset(namespace, name string) (*listsv1.Dataset, *corev1.ConfigMap) {
	ds := builders.MakeDataset(namespace, name).ConfigMap(name, "people.csv").UID("uid-" + name).Generation(2).Created(t0).Obj()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string]string{"people.csv": "email,first\nann@example.com,Ann\n"}}
	return ds, cm
}

// A Dataset outside the operator's namespace fails at once, reading
// nothing.
func TestDatasetNamespaceNotAllowed(t *testing.T) {
	ds, cm := peopleDataset("team-a", "elsewhere")
	w := newWorld(t, ds, cm)
	load := &fakeLoad{}
	wantRequeue(t, w.reconcile(w.datasetReconciler(load), ds, false), 0)
	var got listsv1.Dataset
	if err := w.c.Get(context.Background(), clientKey(ds), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != listsv1.DatasetFailed || len(load.starts) != 0 {
		t.Fatalf("phase %q, %d starts", got.Status.Phase, len(load.starts))
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2,
		kstatus{stalled: true, reason: controllers.ReasonNamespaceNotAllowed, message: `honoured only in namespace "emaildata-system"`})
	w.wantEvent("Warning NamespaceNotAllowed")
}

// A missing source is waited for until the grace ends; then the Dataset
// fails SourceMissing.
func TestDatasetSourceGrace(t *testing.T) {
	ds, _ := peopleDataset(ns, "late")
	w := newWorld(t, ds)
	r := w.datasetReconciler(&fakeLoad{})
	wantRequeue(t, w.reconcile(r, ds, false), poll)
	got := w.dataset(ds.Name)
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2,
		kstatus{reconciling: true, reason: controllers.ReasonWaitingForSource, message: `ConfigMap "late" does not exist`})
	w.clock.SetTime(t0.Add(grace - time.Second))
	wantRequeue(t, w.reconcile(r, ds, false), time.Second)
	w.clock.SetTime(t0.Add(grace))
	wantRequeue(t, w.reconcile(r, ds, false), 0)
	got = w.dataset(ds.Name)
	if got.Status.Phase != listsv1.DatasetFailed {
		t.Fatalf("phase %q after the grace", got.Status.Phase)
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2, kstatus{stalled: true, reason: controllers.ReasonSourceMissing})
	w.wantEvent("Warning SourceMissing")
}

// loading returns a world with the Dataset name staged and Loading.
func loading(t *testing.T, name string) (*world, *controllers.DatasetReconciler, *fakeLoad, *listsv1.Dataset) {
	t.Helper()
	ds, cm := peopleDataset(ns, name)
	w := newWorld(t, ds, cm)
	load := &fakeLoad{}
	r := w.datasetReconciler(load)
	wantRequeue(t, w.reconcile(r, ds, false), poll)
	got := w.dataset(name)
	key := blobstore.DatasetKeys{UID: string(ds.UID)}.Source()
	if got.Status.Phase != listsv1.DatasetLoading || len(load.starts) != 1 || load.starts[0] != key {
		t.Fatalf("phase %q, starts %q, want Loading from %s", got.Status.Phase, load.starts, key)
	}
	sameTime(t, "startedAt", got.Status.StartedAt, t0)
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2, kstatus{reconciling: true, reason: controllers.ReasonLoading})
	w.takeEvents()
	load.exec.State = controllers.ExecRunning
	return w, r, load, ds
}

// The import's pod that cannot start fails the Dataset after the grace,
// with completedAt from the clock.
func TestDatasetPodStartGrace(t *testing.T) {
	w, r, load, ds := loading(t, "blocked")
	load.exec.Blocked = &controllers.BlockedPod{Pod: "import-x", Reason: "CreateContainerConfigError", Message: `container worker: secret "pg" not found`}
	wantRequeue(t, w.reconcile(r, ds, false), poll)
	checkConditions(t, w.dataset(ds.Name).Status.Conditions, 2, 2, kstatus{reconciling: true, reason: "CreateContainerConfigError"})
	w.wantEvent("Warning CreateContainerConfigError")

	w.clock.Step(startGrace)
	wantRequeue(t, w.reconcile(r, ds, false), 0)
	got := w.dataset(ds.Name)
	if got.Status.Phase != listsv1.DatasetFailed {
		t.Fatalf("phase %q after the grace", got.Status.Phase)
	}
	sameTime(t, "completedAt", got.Status.CompletedAt, t0.Add(startGrace))
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2,
		kstatus{stalled: true, reason: "CreateContainerConfigError", message: "pod import-x did not start within 2m0s"})
}

// How the import ended decides the outcome, with its summary's counts.
func TestDatasetOutcome(t *testing.T) {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf("line %d: email: invalid email address", i+2)
	}
	for _, tc := range []struct {
		name    string
		state   controllers.ExecState
		summary *people.ImportSummary
		phase   listsv1.DatasetPhase
		want    kstatus
	}{
		{"loaded", controllers.ExecSucceeded, &people.ImportSummary{Rows: 32, Imported: 2, Failed: 30, Errors: many},
			listsv1.DatasetLoaded, kstatus{readyTrue: true, reason: controllers.ReasonLoaded, message: "loaded 2 of 32 rows; 30 malformed rows skipped"}},
		{"stopped", controllers.ExecFailed, &people.ImportSummary{Rows: 3, Imported: 1, Failed: 1, Errors: many[:1], Error: "people: import: line 3: 3 fields, the header has 4"},
			listsv1.DatasetFailed, kstatus{stalled: true, reason: controllers.ReasonLoadFailed, message: "import stopped: people: import: line 3"}},
		{"no summary", controllers.ExecSucceeded, nil,
			listsv1.DatasetFailed, kstatus{stalled: true, reason: controllers.ReasonLoadFailed, message: "finished without writing its summary"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r, load, ds := loading(t, "outcome")
			if tc.summary != nil {
				if err := w.store.WriteJSON(context.Background(), blobstore.DatasetKeys{UID: string(ds.UID)}.Summary(), tc.summary); err != nil {
					t.Fatal(err)
				}
			}
			load.exec.State = tc.state
			w.clock.Step(7 * time.Second)
			wantRequeue(t, w.reconcile(r, ds, false), 0)
			got := w.dataset(ds.Name)
			if got.Status.Phase != tc.phase {
				t.Fatalf("phase %q, want %q", got.Status.Phase, tc.phase)
			}
			sameTime(t, "completedAt", got.Status.CompletedAt, t0.Add(7*time.Second))
			checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2, tc.want)
			if s := tc.summary; s != nil {
				st := got.Status
				if st.Rows != s.Rows || st.Imported != s.Imported || st.Failed != s.Failed || len(st.Errors) != min(len(s.Errors), listsv1.MaxDatasetErrors) {
					t.Errorf("status %d/%d/%d with %d errors, summary %+v", st.Rows, st.Imported, st.Failed, len(st.Errors), s)
				}
			}
		})
	}
}

// An operator without a people store fails the Dataset at once, saying so.
func TestDatasetWithoutPeopleStore(t *testing.T) {
	ds, cm := peopleDataset(ns, "nowhere")
	w := newWorld(t, ds, cm)
	r := w.datasetReconciler(controllers.NewLocalDatasetLoader(context.Background(), w.store, nil))
	wantRequeue(t, w.reconcile(r, ds, false), 0)
	got := w.dataset(ds.Name)
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 2,
		kstatus{stalled: true, reason: controllers.ReasonPeopleStoreUnavailable, message: "--people-url"})
}
