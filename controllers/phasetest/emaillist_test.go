package phasetest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/wiring"
)

// Timings of the reconcilers under test.
const (
	poll       = 5 * time.Second
	grace      = time.Minute     // SourceGrace
	startGrace = 2 * time.Minute // PodStartGrace
)

// fakeRun is an Executor whose run is whatever the test says.
type fakeRun struct {
	exec     controllers.Execution
	startErr error
	starts   int
	releases int
}

func (f *fakeRun) Start(context.Context, *listsv1.EmailList, int) error {
	f.starts++
	return f.startErr
}

func (f *fakeRun) Observe(context.Context, *listsv1.EmailList) (controllers.Execution, error) {
	return f.exec, nil
}

func (f *fakeRun) Release(context.Context, *listsv1.EmailList) error {
	f.releases++
	return nil
}

func (w *world) listReconciler(exec controllers.Executor) *controllers.EmailListReconciler {
	return &controllers.EmailListReconciler{
		Client: w.c, APIReader: w.c, Scheme: kubescheme.New(), Recorder: w.events, Store: w.store,
		Registry: wiring.Registry(nil), Executor: exec,
		IDs:         &listid.Allocator{Reader: w.c, Writer: w.c, Namespace: ns, Name: listid.DefaultConfigMap},
		Pipeline:    pipeline.Config{Limits: listfile.Limits{MaxExpandedBytes: 1 << 20, MaxRecordBytes: 4096}, ShardBytes: 256, MaxShards: 8},
		SourceGrace: grace, PollInterval: poll, PodStartGrace: startGrace,
		Access: controllers.SourceAccess{APINamespace: ns},
		Clock:  w.clock,
	}
}

// csvList is a list of three addresses in ConfigMap name, created at t0.
func csvList(name string) (*listsv1.EmailList, *corev1.ConfigMap) {
	l := builders.MakeEmailList(ns, name).ConfigMap(name, "list.csv").Header().UID("uid-" + name).Generation(1).Created(t0).Obj()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"list.csv": "email\nann@example.com\nbob@example.org\ncy@example.net\n"}}
	return l, cm
}

// A list whose ConfigMap is missing waits for it, looking again at each
// poll and at the grace's end, then fails SourceMissing; when the
// ConfigMap appears later, the list is prepared and started after all.
func TestEmailListSourceGrace(t *testing.T) {
	l, cm := csvList("late")
	w := newWorld(t, l)
	run := &fakeRun{}
	r := w.listReconciler(run)

	res := w.reconcile(r, l, false)
	wantRequeue(t, res, poll)
	got := w.list(l.Name)
	if got.Status.Phase != listsv1.PhasePending || got.Status.ListID != 1 || !controllerutil.ContainsFinalizer(got, controllers.Finalizer) {
		t.Fatalf("first look: phase %q, list ID %d, finalizers %v", got.Status.Phase, got.Status.ListID, got.Finalizers)
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1,
		kstatus{reconciling: true, reason: controllers.ReasonWaitingForSource, message: `ConfigMap "late" does not exist`})
	w.wantEvent("Normal Accepted")

	w.clock.SetTime(t0.Add(grace - 2*time.Second))
	wantRequeue(t, w.reconcile(r, l, false), 2*time.Second) // the grace's end, before the next poll

	w.clock.SetTime(t0.Add(grace))
	wantRequeue(t, w.reconcile(r, l, false), 0)
	got = w.list(l.Name)
	if got.Status.Phase != listsv1.PhaseFailed {
		t.Fatalf("after the grace: phase %q", got.Status.Phase)
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1,
		kstatus{stalled: true, reason: controllers.ReasonSourceMissing, message: `ConfigMap "late" does not exist`})
	w.wantEvent("Warning SourceMissing")
	if run.starts != 0 {
		t.Errorf("%d starts without a source", run.starts)
	}

	w.create(cm)
	w.clock.Step(time.Hour)
	wantRequeue(t, w.reconcile(r, l, false), poll)
	got = w.list(l.Name)
	if got.Status.Phase != listsv1.PhaseProcessing || run.starts != 1 || got.Status.ListID != 1 {
		t.Fatalf("after the ConfigMap appeared: phase %q, %d starts, list ID %d", got.Status.Phase, run.starts, got.Status.ListID)
	}
	sameTime(t, "startedAt", got.Status.StartedAt, w.clock.Now())
	w.wantEvent("Normal SourceFound")
}

// A prepared list starts its shards and polls; a list waiting for its
// part of the SMTP budget polls quietly; a start the executor refuses is
// retried with backoff (an error), saying why.
func TestEmailListStart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		startErr  error
		wantErr   bool
		phase     listsv1.Phase
		reason    string
		requeue   time.Duration
		wantEvent string
	}{
		{"started", nil, false, listsv1.PhaseProcessing, controllers.ReasonProcessing, poll, "Normal Processing"},
		{"waiting for the budget", &controllers.BudgetWaitError{}, false, listsv1.PhasePending, controllers.ReasonWaitingForSMTPBudget, poll, ""},
		{"refused", errors.New("jobs.batch is forbidden: exceeded quota"), true, listsv1.PhasePending, controllers.ReasonStartFailed, 0, "Warning StartFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, cm := csvList("start")
			w := newWorld(t, l, cm)
			run := &fakeRun{startErr: tc.startErr}
			res := w.reconcile(w.listReconciler(run), l, tc.wantErr)
			wantRequeue(t, res, tc.requeue)
			got := w.list(l.Name)
			if got.Status.Phase != tc.phase || run.starts != 1 || got.Status.Records != 3 || got.Status.Shards < 1 {
				t.Fatalf("phase %q, %d starts, %d records in %d shards", got.Status.Phase, run.starts, got.Status.Records, got.Status.Shards)
			}
			checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1, kstatus{reconciling: true, reason: tc.reason})
			if tc.phase == listsv1.PhaseProcessing {
				sameTime(t, "startedAt", got.Status.StartedAt, t0)
			} else if got.Status.StartedAt != nil {
				t.Errorf("startedAt %v before the start", got.Status.StartedAt)
			}
			if tc.wantEvent != "" {
				w.wantEvent(tc.wantEvent)
			} else {
				w.noWarnings()
			}
		})
	}
}

// processing returns a world with list name prepared and Processing, its
// run in the fake executor.
func processing(t *testing.T, name string) (*world, *controllers.EmailListReconciler, *fakeRun, *listsv1.EmailList) {
	t.Helper()
	l, cm := csvList(name)
	w := newWorld(t, l, cm)
	run := &fakeRun{}
	r := w.listReconciler(run)
	w.reconcile(r, l, false)
	if p := w.list(name).Status.Phase; p != listsv1.PhaseProcessing {
		t.Fatalf("phase %q, want Processing", p)
	}
	w.takeEvents()
	run.exec.State = controllers.ExecRunning
	return w, r, run, l
}

// A worker pod that cannot start is reported at once (PodsBlocked, a
// Warning), is waited for PodStartGrace from the first time it was seen,
// however its reason alternates, and then fails the list.
func TestEmailListPodStartGrace(t *testing.T) {
	w, r, run, l := processing(t, "blocked")
	w.clock.Step(10 * time.Second)
	seen := w.clock.Now()
	run.exec.Blocked = &controllers.BlockedPod{Pod: "w-0", Index: "0", Reason: "ErrImagePull", Message: "container worker: no such image"}
	wantRequeue(t, w.reconcile(r, l, false), poll)
	got := w.list(l.Name)
	deadline := seen.Add(startGrace).Format(time.RFC3339)
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1,
		kstatus{reconciling: true, reason: "ErrImagePull", message: "the run fails unless it starts by " + deadline})
	if c := meta.FindStatusCondition(got.Status.Conditions, listsv1.ConditionPodsBlocked); c == nil || c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(seen) {
		t.Fatalf("PodsBlocked %+v, want True since %v", c, seen)
	}
	w.wantEvent("Warning ErrImagePull")

	// The kubelet's backoff: the same trouble, no second warning, the same
	// deadline.
	w.clock.Step(startGrace - time.Second)
	run.exec.Blocked.Reason = "ImagePullBackOff"
	wantRequeue(t, w.reconcile(r, l, false), poll)
	if p := w.list(l.Name).Status.Phase; p != listsv1.PhaseProcessing {
		t.Fatalf("failed before the grace ended: %q", p)
	}
	w.noWarnings()

	w.clock.Step(time.Second)
	wantRequeue(t, w.reconcile(r, l, false), 0)
	got = w.list(l.Name)
	if got.Status.Phase != listsv1.PhaseFailed {
		t.Fatalf("phase %q after the grace", got.Status.Phase)
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1,
		kstatus{stalled: true, reason: "ImagePullBackOff", message: "pod w-0 (shard 0) did not start within 2m0s"})
	w.wantEvent("Warning ImagePullBackOff")
}

// A pod that starts after all clears PodsBlocked and the list goes on.
func TestEmailListPodStartsAfterAll(t *testing.T) {
	w, r, run, l := processing(t, "late-pod")
	run.exec.Blocked = &controllers.BlockedPod{Pod: "w-0", Reason: "Unschedulable", Message: "0/1 nodes are available"}
	w.reconcile(r, l, false)
	w.takeEvents()
	run.exec.Blocked = nil
	w.clock.Step(time.Minute)
	wantRequeue(t, w.reconcile(r, l, false), poll)
	got := w.list(l.Name)
	if meta.FindStatusCondition(got.Status.Conditions, listsv1.ConditionPodsBlocked) != nil || got.Status.Phase != listsv1.PhaseProcessing {
		t.Fatalf("phase %q, conditions %+v", got.Status.Phase, got.Status.Conditions)
	}
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1, kstatus{reconciling: true, reason: controllers.ReasonProcessing})
	w.wantEvent("Normal PodsStarted")
}

// A run the executor lost is started again; a failed run fails the list.
func TestEmailListRunLostOrFailed(t *testing.T) {
	t.Run("lost", func(t *testing.T) {
		w, r, run, l := processing(t, "lost")
		run.exec = controllers.Execution{State: controllers.ExecNotStarted}
		wantRequeue(t, w.reconcile(r, l, false), poll)
		if run.starts != 2 || w.list(l.Name).Status.Phase != listsv1.PhaseProcessing {
			t.Fatalf("%d starts, phase %q", run.starts, w.list(l.Name).Status.Phase)
		}
	})
	t.Run("failed", func(t *testing.T) {
		w, r, run, l := processing(t, "failed")
		run.exec = controllers.Execution{State: controllers.ExecFailed, Message: "job failed: BackoffLimitExceeded"}
		wantRequeue(t, w.reconcile(r, l, false), 0)
		got := w.list(l.Name)
		checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1,
			kstatus{stalled: true, reason: controllers.ReasonProcessingFailed, message: "BackoffLimitExceeded"})
		w.wantEvent("Warning ProcessingFailed")
		// The outcome is stored: the next look releases the run.
		w.reconcile(r, l, false)
		if run.releases != 1 {
			t.Errorf("%d releases after the failure was stored", run.releases)
		}
	})
}

// The whole way with the in-process executor: Pending, Processing, then
// Results once the shards ran, with completedAt from the clock.
func TestEmailListLocalRunReachesResults(t *testing.T) {
	l, cm := csvList("local")
	w := newWorld(t, l, cm)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := controllers.NewLocalExecutor(ctx, w.store, wiring.Registry(nil), listfile.Limits{}, 2)
	r := w.listReconciler(exec)
	w.reconcile(r, l, false)
	select {
	case <-exec.Events():
	case <-time.After(30 * time.Second):
		t.Fatal("the local run did not end")
	}
	w.clock.Step(3 * time.Second)
	wantRequeue(t, w.reconcile(r, l, false), 0)
	got := w.list(l.Name)
	if got.Status.Phase != listsv1.PhaseResults || !got.Status.Purchased || got.Status.Result == nil || got.Status.Result.Rows != 3 || got.Status.ProgressText != "3/3" {
		t.Fatalf("phase %q purchased %v result %+v progress %q", got.Status.Phase, got.Status.Purchased, got.Status.Result, got.Status.ProgressText)
	}
	sameTime(t, "startedAt", got.Status.StartedAt, t0)
	sameTime(t, "completedAt", got.Status.CompletedAt, t0.Add(3*time.Second))
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1, kstatus{readyTrue: true, reason: controllers.ReasonResults})
}

// The completion callback is tried once per reconcile, and again only when
// the backoff has passed on the clock, until it is delivered.
func TestEmailListCallbackBackoff(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	l := builders.MakeEmailList(ns, "cb").ConfigMap("cb", "list.csv").CallbackURL(srv.URL).UID("uid-cb").Generation(1).Created(t0).
		ListID(9).Phase(listsv1.PhaseResults).Purchased().Obj()
	w := newWorld(t, l)
	run := &fakeRun{}
	r := w.listReconciler(run)
	policy, err := callback.ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	backoff := callback.Backoff{Base: 10 * time.Second, Max: time.Minute, Attempts: 5}
	r.Callbacks = controllers.CallbackConfig{Client: policy.Client(5 * time.Second), Backoff: backoff}

	wantRequeue(t, w.reconcile(r, l, false), backoff.Delay(1))
	cb := w.list(l.Name).Status.Callback
	if cb == nil || cb.State != listsv1.CallbackPending || cb.Attempts != 1 || !strings.Contains(cb.LastError, "503") {
		t.Fatalf("after the first attempt: %+v", cb)
	}
	sameTime(t, "lastAttemptAt", cb.LastAttemptAt, t0)

	w.clock.Step(4 * time.Second)
	wantRequeue(t, w.reconcile(r, l, false), backoff.Delay(1)-4*time.Second)
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls before the backoff passed", n)
	}

	w.clock.Step(backoff.Delay(1))
	wantRequeue(t, w.reconcile(r, l, false), backoff.Delay(2))
	w.clock.Step(backoff.Delay(2))
	wantRequeue(t, w.reconcile(r, l, false), 0)
	cb = w.list(l.Name).Status.Callback
	if cb.State != listsv1.CallbackDelivered || cb.Attempts != 3 || cb.DeliveredStatus != string(listsv1.PhaseResults) || calls.Load() != 3 {
		t.Fatalf("after the third attempt: %+v, %d calls", cb, calls.Load())
	}
	w.wantEvent("Normal CallbackDelivered")
	if run.releases != 4 {
		t.Errorf("%d releases, want one per look at the stored outcome", run.releases)
	}
}

// A REST list's callback waits for the installation's signing key: while
// its Secret is missing the attempt fails naming it and nothing is sent;
// once it exists the callback goes out signed with the tenant's key.
func TestEmailListCallbackNeedsSigningKey(t *testing.T) {
	var calls atomic.Int32
	var sig atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		sig.Store(r.Header.Get(callback.HeaderSignature) + " " + r.Header.Get(callback.HeaderTimestamp))
	}))
	defer srv.Close()
	l := builders.MakeEmailList(ns, "cbkey").APIUpload("uploads/t/x.csv", "tenant-digest").CallbackURL(srv.URL).UID("uid-cbkey").Generation(1).Created(t0).
		ListID(11).Phase(listsv1.PhaseResults).Purchased().Obj()
	w := newWorld(t, l)
	r := w.listReconciler(&fakeRun{})
	policy, err := callback.ParsePolicy("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	backoff := callback.Backoff{Base: 10 * time.Second, Max: time.Minute, Attempts: 5}
	r.Callbacks = controllers.CallbackConfig{Client: policy.Client(5 * time.Second), Backoff: backoff,
		SigningNamespace: ns, SigningSecret: installsecret.Config{}.Name(installsecret.CallbackSigning)}

	wantRequeue(t, w.reconcile(r, l, false), backoff.Delay(1))
	cb := w.list(l.Name).Status.Callback
	if cb == nil || cb.State != listsv1.CallbackPending || !strings.Contains(cb.LastError, "Secret "+ns+"/"+installsecret.Config{}.Name(installsecret.CallbackSigning)+" does not exist") || calls.Load() != 0 {
		t.Fatalf("without the signing Secret: %+v, %d calls", cb, calls.Load())
	}

	inst := []byte("phasetest-installation-signing-key-0123")
	if err := w.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: installsecret.Config{}.Name(installsecret.CallbackSigning)},
		Data: map[string][]byte{installsecret.Field: inst}}); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(backoff.Delay(1))
	wantRequeue(t, w.reconcile(r, l, false), 0)
	if cb := w.list(l.Name).Status.Callback; cb.State != listsv1.CallbackDelivered || calls.Load() != 1 {
		t.Fatalf("with the signing Secret: %+v, %d calls", cb, calls.Load())
	}
	// Signed with the tenant's key at the clock's time.
	body := []byte(`{"list_id":11,"status":"Results","name":"list.csv"}`)
	want := callback.Sign(callback.TenantKey(inst, "tenant-digest"), "msg_uid-cbkey_Results", w.clock.Now(), body)
	if got := sig.Load().(string); got != want+" "+strconv.FormatInt(w.clock.Now().Unix(), 10) {
		t.Errorf("signature and timestamp %q, want %q at %d", got, want, w.clock.Now().Unix())
	}
}
