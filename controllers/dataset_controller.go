package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// DatasetFinalizer deletes a Dataset's blobs before the Dataset goes away.
const DatasetFinalizer = "lists.emaildata.io/dataset-blobs"

// Dataset condition reasons (besides the shared ones).
const (
	ReasonLoading                = "Loading"
	ReasonLoaded                 = "Loaded"
	ReasonLoadFailed             = "LoadFailed"
	ReasonPeopleStoreUnavailable = "PeopleStoreUnavailable"
	// ReasonNamespaceNotAllowed: a Dataset outside the operator's namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

// DatasetReconciler moves a Dataset through Pending, Loading and Loaded
// (or Failed): it stages the source in the blob store, runs the import with
// its Loader, and copies the import summary into status.
type DatasetReconciler struct {
	Client client.Client
	// APIReader reads objects the manager does not cache (source ConfigMaps).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Store     *blobstore.Store
	Loader    DatasetLoader
	// Namespace is the operator's: the people store is shared by every
	// namespace, so only Datasets there (where only administrators can
	// create them) are honoured.
	Namespace string
	// SourceGrace is how long a missing source is waited for.
	SourceGrace time.Duration
	// PollInterval is how often a running import is looked at.
	PollInterval time.Duration
	// PodStartGrace is how long the import's pod may be unable to start
	// before the Dataset fails; DefaultPodStartGrace when zero.
	PodStartGrace time.Duration
	// Clock tells the time; nil is the wall clock.
	Clock clock.PassiveClock
}

// Reconcile loads the Dataset, computes its status, acts, and writes status
// back only when it changed.
func (r *DatasetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ds listsv1.Dataset
	if err := r.Client.Get(ctx, req.NamespacedName, &ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ds.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &ds)
	}
	if err := addFinalizer(ctx, r.Client, &ds, DatasetFinalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := ds.DeepCopy()
	res, err := r.reconcileStatus(ctx, orig, &ds)
	return finishStatus(ctx, r.Client, orig, &ds, datasetStatus, res, err)
}

func (r *DatasetReconciler) reconcileStatus(ctx context.Context, orig, ds *listsv1.Dataset) (ctrl.Result, error) {
	if ds.Namespace != r.Namespace {
		if ds.Status.Phase != listsv1.DatasetFailed {
			r.fail(ds, ReasonNamespaceNotAllowed, fmt.Sprintf("Datasets are honoured only in namespace %q, where only administrators create them: "+
				"the people store a Dataset loads is shared by every namespace; nothing was read or loaded", r.Namespace))
		}
		return ctrl.Result{}, nil
	}
	if ds.Status.Phase == "" {
		ds.Status.Phase = listsv1.DatasetPending
		r.setProgressing(ds, ReasonPreparing, "the dataset is queued for loading")
		emit(r.Recorder, ds, corev1.EventTypeNormal, "Accepted", "dataset accepted")
	}
	switch ds.Status.Phase {
	case listsv1.DatasetPending:
		return r.reconcilePending(ctx, ds)
	case listsv1.DatasetLoading:
		return r.reconcileLoading(ctx, ds)
	}
	// Terminal: release only an outcome the API server already holds.
	if !isDatasetTerminal(orig.Status.Phase) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, r.Loader.Release(ctx, ds)
}

func (r *DatasetReconciler) reconcilePending(ctx context.Context, ds *listsv1.Dataset) (ctrl.Result, error) {
	key, err := r.stageSource(ctx, ds)
	if errors.Is(err, errSourceMissing) {
		if after, wait := sourceGrace(clockNow(r.Clock), ds.CreationTimestamp.Time, r.SourceGrace, r.PollInterval); wait {
			r.setProgressing(ds, ReasonWaitingForSource, r.Store.Redact(err))
			return ctrl.Result{RequeueAfter: after}, nil
		}
		r.fail(ds, ReasonSourceMissing, r.Store.Redact(err))
		return ctrl.Result{}, nil
	}
	if errors.Is(err, errBadSource) {
		r.fail(ds, ReasonInvalidInput, r.Store.Redact(err))
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if res, ok, err := r.start(ctx, ds, key); !ok {
		return res, err
	}
	now := metav1.NewTime(clockNow(r.Clock))
	ds.Status.Phase = listsv1.DatasetLoading
	ds.Status.StartedAt = &now
	r.setProgressing(ds, ReasonLoading, "loading into the people store")
	emit(r.Recorder, ds, corev1.EventTypeNormal, ReasonLoading, "loading %s into the people store", key)
	return ctrl.Result{RequeueAfter: r.PollInterval}, nil
}

// start launches the import; ok is false when it did not.
func (r *DatasetReconciler) start(ctx context.Context, ds *listsv1.Dataset, key string) (ctrl.Result, bool, error) {
	err := r.Loader.Start(ctx, ds, key)
	if errors.Is(err, errPeopleUnavailable) {
		r.fail(ds, ReasonPeopleStoreUnavailable, r.Store.Redact(err))
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

func (r *DatasetReconciler) reconcileLoading(ctx context.Context, ds *listsv1.Dataset) (ctrl.Result, error) {
	exec, err := r.Loader.Observe(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch exec.State {
	case ExecNotStarted:
		// Lost (a restarted local loader, a deleted Job): load again; the
		// source is already staged and upserts are idempotent.
		key, err := r.sourceKey(ds)
		if err != nil {
			r.fail(ds, ReasonInvalidInput, r.Store.Redact(err))
			return ctrl.Result{}, nil
		}
		if res, ok, err := r.start(ctx, ds, key); !ok {
			return res, err
		}
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	case ExecRunning:
		r.watchStart(ds, exec.Blocked)
		if ds.Status.Phase == listsv1.DatasetFailed {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: r.PollInterval}, nil
	}
	sum, err := readSummary(ctx, r.Store, ds)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.NewTime(clockNow(r.Clock))
	if sum != nil {
		ds.Status.Rows, ds.Status.Imported, ds.Status.Failed = sum.Rows, sum.Imported, sum.Failed
		ds.Status.Errors = nil
		for _, e := range sum.Errors {
			if len(ds.Status.Errors) == listsv1.MaxDatasetErrors {
				break
			}
			ds.Status.Errors = append(ds.Status.Errors, truncate(e, maxErrorLen))
		}
	}
	if exec.State == ExecFailed {
		reason, msg := ReasonLoadFailed, exec.Message
		if exec.Reason != "" {
			reason = exec.Reason
		} else if sum != nil && sum.Error != "" {
			msg = "import stopped: " + sum.Error
		}
		ds.Status.CompletedAt = &now
		r.fail(ds, reason, msg)
		return ctrl.Result{}, nil
	}
	if sum == nil {
		ds.Status.CompletedAt = &now
		r.fail(ds, ReasonLoadFailed, "the import finished without writing its summary")
		return ctrl.Result{}, nil
	}
	ds.Status.CompletedAt = &now
	ds.Status.Phase = listsv1.DatasetLoaded
	msg := fmt.Sprintf("loaded %d of %d rows; %d malformed rows skipped", sum.Imported, sum.Rows, sum.Failed)
	r.setDone(ds, ReasonLoaded, msg)
	emit(r.Recorder, ds, corev1.EventTypeNormal, ReasonLoaded, "%s", msg)
	return ctrl.Result{}, nil
}

// finalize deletes the Dataset's blobs (a staged ConfigMap copy and the
// summary; never a blobURL source, which the user owns). The Job goes with
// its owner reference.
func (r *DatasetReconciler) finalize(ctx context.Context, ds *listsv1.Dataset) error {
	if !controllerutil.ContainsFinalizer(ds, DatasetFinalizer) {
		return nil
	}
	if err := r.Store.DeletePrefix(ctx, blobstore.DatasetKeys{UID: string(ds.UID)}.Prefix()); err != nil {
		return fmt.Errorf("delete dataset blobs: %w", err)
	}
	if l, ok := r.Loader.(interface{ Forget(*listsv1.Dataset) }); ok {
		l.Forget(ds)
	}
	return client.IgnoreNotFound(removeFinalizer(ctx, r.Client, ds, DatasetFinalizer))
}

// watchStart is EmailListReconciler.watchStart for the import's pod: once
// it has been unable to start for PodStartGrace, the Dataset fails.
func (r *DatasetReconciler) watchStart(ds *listsv1.Dataset, b *BlockedPod) {
	now := clockNow(r.Clock)
	w := trackBlocked(&ds.Status.Conditions, ds.Generation, b, now, podStartGrace(r.PodStartGrace))
	switch {
	case w.Expired:
		ds.Status.CompletedAt = &metav1.Time{Time: now}
		r.fail(ds, b.Reason, w.Message)
	case w.Cleared:
		r.setProgressing(ds, ReasonLoading, "loading into the people store")
		emit(r.Recorder, ds, corev1.EventTypeNormal, "PodsStarted", "the import pod started after all")
	case b != nil:
		r.setProgressing(ds, b.Reason, w.Message)
		if w.Warn {
			emit(r.Recorder, ds, corev1.EventTypeWarning, b.Reason, "%s", w.Message)
		}
	}
}

func (r *DatasetReconciler) fail(ds *listsv1.Dataset, reason, msg string) {
	ds.Status.Phase = listsv1.DatasetFailed
	r.conds(ds).stalled(reason, msg)
	emit(r.Recorder, ds, corev1.EventTypeWarning, reason, "%s", msg)
}

// conds sets a dataset's conditions, dated by the reconciler's clock.
func (r *DatasetReconciler) conds(ds *listsv1.Dataset) conditions {
	return conditionsOf(&ds.Status.Conditions, ds.Generation, r.Clock)
}

func (r *DatasetReconciler) setProgressing(ds *listsv1.Dataset, reason, msg string) {
	r.conds(ds).progressing(reason, msg)
}

func (r *DatasetReconciler) setDone(ds *listsv1.Dataset, reason, msg string) {
	r.conds(ds).ready(reason, msg)
}

func isDatasetTerminal(p listsv1.DatasetPhase) bool {
	return p == listsv1.DatasetLoaded || p == listsv1.DatasetFailed
}

// SetupWithManager wires the Dataset controller: it owns its Jobs, or
// listens to the local loader's run ends.
func (r *DatasetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).For(&listsv1.Dataset{})
	switch l := r.Loader.(type) {
	case *DatasetJobLoader:
		b = b.Owns(&batchv1.Job{})
	case *LocalDatasetLoader:
		b = b.WatchesRawSource(source.Channel(l.Events(), &handler.EnqueueRequestForObject{}))
	}
	return b.Named("dataset").Complete(r)
}
