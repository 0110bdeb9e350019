package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// ReasonDeleting: the list is being deleted and waits for its shards.
const ReasonDeleting = "Deleting"

// finalize stops the list's shards, then deletes what the list owns: its
// prefix and the upload the REST API made for it (never a source it merely
// names). The run has stopped (the Job is gone, the local shards returned)
// when the prefix is deleted, so no shard writes into a deleted prefix.
func (r *EmailListReconciler) finalize(ctx context.Context, list *listsv1.EmailList) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(list, Finalizer) {
		return ctrl.Result{}, nil
	}
	if s, ok := r.Executor.(Stopper); ok {
		stopped, err := s.Stop(ctx, list)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !stopped {
			orig := list.DeepCopy()
			r.setProgressing(list, ReasonDeleting, "deleting: waiting for the list's shards to stop before its blobs are removed")
			if err := patchStatus(ctx, r.Client, orig, list, emailListStatus); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			return ctrl.Result{RequeueAfter: r.PollInterval}, nil
		}
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	if err := r.Store.DeletePrefix(ctx, keys.Prefix()); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete list blobs: %w", err)
	}
	if key, err := r.Access.ownedUpload(list); err == nil && list.Spec.Source.UploadKey != "" {
		if err := r.Store.Delete(ctx, key); err != nil && !blobstore.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete upload: %w", err)
		}
	}
	_ = r.Executor.Release(ctx, list)
	if err := r.dropReservation(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("release list id reservation: %w", err)
	}
	return ctrl.Result{}, client.IgnoreNotFound(removeFinalizer(ctx, r.Client, list, Finalizer))
}

func (r *EmailListReconciler) dropParts(ctx context.Context, list *listsv1.EmailList) error {
	if r.KeepParts || list.Status.Shards == 0 {
		return nil
	}
	if err := r.Store.DeletePrefix(ctx, blobstore.ListKeys{UID: string(list.UID)}.Parts()); err != nil {
		return fmt.Errorf("delete intermediate parts: %w", err)
	}
	return nil
}

// sourceAppeared reports whether a list that failed for a missing
// ConfigMap can now be prepared: the ConfigMap watch brings the list back
// here when the ConfigMap appears, however late.
func (r *EmailListReconciler) sourceAppeared(ctx context.Context, list *listsv1.EmailList) bool {
	ref := list.Spec.Source.ConfigMapKeyRef
	stalled := condition(list.Status.Conditions, listsv1.ConditionStalled)
	if list.Status.Phase != listsv1.PhaseFailed || ref == nil || stalled == nil || stalled.Reason != ReasonSourceMissing {
		return false
	}
	var cm corev1.ConfigMap
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: list.Namespace, Name: ref.Name}, &cm); err != nil {
		return false
	}
	_, inData := cm.Data[ref.Key]
	_, inBinary := cm.BinaryData[ref.Key]
	return inData || inBinary
}
