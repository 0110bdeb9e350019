package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finalizers change by JSON merge patches that hold only metadata (the
// finalizer list and, for optimistic locking, the resourceVersion), so the
// controller never writes back a spec it decoded: what the user applied is
// what stays, whatever the Go types make of it.

// addFinalizer adds f to obj when it is missing.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, f string) error {
	if slices.Contains(obj.GetFinalizers(), f) {
		return nil
	}
	return patchFinalizers(ctx, c, obj, append(slices.Clone(obj.GetFinalizers()), f))
}

// removeFinalizer removes f from obj when it is there.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, f string) error {
	if !slices.Contains(obj.GetFinalizers(), f) {
		return nil
	}
	return patchFinalizers(ctx, c, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(s string) bool { return s == f }))
}

func patchFinalizers(ctx context.Context, c client.Client, obj client.Object, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      finalizers,
		"resourceVersion": obj.GetResourceVersion(),
	}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patch finalizers: %w", err)
	}
	return nil
}

// condition returns the condition of type t, or nil.
func condition(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}
