package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

func waitPurchase(t *testing.T, ns, name string, phase listsv1.PurchasePhase, wantMsg string) *listsv1.Purchase {
	t.Helper()
	var p listsv1.Purchase
	eventually(t, 20*time.Second, "purchase "+name+" to be "+string(phase), func() (bool, string) {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		c := condition(p.Status.Conditions, listsv1.ConditionReady)
		ok := p.Status.Phase == phase && c != nil && strings.Contains(c.Message, wantMsg)
		return ok, string(p.Status.Phase) + " " + fmtConds(p.Status.Conditions)
	})
	return &p
}

// TestTwoStepPurchase: a report list stops at Processed with reporting and
// no download; a Purchase moves it to Results; a second Purchase is a no-op.
func TestTwoStepPurchase(t *testing.T) {
	ns := nsLocal
	name := uniqueName("report")
	create(t, builders.MakeEmailList(ns, name).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).
		APIUpload(putUpload(t, []byte("a@x.com\nb@x.com\nc@y.org\n")), testTenant).Obj())
	l := waitPhase(t, ns, name, listsv1.PhaseProcessed)
	if l.Status.Purchased {
		t.Error("a report list must not be purchased before a Purchase")
	}
	if got := l.Status.Reporting["domain"]; got["x.com"] != 2 || got["y.org"] != 1 {
		t.Errorf("reporting %v", l.Status.Reporting)
	}
	if c := condition(l.Status.Conditions, listsv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("a Processed list is healthy; Ready = %+v", c)
	}

	create(t, builders.MakePurchase(ns, name+"-buy", name).Obj())
	p := waitPurchase(t, ns, name+"-buy", listsv1.PurchasePurchased, "is purchased")
	if p.Status.PurchasedAt == nil || p.Status.ListID != l.Status.ListID {
		t.Errorf("purchase status %+v", p.Status)
	}
	l = getList(t, ns, name)
	if l.Status.Phase != listsv1.PhaseResults || !l.Status.Purchased {
		t.Fatalf("list %s purchased=%v after purchase", l.Status.Phase, l.Status.Purchased)
	}
	if data := string(readResult(t, l)); !strings.Contains(data, "c@y.org,y.org") {
		t.Errorf("result %q lacks the appended column", data)
	}

	// Purchasing again is idempotent.
	create(t, builders.MakePurchase(ns, name+"-again", name).Obj())
	p2 := waitPurchase(t, ns, name+"-again", listsv1.PurchasePurchased, "is purchased")
	if p2.Status.ListID != l.Status.ListID {
		t.Errorf("second purchase %+v", p2.Status)
	}
	if after := getList(t, ns, name); !after.Status.CompletedAt.Equal(l.Status.CompletedAt) || after.Status.Phase != listsv1.PhaseResults {
		t.Errorf("the second purchase changed the list: %+v", after.Status)
	}
}

// TestPurchaseRefusals: validation lists cannot be purchased; a list that is
// not processed yet keeps the purchase pending with a clear message.
func TestPurchaseRefusals(t *testing.T) {
	ns := nsLocal
	ev := uniqueName("ev")
	create(t, builders.MakeEmailList(ns, ev).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).Obj())
	create(t, builders.MakePurchase(ns, ev+"-buy", ev).Obj())
	p := waitPurchase(t, ns, ev+"-buy", listsv1.PurchaseFailed, "email_validation")
	if c := condition(p.Status.Conditions, listsv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v", c)
	}

	// The list waits for a source that appears later.
	waiting := uniqueName("waiting")
	create(t, builders.MakeEmailList(ns, waiting).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).ConfigMap(waiting, "l.csv").Obj())
	create(t, builders.MakePurchase(ns, waiting+"-buy", waiting).Obj())
	waitPurchase(t, ns, waiting+"-buy", listsv1.PurchasePending, "not yet processed")

	create(t, builders.MakePurchase(ns, "nobody-buy", "no-such-list").Obj())
	waitPurchase(t, ns, "nobody-buy", listsv1.PurchasePending, `EmailList "no-such-list" does not exist`)

	// Once the source shows up, the list is processed and the waiting
	// purchase takes effect.
	createConfigMap(t, ns, waiting, "l.csv", "a@example.com\n")
	waitPurchase(t, ns, waiting+"-buy", listsv1.PurchasePurchased, "is purchased")
}

// TestPurchaseFields: a purchase naming a field the service does not
// deliver is refused before anything is written; a valid one is applied
// and recorded in the list's status; another asking for the same (all of
// this service's one column) is Purchased too. (SameDelivery's refusal of
// a different one is tested in the api package.)
func TestPurchaseFields(t *testing.T) {
	ns := nsLocal
	name := uniqueName("fields")
	create(t, builders.MakeEmailList(ns, name).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).
		APIUpload(putUpload(t, []byte("a@x.com\nb@y.org\n")), testTenant).Obj())
	before := waitPhase(t, ns, name, listsv1.PhaseProcessed)
	bad := builders.MakePurchase(ns, name+"-bad", name).Obj()
	bad.Spec.Fields = []string{"shoe_size"}
	create(t, bad)
	waitPurchase(t, ns, name+"-bad", listsv1.PurchaseFailed, `unknown field "shoe_size"; this list's service delivers: domain`)
	if l := getList(t, ns, name); l.Status.Phase != listsv1.PhaseProcessed || *l.Status.Result != *before.Status.Result {
		t.Fatalf("an invalid purchase changed the list: phase %s result %+v", l.Status.Phase, l.Status.Result)
	}
	if err := k8s.Delete(context.Background(), bad); err != nil {
		t.Fatal(err)
	}

	p := builders.MakePurchase(ns, name+"-buy", name).Obj()
	p.Spec.Fields = []string{"domain"}
	create(t, p)
	waitPurchase(t, ns, name+"-buy", listsv1.PurchasePurchased, "is purchased")
	l := getList(t, ns, name)
	if got := string(readResult(t, l)); got != "email,domain\na@x.com,x.com\nb@y.org,y.org\n" {
		t.Errorf("delivered %q", got)
	}
	if !strings.Contains(l.Status.Result.Key, "delivered-") || l.Status.Result.Rows != 2 {
		t.Errorf("result %+v", l.Status.Result)
	}
	if d := l.Status.Delivery; d == nil || d.Purchase != name+"-buy" || len(d.Fields) != 1 || d.Fields[0] != "domain" {
		t.Errorf("delivery %+v", d)
	}

	other := builders.MakePurchase(ns, name+"-again", name).Obj()
	create(t, other)
	waitPurchase(t, ns, name+"-again", listsv1.PurchasePurchased, "is purchased")
}
