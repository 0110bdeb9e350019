package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// ReasonSourceNotAllowed: the list names data its namespace may not read.
const ReasonSourceNotAllowed = "SourceNotAllowed"

// SourceAccess says which parts of the operator's store a list may name.
// No namespace can name another's data: uploadKey is the REST API's, for
// its own lists; blobURL reads either the namespace's own bucket with the
// namespace's own credentials, or a prefix an administrator granted it.
type SourceAccess struct {
	// APINamespace is where the REST API creates lists; only there is
	// uploadKey honoured.
	APINamespace string
	// Grants are the administrator's per-namespace prefixes of the store.
	Grants blobstore.Grants
	// HTTPClient reads users' buckets; it must be SSRF-guarded, since the
	// endpoint is the user's choice.
	HTTPClient *http.Client
	// MaxBytes bounds a copied external source.
	MaxBytes int64
}

// sourceRefusedError is a source the list may not read. Nothing was read.
type sourceRefusedError struct{ msg string }

func (e *sourceRefusedError) Error() string { return e.msg }

func refused(format string, args ...any) error {
	return &sourceRefusedError{msg: fmt.Sprintf(format, args...)}
}

// ownedUpload returns the list's upload key when the list may use it: the
// REST API created the list, in its namespace, and the key lies in the
// tenant's upload folder. The finalizer deletes an upload only then.
func (a SourceAccess) ownedUpload(list *listsv1.EmailList) (string, error) {
	key := list.Spec.Source.UploadKey
	if list.Namespace != a.APINamespace || list.Labels[listsv1.LabelManagedBy] != listsv1.ManagedByAPI {
		return "", refused("source.uploadKey is honoured only for lists the REST API creates in namespace %q; "+
			"use configMapKeyRef, blobURL with credentialsSecretRef (your own bucket), or blobURL under a prefix an administrator granted this namespace", a.APINamespace)
	}
	if err := blobstore.CheckUploadKey(key, list.Labels[listsv1.LabelTenant]); err != nil {
		return "", refused("source.uploadKey: %v; a list may only read its own tenant's uploads", err)
	}
	return key, nil
}

// historyTenant is whose list this is for the verification history
// (evhistory): the API tenant of a list the REST API created (in its
// namespace, with its labels: the same trust as ownedUpload's), else the
// list's namespace. A tenant label on a list anywhere else names no one:
// a namespace cannot claim an API tenant's history by labelling a list.
func (a SourceAccess) historyTenant(list *listsv1.EmailList) string {
	if d := list.Labels[listsv1.LabelTenant]; d != "" && list.Namespace == a.APINamespace &&
		list.Labels[listsv1.LabelManagedBy] == listsv1.ManagedByAPI {
		return evhistory.APITenant(d)
	}
	return evhistory.NamespaceTenant(list.Namespace)
}

// resolveSource finds the list file in the operator's store, staging a
// ConfigMap or an external object under the list's own prefix first. It
// returns a *sourceRefusedError, before reading anything, for a source the
// list's namespace may not read.
func (r *EmailListReconciler) resolveSource(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (pipeline.Source, error) {
	src := list.Spec.Source
	name := list.Spec.Format.Name
	switch {
	case src.UploadKey != "":
		key, err := r.Access.ownedUpload(list)
		if err != nil {
			return pipeline.Source{}, err
		}
		return r.existing(ctx, key, name, "upload")
	case src.BlobURL != "" && src.CredentialsSecretRef != nil:
		return r.copyExternal(ctx, list, keys)
	case src.BlobURL != "":
		prefix := r.Access.Grants[list.Namespace]
		if prefix == "" {
			return pipeline.Source{}, refused("source.blobURL without credentialsSecretRef reads the operator's store, and no prefix of it is granted to namespace %q; "+
				"read your own bucket with credentialsSecretRef, use configMapKeyRef, or ask an administrator to grant a prefix", list.Namespace)
		}
		key, err := r.Store.GrantedKey(src.BlobURL, prefix)
		if err != nil {
			return pipeline.Source{}, refused("source.blobURL: %v; namespace %q may read only objects under %s", err, list.Namespace, prefix)
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

// copyExternal reads the namespace's own bucket with the namespace's own
// Secret and stages the object under the list's prefix, so workers read
// only the operator's store and never see the credentials.
func (r *EmailListReconciler) copyExternal(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (pipeline.Source, error) {
	src := list.Spec.Source
	ext, err := blobstore.ParseExternalURL(src.BlobURL)
	if err != nil {
		return pipeline.Source{}, refused("source.blobURL: %v", err)
	}
	var sec corev1.Secret
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: list.Namespace, Name: src.CredentialsSecretRef.Name}, &sec)
	if apierrors.IsNotFound(err) {
		return pipeline.Source{}, fmt.Errorf("%w: Secret %q does not exist", errSourceMissing, src.CredentialsSecretRef.Name)
	}
	if err != nil {
		return pipeline.Source{}, fmt.Errorf("read Secret %s: %w", src.CredentialsSecretRef.Name, err)
	}
	creds, err := blobstore.CredentialsFromSecret(sec.Data)
	if err != nil {
		return pipeline.Source{}, refused("Secret %q: %v", sec.Name, err)
	}
	if r.Access.HTTPClient == nil {
		return pipeline.Source{}, refused("this operator reads no external buckets")
	}
	bucket, err := blobstore.OpenExternal(ctx, ext, creds, r.Access.HTTPClient)
	if err != nil {
		return pipeline.Source{}, refused("source.blobURL: %v", err)
	}
	defer bucket.Close()
	rd, err := bucket.NewReader(ctx, ext.Key, nil)
	if err != nil {
		if blobstore.IsNotFound(err) {
			return pipeline.Source{}, fmt.Errorf("%w: object %q does not exist in bucket %q", errSourceMissing, ext.Key, ext.Bucket)
		}
		if msg := externalRefusal(err); msg != "" {
			return pipeline.Source{}, refused("source.blobURL: bucket %q: %s (credentials from Secret %q)", ext.Bucket, msg, sec.Name)
		}
		return pipeline.Source{}, fmt.Errorf("read %s from bucket %s: %w", ext.Key, ext.Bucket, err)
	}
	defer rd.Close()
	if max := r.Access.MaxBytes; max > 0 && rd.Size() > max {
		return pipeline.Source{}, pipeline.BadInputf("the list file is %d bytes, more than the %d allowed", rd.Size(), max)
	}
	if err := r.stage(ctx, keys.Source(), rd); err != nil {
		return pipeline.Source{}, err
	}
	return pipeline.Source{Key: keys.Source(), Name: list.Spec.Format.Name}, nil
}

// externalRefusal names errors retrying cannot fix: the bucket refused the
// credentials, or the endpoint is an address the operator may not reach.
func externalRefusal(err error) string {
	var blocked *callback.BlockedError
	switch {
	case errors.As(err, &blocked):
		return "the endpoint's address is not allowed (" + blocked.Error() + ")"
	case blobstore.IsAccessDenied(err):
		return "access denied"
	}
	return ""
}

// stage copies rd to key, bounded by MaxBytes; a failed copy leaves nothing.
func (r *EmailListReconciler) stage(ctx context.Context, key string, rd io.Reader) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := r.Store.NewWriter(wctx, key, nil)
	if err != nil {
		return err
	}
	max := r.Access.MaxBytes
	if max <= 0 {
		max = 1 << 62
	}
	n, err := io.Copy(w, io.LimitReader(rd, max+1))
	if err == nil && n > max {
		err = pipeline.BadInputf("the list file is more than the %d bytes allowed", max)
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("stage source: %w", err)
	}
	return w.Close()
}

func (r *EmailListReconciler) copyConfigMap(ctx context.Context, list *listsv1.EmailList, keys blobstore.ListKeys) (pipeline.Source, error) {
	if err := copyConfigMap(ctx, r.APIReader, r.Store, list.Namespace, list.Spec.Source.ConfigMapKeyRef, keys.Source()); err != nil {
		return pipeline.Source{}, err
	}
	return pipeline.Source{Key: keys.Source(), Name: list.Spec.Format.Name}, nil
}
