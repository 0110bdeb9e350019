package controllers

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/blobstore"
)

// stopPoll is how often a list being deleted looks whether its run stopped.
const stopPoll = time.Second

// finalize stops the list's run, deletes its blobs, including an upload
// that belongs to it, then lets the list go.
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
			return ctrl.Result{RequeueAfter: stopPoll}, nil
		}
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	if err := r.Store.DeletePrefix(ctx, keys.Prefix()); err != nil {
		return ctrl.Result{}, fmt.Errorf("delete list blobs: %w", err)
	}
	if key := list.Spec.Source.UploadKey; key != "" && blobstore.ValidKey(key) == nil {
		if err := r.Store.Delete(ctx, key); err != nil && !blobstore.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete upload: %w", err)
		}
	}
	_ = r.Executor.Release(ctx, list)
	controllerutil.RemoveFinalizer(list, Finalizer)
	if err := r.Client.Update(ctx, list); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}
