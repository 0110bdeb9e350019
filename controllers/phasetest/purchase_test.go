package phasetest_test

import (
	"testing"
	"time"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

func (w *world) purchaseReconciler() *controllers.PurchaseReconciler {
	return &controllers.PurchaseReconciler{Client: w.c, Recorder: w.events, Store: w.store, Clock: w.clock}
}

// report is an email_intelligence list held for a purchase, in phase p.
func report(p listsv1.Phase) *builders.EmailListWrapper {
	return builders.MakeEmailList(ns, "l").Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).
		ConfigMap("l", "list.csv").UID("uid-l").ListID(4).Phase(p)
}

// A Purchase's status follows its list: each state of the list gives one
// phase and kstatus reason, for the Purchase's generation.
func TestPurchasePhases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		list     *listsv1.EmailList // nil: none
		purchase *builders.PurchaseWrapper
		phase    listsv1.PurchasePhase
		want     kstatus
		warning  string
	}{
		{"no list", nil, builders.MakePurchase(ns, "p", "l"), listsv1.PurchasePending,
			kstatus{reconciling: true, reason: controllers.ReasonListNotFound, message: `EmailList "l" does not exist in namespace`}, ""},
		{"a list name the CRD refuses", nil, builders.MakePurchase(ns, "p", "other-ns/l"), listsv1.PurchaseFailed,
			kstatus{stalled: true, reason: controllers.ReasonInvalidListName, message: "must be the name of an EmailList"}, "Warning InvalidListName"},
		{"email_validation", builders.MakeEmailList(ns, "l").APIUpload("uploads/t/x/list.csv", "t").Phase(listsv1.PhaseResults).Purchased().Obj(),
			builders.MakePurchase(ns, "p", "l"), listsv1.PurchaseFailed,
			kstatus{stalled: true, reason: controllers.ReasonNotPurchasable, message: "runs email_validation, which always runs with action=process"}, "Warning NotPurchasable"},
		{"list processing", report(listsv1.PhaseProcessing).Obj(), builders.MakePurchase(ns, "p", "l"), listsv1.PurchasePending,
			kstatus{reconciling: true, reason: controllers.ReasonListNotProcessed, message: "is Processing, not yet processed"}, ""},
		{"list new", report("").Obj(), builders.MakePurchase(ns, "p", "l"), listsv1.PurchasePending,
			kstatus{reconciling: true, reason: controllers.ReasonListNotProcessed, message: "is Pending, not yet processed"}, ""},
		{"list processed", report(listsv1.PhaseProcessed).Obj(), builders.MakePurchase(ns, "p", "l"), listsv1.PurchasePending,
			kstatus{reconciling: true, reason: controllers.ReasonListNotProcessed, message: "the purchase is being applied"}, ""},
		{"list failed", report(listsv1.PhaseFailed).Obj(), builders.MakePurchase(ns, "p", "l"), listsv1.PurchaseFailed,
			kstatus{stalled: true, reason: controllers.ReasonListFailed, message: "failed and has no results"}, "Warning ListFailed"},
		{"list purchased by this one", report(listsv1.PhaseResults).Purchased().Delivery(listsv1.DeliveryStatus{Purchase: "p"}).Obj(),
			builders.MakePurchase(ns, "p", "l"), listsv1.PurchasePurchased,
			kstatus{readyTrue: true, reason: controllers.ReasonPurchased, message: "(list 4) is purchased"}, "Normal Purchased"},
		{"list delivered other fields", report(listsv1.PhaseResults).Purchased().Delivery(listsv1.DeliveryStatus{Purchase: "first", Fields: []string{"age"}}).Obj(),
			builders.MakePurchase(ns, "p", "l").Fields("income"), listsv1.PurchaseFailed,
			kstatus{stalled: true, reason: controllers.ReasonAlreadyPurchased, message: "was already purchased by first, delivering fields [age]"}, "Warning AlreadyPurchased"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.purchase.Generation(3).Obj()
			w := newWorld(t, p)
			if tc.list != nil {
				w.create(tc.list)
			}
			r := w.purchaseReconciler()
			wantRequeue(t, w.reconcile(r, p, false), 0)
			got := w.purchase(p.Name)
			if got.Status.Phase != tc.phase {
				t.Fatalf("phase %q, want %q", got.Status.Phase, tc.phase)
			}
			checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 3, tc.want)
			if tc.warning != "" {
				w.wantEvent(tc.warning)
			} else {
				w.noWarnings()
			}
			// Looking again changes nothing and says nothing again.
			w.clock.Step(time.Minute)
			w.reconcile(r, p, false)
			again := w.purchase(p.Name)
			if again.ResourceVersion != got.ResourceVersion {
				t.Errorf("a second look wrote the status again: %+v", again.Status)
			}
			if evs := w.takeEvents(); len(evs) != 0 {
				t.Errorf("a second look recorded %q", evs)
			}
		})
	}
}

// purchasedAt is the clock's time when the list's results became
// available, kept however often the Purchase is looked at later.
func TestPurchasedAt(t *testing.T) {
	l := report(listsv1.PhaseProcessed).Obj()
	p := builders.MakePurchase(ns, "p", "l").Generation(1).Obj()
	w := newWorld(t, l, p)
	r := w.purchaseReconciler()
	w.reconcile(r, p, false)
	if got := w.purchase(p.Name); got.Status.Phase != listsv1.PurchasePending || got.Status.PurchasedAt != nil || got.Status.ListID != 4 {
		t.Fatalf("while the list is Processed: %+v", got.Status)
	}

	w.clock.Step(30 * time.Second)
	l = w.list(l.Name)
	l.Status.Phase, l.Status.Purchased = listsv1.PhaseResults, true
	l.Status.Delivery = &listsv1.DeliveryStatus{Purchase: p.Name}
	if err := w.c.Status().Update(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	w.reconcile(r, p, false)
	got := w.purchase(p.Name)
	sameTime(t, "purchasedAt", got.Status.PurchasedAt, t0.Add(30*time.Second))
	checkConditions(t, got.Status.Conditions, got.Status.ObservedGeneration, 1, kstatus{readyTrue: true, reason: controllers.ReasonPurchased})

	w.clock.Step(time.Hour)
	w.reconcile(r, p, false)
	sameTime(t, "purchasedAt after another look", w.purchase(p.Name).Status.PurchasedAt, t0.Add(30*time.Second))
}
