package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

func newPurchase(ns, name, list string) *listsv1.Purchase {
	return &listsv1.Purchase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: listsv1.PurchaseSpec{ListName: list}}
}

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
	create(t, newList(ns, name).service(listsv1.ServiceEmailIntelligence).action(listsv1.ActionReport).
		upload(putUpload(t, []byte("a@x.com\nb@x.com\nc@y.org\n"))).obj())
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

	create(t, newPurchase(ns, name+"-buy", name))
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
	create(t, newPurchase(ns, name+"-again", name))
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
	create(t, newList(ns, ev).upload(putUpload(t, []byte("a@example.com\n"))).obj())
	create(t, newPurchase(ns, ev+"-buy", ev))
	p := waitPurchase(t, ns, ev+"-buy", listsv1.PurchaseFailed, "email_validation")
	if c := condition(p.Status.Conditions, listsv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v", c)
	}

	// The list waits for a source that appears later.
	waiting := uniqueName("waiting")
	create(t, newList(ns, waiting).service(listsv1.ServiceEmailIntelligence).action(listsv1.ActionReport).configMap(waiting, "l.csv").obj())
	create(t, newPurchase(ns, waiting+"-buy", waiting))
	waitPurchase(t, ns, waiting+"-buy", listsv1.PurchasePending, "not yet processed")

	create(t, newPurchase(ns, "nobody-buy", "no-such-list"))
	waitPurchase(t, ns, "nobody-buy", listsv1.PurchasePending, `EmailList "no-such-list" does not exist`)

	// Once the source shows up, the list is processed and the waiting
	// purchase takes effect.
	createConfigMap(t, ns, waiting, "l.csv", "a@example.com\n")
	waitPurchase(t, ns, waiting+"-buy", listsv1.PurchasePurchased, "is purchased")
}

// TestPurchaseFields: a purchase with fields delivers only those service
// columns (the input's columns always).
func TestPurchaseFields(t *testing.T) {
	ns := nsLocal
	name := uniqueName("fields")
	create(t, newList(ns, name).service(listsv1.ServiceEmailIntelligence).action(listsv1.ActionReport).
		upload(putUpload(t, []byte("a@x.com\nb@y.org\n"))).obj())
	waitPhase(t, ns, name, listsv1.PhaseProcessed)
	p := newPurchase(ns, name+"-buy", name)
	p.Spec.Fields = []string{"age"} // not one of this service's columns: only input columns stay
	create(t, p)
	waitPurchase(t, ns, name+"-buy", listsv1.PurchasePurchased, "is purchased")
	l := getList(t, ns, name)
	if got := string(readResult(t, l)); got != "email\na@x.com\nb@y.org\n" {
		t.Errorf("delivered %q, want the input column only", got)
	}
	if !strings.Contains(l.Status.Result.Key, "delivered-") || l.Status.Result.Rows != 2 {
		t.Errorf("result %+v", l.Status.Result)
	}
}
