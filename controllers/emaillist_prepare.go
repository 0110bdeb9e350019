package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/listfile"
	"github.com/emaildata/emaildata/internal/pipeline"
)

// errSourceMissing marks a source that does not exist (yet).
var errSourceMissing = errors.New("source missing")

// prepare stages the list's input and plans its shards. done is false when
// the list must wait (for its source) or failed.
func (r *EmailListReconciler) prepare(ctx context.Context, list *listsv1.EmailList) (res ctrl.Result, done bool, err error) {
	svc, err := r.Registry.Lookup(string(list.Spec.Service))
	if err != nil {
		r.fail(list, ReasonServiceUnavailable, err.Error())
		return ctrl.Result{}, false, nil
	}
	keys := blobstore.ListKeys{UID: string(list.UID)}
	src, err := r.resolveSource(ctx, list, keys)
	if errors.Is(err, errSourceMissing) {
		waited := r.now().Sub(list.CreationTimestamp.Time)
		if waited < r.SourceGrace {
			setProgressing(list, ReasonWaitingForSource, err.Error())
			return ctrl.Result{RequeueAfter: min(r.PollInterval, r.SourceGrace-waited)}, false, nil
		}
		r.fail(list, ReasonSourceMissing, err.Error())
		return ctrl.Result{}, false, nil
	}
	if pipeline.IsBadInput(err) {
		r.fail(list, ReasonInvalidInput, err.Error())
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}

	req := pipeline.Request{
		Source: src,
		Dialect: listfile.Dialect{
			Delimiter:   list.Spec.Format.Delimiter.Byte(),
			Header:      list.Spec.Format.Header,
			EmailColumn: list.Spec.Format.EffectiveEmailColumn(),
		},
		Service: string(list.Spec.Service),
	}
	plan, err := pipeline.Prepare(ctx, r.Store, keys, req, svc, r.Pipeline)
	if pipeline.IsBadInput(err) {
		r.fail(list, ReasonInvalidInput, err.Error())
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("prepare: %w", err)
	}
	list.Status.SizeBytes = plan.SizeBytes
	list.Status.Records = plan.Records
	list.Status.Shards = int32(len(plan.Shards))
	setProgress(list, 0, plan.Records)
	return ctrl.Result{}, true, nil
}

// resolveSource finds the submitted file in the blob store, copying a
// ConfigMap source there first.
func (r *EmailListReconciler) resolveSource(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (pipeline.Source, error) {
	src := list.Spec.Source
	name := list.Spec.Format.Name
	switch {
	case src.UploadKey != "":
		if err := blobstore.ValidKey(src.UploadKey); err != nil {
			return pipeline.Source{}, pipeline.BadInput(err)
		}
		return r.existing(ctx, src.UploadKey, name, "upload")
	case src.BlobURL != "":
		key, err := r.Store.KeyFromURL(src.BlobURL)
		if err != nil {
			return pipeline.Source{}, pipeline.BadInput(err)
		}
		return r.existing(ctx, key, name, "blob")
	case src.ConfigMapKeyRef != nil:
		return r.copyConfigMap(ctx, list, keys)
	}
	return pipeline.Source{}, fmt.Errorf("%w: the list names no source", errSourceMissing)
}

func (r *EmailListReconciler) existing(ctx context.Context, key, name, what string) (pipeline.Source, error) {
	if _, err := r.Store.Size(ctx, key); err != nil {
		if blobstore.IsNotFound(err) {
			return pipeline.Source{}, fmt.Errorf("%w: %s object %q does not exist in the store", errSourceMissing, what, key)
		}
		return pipeline.Source{}, err
	}
	return pipeline.Source{Key: key, Name: name}, nil
}

func (r *EmailListReconciler) copyConfigMap(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (pipeline.Source, error) {
	ref := list.Spec.Source.ConfigMapKeyRef
	var cm corev1.ConfigMap
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: list.Namespace, Name: ref.Name}, &cm)
	if apierrors.IsNotFound(err) {
		return pipeline.Source{}, fmt.Errorf("%w: ConfigMap %q does not exist", errSourceMissing, ref.Name)
	}
	if err != nil {
		return pipeline.Source{}, fmt.Errorf("read ConfigMap %s: %w", ref.Name, err)
	}
	var data []byte
	if v, ok := cm.Data[ref.Key]; ok {
		data = []byte(v)
	} else if v, ok := cm.BinaryData[ref.Key]; ok {
		data = v
	} else {
		return pipeline.Source{}, fmt.Errorf("%w: ConfigMap %q has no key %q", errSourceMissing, ref.Name, ref.Key)
	}
	if err := r.Store.WriteAll(ctx, keys.Source(), data, nil); err != nil {
		return pipeline.Source{}, fmt.Errorf("copy ConfigMap %s to the store: %w", ref.Name, err)
	}
	return pipeline.Source{Key: keys.Source(), Name: list.Spec.Format.Name}, nil
}
