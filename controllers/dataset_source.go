package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/blobstore"
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
		return key, r.copyConfigMap(ctx, ds, ref, key)
	}
	if _, err := r.Store.Size(ctx, key); err != nil {
		if blobstore.IsNotFound(err) {
			return "", fmt.Errorf("%w: blob object %q does not exist in the store", errSourceMissing, key)
		}
		return "", err
	}
	return key, nil
}

func (r *DatasetReconciler) copyConfigMap(ctx context.Context, ds *listsv1.Dataset, ref *listsv1.ConfigMapKeySelector, key string) error {
	var cm corev1.ConfigMap
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: ref.Name}, &cm)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: ConfigMap %q does not exist", errSourceMissing, ref.Name)
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", ref.Name, err)
	}
	var data []byte
	if v, ok := cm.Data[ref.Key]; ok {
		data = []byte(v)
	} else if v, ok := cm.BinaryData[ref.Key]; ok {
		data = v
	} else {
		return fmt.Errorf("%w: ConfigMap %q has no key %q", errSourceMissing, ref.Name, ref.Key)
	}
	if err := r.Store.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("copy ConfigMap %s to the store: %w", ref.Name, err)
	}
	return nil
}
