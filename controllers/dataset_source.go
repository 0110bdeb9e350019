package controllers

import (
	"context"
	"errors"
	"fmt"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// errBadSource marks a source that can never be read (a blob URL outside
// the store).
var errBadSource = errors.New("invalid source")

// sourceKey returns the blob key the Dataset is loaded from, without
// touching anything.
func (r *DatasetReconciler) sourceKey(ds *listsv1.Dataset) (string, error) {
	src := ds.Spec.Source
	switch {
	case src.BlobURL != "":
		key, err := r.Store.KeyFromURL(src.BlobURL)
		if err != nil {
			return "", fmt.Errorf("%w: %w", errBadSource, err)
		}
		return key, nil
	case src.ConfigMapKeyRef != nil:
		return blobstore.DatasetKeys{UID: string(ds.UID)}.Source(), nil
	}
	return "", fmt.Errorf("%w: the dataset names no source", errBadSource)
}

// stageSource makes sure the source is in the blob store, copying a
// ConfigMap there first, and returns its key.
func (r *DatasetReconciler) stageSource(ctx context.Context, ds *listsv1.Dataset) (string, error) {
	key, err := r.sourceKey(ds)
	if err != nil {
		return "", err
	}
	if ref := ds.Spec.Source.ConfigMapKeyRef; ref != nil {
		return key, copyConfigMap(ctx, r.APIReader, r.Store, ds.Namespace, ref, key)
	}
	if _, err := r.Store.Size(ctx, key); err != nil {
		if blobstore.IsNotFound(err) {
			return "", fmt.Errorf("%w: blob object %q does not exist in the store", errSourceMissing, key)
		}
		return "", err
	}
	return key, nil
}
