package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The helpers the three reconcilers (EmailList, Purchase, Dataset) share.

// statusOf returns pointers to obj's status and to its observedGeneration.
type statusOf[T client.Object] func(obj T) (status any, observedGeneration *int64)

// patchStatus records obj's generation as observed and writes its status when
// it differs from orig's, with optimistic locking so a concurrent writer's
// change is never overwritten silently.
func patchStatus[T client.Object](ctx context.Context, c client.Client, orig, obj T, of statusOf[T]) error {
	st, gen := of(obj)
	*gen = obj.GetGeneration()
	if old, _ := of(orig); equality.Semantic.DeepEqual(old, st) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// finishStatus patches obj's status at the end of a reconcile that returned
// res and err. A conflict (someone else wrote first) requeues, to look again
// with fresh data.
func finishStatus[T client.Object](ctx context.Context, c client.Client, orig, obj T, of statusOf[T],
	res ctrl.Result, err error, onPatched ...func()) (ctrl.Result, error) {
	if perr := patchStatus(ctx, c, orig, obj, of); perr != nil {
		if apierrors.IsConflict(perr) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, errors.Join(err, perr)
	}
	for _, f := range onPatched {
		f()
	}
	return res, err
}

// Status accessors for patchStatus.
func emailListStatus(l *listsv1.EmailList) (any, *int64) {
	return &l.Status, &l.Status.ObservedGeneration
}
func datasetStatus(d *listsv1.Dataset) (any, *int64) { return &d.Status, &d.Status.ObservedGeneration }
func purchaseStatus(p *listsv1.Purchase) (any, *int64) {
	return &p.Status, &p.Status.ObservedGeneration
}

// emit records an event about obj when the reconciler has a recorder.
func emit(rec events.EventRecorder, obj runtime.Object, eventType, reason, format string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, eventType, reason, "Reconcile", format, args...)
	}
}

// clockNow reads a reconciler's clock; nil is the wall clock.
func clockNow(c clock.PassiveClock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}
