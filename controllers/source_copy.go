package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// The source staging the EmailList and Dataset reconcilers share.

// copyConfigMap copies key ref.Key of ConfigMap ref.Name in namespace ns to
// the blob key. A missing ConfigMap or key is errSourceMissing (it may come
// later: GitOps tools apply objects in any order).
func copyConfigMap(ctx context.Context, c client.Reader, store *blobstore.Store, ns string,
	ref *listsv1.ConfigMapKeySelector, key string) error {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &cm)
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
	if err := store.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("copy ConfigMap %s to the store: %w", ref.Name, err)
	}
	return nil
}

// sourceGrace says whether an object created at created still waits for its
// missing source at now, and when to look again: within grace, at the next
// poll or when the grace ends, whichever comes first.
func sourceGrace(now, created time.Time, grace, poll time.Duration) (requeueAfter time.Duration, wait bool) {
	waited := now.Sub(created)
	if waited >= grace {
		return 0, false
	}
	return min(poll, grace-waited), true
}
