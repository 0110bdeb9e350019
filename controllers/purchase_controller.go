package controllers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// Purchase condition reasons.
const (
	ReasonListNotFound     = "ListNotFound"
	ReasonListNotProcessed = "ListNotProcessed"
	ReasonNotPurchasable   = "NotPurchasable"
	ReasonListFailed       = "ListFailed"
	ReasonPurchased        = "Purchased"
	ReasonInvalidListName  = "InvalidListName"
	ReasonInvalidOptions   = "InvalidOptions"
	ReasonAlreadyPurchased = "AlreadyPurchased"
)

// PurchaseReconciler reports whether a Purchase took effect. The EmailList
// controller does the list's side (Processed → Results), so each status has
// one writer.
type PurchaseReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Store holds the lists' plans, which name the columns a purchase may
	// choose.
	Store *blobstore.Store
	Clock clock.PassiveClock // nil: the wall clock
}

// Reconcile computes the Purchase's status from its list.
func (r *PurchaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p listsv1.Purchase
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := p.DeepCopy()
	if errs := validation.IsDNS1123Subdomain(p.Spec.ListName); len(errs) > 0 {
		// The CRD refuses these already; a Purchase reaches only lists of
		// its own namespace, by name.
		r.failed(&p, ReasonInvalidListName, fmt.Sprintf("listName %q must be the name of an EmailList in namespace %q: %s", p.Spec.ListName, p.Namespace, strings.Join(errs, "; ")))
		return r.patch(ctx, orig, &p)
	}

	var list listsv1.EmailList
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.ListName}, &list)
	var optErr error
	var columns []string
	if err == nil {
		if columns, optErr, err = r.checkOptions(ctx, &p, &list); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		r.pending(&p, ReasonListNotFound, fmt.Sprintf("EmailList %q does not exist in namespace %q", p.Spec.ListName, p.Namespace))
	case err != nil:
		return ctrl.Result{}, err
	case !services.Purchasable(string(list.Spec.Service)):
		r.failed(&p, ReasonNotPurchasable, fmt.Sprintf("EmailList %q runs %s, which always runs with action=process and is purchased on completion; there is nothing to purchase", list.Name, list.Spec.Service))
	case optErr != nil:
		r.failed(&p, ReasonInvalidOptions, fmt.Sprintf("EmailList %q cannot deliver this purchase: %v", list.Name, optErr))
	case list.Status.Phase == listsv1.PhaseFailed:
		r.failed(&p, ReasonListFailed, fmt.Sprintf("EmailList %q failed and has no results to purchase", list.Name))
	case list.Status.Phase == listsv1.PhaseResults && !listsv1.SameDelivery(list.Status.Delivery, p.Spec.Fields, p.Spec.MatchType, columns):
		p.Status.ListID = list.Status.ListID
		d := list.Status.Delivery
		r.failed(&p, ReasonAlreadyPurchased, fmt.Sprintf("EmailList %q was already purchased by %s, delivering fields [%s] and match type %q; a list is delivered once",
			list.Name, d.Purchase, strings.Join(d.Fields, ", "), d.MatchType))
	case list.Status.Purchased && list.Status.Phase == listsv1.PhaseResults:
		p.Status.ListID = list.Status.ListID
		if p.Status.Phase != listsv1.PurchasePurchased {
			now := metav1.NewTime(clockNow(r.Clock))
			p.Status.PurchasedAt = &now
			emit(r.Recorder, &p, "Normal", ReasonPurchased, "list %d results are ready to download", list.Status.ListID)
		}
		p.Status.Phase = listsv1.PurchasePurchased
		r.conds(&p).ready(ReasonPurchased,
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

	return r.patch(ctx, orig, &p)
}

// checkOptions checks the purchase's fields and match type against the
// columns of the list's service, once the list is prepared; it returns the
// columns (nil before).
func (r *PurchaseReconciler) checkOptions(ctx context.Context, p *listsv1.Purchase, list *listsv1.EmailList) (columns []string, optErr, err error) {
	if list.Status.Shards == 0 || r.Store == nil {
		return nil, nil, nil
	}
	plan, err := pipeline.LoadPlan(ctx, r.Store, blobstore.ListKeys{UID: string(list.UID)})
	if blobstore.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return plan.Columns, pipeline.CheckDelivery(plan.Columns, purchaseDelivery(p)), nil
}

func (r *PurchaseReconciler) patch(ctx context.Context, orig, p *listsv1.Purchase) (ctrl.Result, error) {
	return finishStatus(ctx, r.Client, orig, p, purchaseStatus, ctrl.Result{}, nil)
}

func (r *PurchaseReconciler) pending(p *listsv1.Purchase, reason, msg string) {
	p.Status.Phase = listsv1.PurchasePending
	r.conds(p).progressing(reason, msg)
}

func (r *PurchaseReconciler) failed(p *listsv1.Purchase, reason, msg string) {
	if p.Status.Phase != listsv1.PurchaseFailed {
		emit(r.Recorder, p, "Warning", reason, "%s", msg)
	}
	p.Status.Phase = listsv1.PurchaseFailed
	r.conds(p).stalled(reason, msg)
}

// conds sets a purchase's conditions, dated by the reconciler's clock.
func (r *PurchaseReconciler) conds(p *listsv1.Purchase) conditions {
	return conditionsOf(&p.Status.Conditions, p.Generation, r.Clock)
}
