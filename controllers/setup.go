package controllers

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// PurchaseListNameField indexes Purchases by the list they buy.
const PurchaseListNameField = "spec.listName"

// ConfigMapSourceField indexes EmailLists by the ConfigMap they read.
const ConfigMapSourceField = "spec.source.configMapKeyRef.name"

// ListIDField indexes EmailLists by their list ID.
const ListIDField = "status.listID"

// Index is a field index of the manager's cache that the controllers and
// the API list by.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// Indexes are the field indexes IndexFields registers; tests give the same
// ones to a fake client (fake.ClientBuilder.WithIndex).
func Indexes() []Index {
	return []Index{
		{&listsv1.Purchase{}, PurchaseListNameField, func(o client.Object) []string {
			return []string{o.(*listsv1.Purchase).Spec.ListName}
		}},
		{&listsv1.EmailList{}, ListIDField, func(o client.Object) []string {
			id := o.(*listsv1.EmailList).Status.ListID
			if id == 0 {
				return nil
			}
			return []string{fmt.Sprint(id)}
		}},
		{&listsv1.EmailList{}, ConfigMapSourceField, func(o client.Object) []string {
			if ref := o.(*listsv1.EmailList).Spec.Source.ConfigMapKeyRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}},
	}
}

// IndexFields registers the field indexers the controllers and the API use.
func IndexFields(ctx context.Context, mgr ctrl.Manager) error {
	for _, ix := range Indexes() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.Object, ix.Field, err)
		}
	}
	return nil
}

// listsReading maps a ConfigMap to the lists that name it, so a list that
// waited for (or failed without) its ConfigMap looks again when it appears.
func listsReading(c client.Client) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var lists listsv1.EmailListList
		if err := c.List(ctx, &lists, client.InNamespace(o.GetNamespace()), client.MatchingFields{ConfigMapSourceField: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(lists.Items))
		for _, l := range lists.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: l.Name}})
		}
		return reqs
	}
}

// SetupWithManager wires the EmailList controller: it watches the Jobs it
// creates (in the workers' namespace, mapped back by annotation), and looks
// again when a Purchase names one of its lists.
func (r *EmailListReconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	exportListPhases(mgr.GetClient())
	b := ctrl.NewControllerManagedBy(mgr).
		For(&listsv1.EmailList{}).
		Watches(&listsv1.Purchase{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*listsv1.Purchase).Spec.ListName}}}
		})).
		// Metadata only: the manager caches no ConfigMap contents.
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(listsReading(mgr.GetClient()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrent})
	switch e := r.Executor.(type) {
	case *JobExecutor:
		b = b.Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(jobToList))
	case *LocalExecutor:
		b = b.WatchesRawSource(source.Channel(e.Events(), &handler.EnqueueRequestForObject{}))
	}
	return b.Named("emaillist").Complete(r)
}

// SetupWithManager wires the Purchase controller: it looks again whenever
// the list a Purchase names changes.
func (r *PurchaseReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&listsv1.Purchase{}).
		Watches(&listsv1.EmailList{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var ps listsv1.PurchaseList
			if err := mgr.GetClient().List(ctx, &ps, client.InNamespace(o.GetNamespace()), client.MatchingFields{PurchaseListNameField: o.GetName()}); err != nil {
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(ps.Items))
			for _, p := range ps.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
			}
			return reqs
		})).
		Named("purchase").
		Complete(r)
}
