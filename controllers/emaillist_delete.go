package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/blobstore"
)

// finalize deletes the list's blobs, including an upload that belongs to
// it, then lets the list go. The Job goes with its owner reference.
func (r *EmailListReconciler) finalize(ctx context.Context, list *listsv1.EmailList) error {
	if !controllerutil.ContainsFinalizer(list, Finalizer) {
		return nil
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	if err := r.Store.DeletePrefix(ctx, keys.Prefix()); err != nil {
		return fmt.Errorf("delete list blobs: %w", err)
	}
	if key := list.Spec.Source.UploadKey; key != "" && blobstore.ValidKey(key) == nil {
		if err := r.Store.Delete(ctx, key); err != nil && !blobstore.IsNotFound(err) {
			return fmt.Errorf("delete upload: %w", err)
		}
	}
	_ = r.Executor.Release(ctx, list)
	controllerutil.RemoveFinalizer(list, Finalizer)
	if err := r.Client.Update(ctx, list); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}
