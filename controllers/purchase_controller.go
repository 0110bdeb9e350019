package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// Purchase condition reasons.
const (
	ReasonListNotFound     = "ListNotFound"
	ReasonListNotProcessed = "ListNotProcessed"
	ReasonNotPurchasable   = "NotPurchasable"
	ReasonListFailed       = "ListFailed"
	ReasonPurchased        = "Purchased"
)

// PurchaseReconciler reports whether a Purchase took effect. The EmailList
// controller does the list's side (Processed → Results), so each status has
// one writer.
type PurchaseReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Now      func() time.Time
}

// +kubebuilder:rbac:groups=lists.emaildata.io,resources=purchases,verbs=get;list;watch
// +kubebuilder:rbac:groups=lists.emaildata.io,resources=purchases/status,verbs=get;update;patch

// Reconcile computes the Purchase's status from its list.
func (r *PurchaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p listsv1.Purchase
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := p.DeepCopy()

	var list listsv1.EmailList
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.ListName}, &list)
	switch {
	case apierrors.IsNotFound(err):
		r.pending(&p, ReasonListNotFound, fmt.Sprintf("EmailList %q does not exist in namespace %q", p.Spec.ListName, p.Namespace))
	case err != nil:
		return ctrl.Result{}, err
	case list.Spec.Service == listsv1.ServiceEmailValidation:
		r.failed(&p, ReasonNotPurchasable, fmt.Sprintf("EmailList %q runs email_validation, which always runs with action=process and is purchased on completion; there is nothing to purchase", list.Name))
	case list.Status.Phase == listsv1.PhaseFailed:
		r.failed(&p, ReasonListFailed, fmt.Sprintf("EmailList %q failed and has no results to purchase", list.Name))
	case list.Status.Purchased && list.Status.Phase == listsv1.PhaseResults:
		p.Status.ListID = list.Status.ListID
		if p.Status.Phase != listsv1.PurchasePurchased {
			now := metav1.NewTime(r.now())
			p.Status.PurchasedAt = &now
			r.event(&p, "Normal", ReasonPurchased, "list %d results are ready to download", list.Status.ListID)
		}
		p.Status.Phase = listsv1.PurchasePurchased
		markReady(&p.Status.Conditions, p.Generation, ReasonPurchased,
			fmt.Sprintf("EmailList %q (list %d) is purchased; results are ready to download", list.Name, list.Status.ListID))
	case list.Status.Phase == listsv1.PhaseProcessed:
		p.Status.ListID = list.Status.ListID
		r.pending(&p, ReasonListNotProcessed, fmt.Sprintf("EmailList %q is Processed; the purchase is being applied", list.Name))
	default:
		p.Status.ListID = list.Status.ListID
		phase := list.Status.Phase
		if phase == "" {
			phase = listsv1.PhasePending
		}
		r.pending(&p, ReasonListNotProcessed, fmt.Sprintf("EmailList %q is %s, not yet processed; it can be purchased once it is Processed", list.Name, phase))
	}

	p.Status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(orig.Status, p.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, &p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch purchase status: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *PurchaseReconciler) pending(p *listsv1.Purchase, reason, msg string) {
	p.Status.Phase = listsv1.PurchasePending
	markProgressing(&p.Status.Conditions, p.Generation, reason, msg)
}

func (r *PurchaseReconciler) failed(p *listsv1.Purchase, reason, msg string) {
	if p.Status.Phase != listsv1.PurchaseFailed {
		r.event(p, "Warning", reason, "%s", msg)
	}
	p.Status.Phase = listsv1.PurchaseFailed
	markStalled(&p.Status.Conditions, p.Generation, reason, msg)
}

func (r *PurchaseReconciler) event(p *listsv1.Purchase, eventType, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(p, nil, eventType, reason, "Reconcile", format, args...)
	}
}

func (r *PurchaseReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
