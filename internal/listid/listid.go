// Package listid hands out cluster-unique, increasing list numbers.
//
// The counter lives in one ConfigMap. Every allocation is a read followed by
// an update carrying the read's resourceVersion, so the API server rejects
// a concurrent writer with a conflict and that writer tries again: API
// replicas and the controller never hand out the same number.
package listid

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults shared by the manager and the API: the operator's namespace,
// which holds the counter, and the counter ConfigMap's name.
const (
	DefaultNamespace = "emaildata-system"
	DefaultConfigMap = "emaildata-list-ids"
)

// dataKey holds the last number handed out.
const dataKey = "last"

// maxAttempts bounds retries under contention.
const maxAttempts = 50

// Allocator allocates list IDs from a counter ConfigMap.
type Allocator struct {
	// Reader should read from the API server, not a cache: a stale cache
	// only costs conflicts, but a live read costs fewer.
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
	Name      string
}

// Next returns a new list ID.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	key := client.ObjectKey{Namespace: a.Namespace, Name: a.Name}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var cm corev1.ConfigMap
		err := a.Reader.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: a.Namespace, Name: a.Name,
					Labels: map[string]string{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "list-id-counter"},
				},
				Data: map[string]string{dataKey: "1"},
			}
			err = a.Writer.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("create list id counter %s: %w", key, err)
			}
			return 1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read list id counter %s: %w", key, err)
		}
		last, err := strconv.ParseInt(cm.Data[dataKey], 10, 64)
		if err != nil || last < 0 {
			return 0, fmt.Errorf("list id counter %s holds %q, not a number", key, cm.Data[dataKey])
		}
		next := last + 1
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[dataKey] = strconv.FormatInt(next, 10)
		// Update sends resourceVersion, so a concurrent allocation conflicts.
		err = a.Writer.Update(ctx, &cm)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("update list id counter %s: %w", key, err)
		}
		return next, nil
	}
	return 0, fmt.Errorf("list id counter %s: gave up after %d conflicting attempts", key, maxAttempts)
}
