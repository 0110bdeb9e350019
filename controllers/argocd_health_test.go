package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/argocdhealth"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// argoChecks are the Argo CD health checks the chart ships.
const argoChecks = "../charts/emaildata/files/argocd"

// waitHealth waits until the live object's status.phase is phase (the
// manager wrote it), then runs the kind's Argo CD health check on the
// object as the API server returns it, and checks the verdict.
func waitHealth(t *testing.T, kind, ns, name, phase, want string) argocdhealth.Status {
	t.Helper()
	script, err := argocdhealth.Load(argoChecks, kind)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(listsv1.GroupVersion.String())
	u.SetKind(kind)
	eventually(t, 60*time.Second, fmt.Sprintf("%s %s to be %s", kind, name, phase), func() (bool, string) {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return got == phase, got
	})
	st, err := argocdhealth.Evaluate(script, u.Object)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s %s, phase %s: %s %q", kind, name, phase, st.Status, st.Message)
	if st.Status != want {
		t.Errorf("%s %s in phase %s: Argo CD health %s (%q), want %s", kind, name, phase, st.Status, st.Message, want)
	}
	if st.Message == "" {
		t.Errorf("%s %s in phase %s: no health message", kind, name, phase)
	}
	return st
}

// TestArgoCDHealthLive drives EmailLists, Purchases and Datasets through
// every phase with the suite's manager and runs the shipped Argo CD health
// checks on the live objects in each.
func TestArgoCDHealthLive(t *testing.T) {
	ns := nsLocal
	t.Run("EmailList", func(t *testing.T) {
		waiting := uniqueName("argo-wait")
		create(t, builders.MakeEmailList(ns, waiting).ConfigMap(waiting, "list.csv").Obj())
		waitHealth(t, "EmailList", ns, waiting, string(listsv1.PhasePending), argocdhealth.Progressing)
		createConfigMap(t, ns, waiting, "list.csv", "a@example.com\n")
		waitHealth(t, "EmailList", ns, waiting, string(listsv1.PhaseResults), argocdhealth.Healthy)

		held := uniqueName("argo-held")
		l := heldList(t, ns, held)
		waitHealth(t, "EmailList", ns, held, string(listsv1.PhaseProcessing), argocdhealth.Progressing)
		deleteAndWait(t, l)

		report := uniqueName("argo-report")
		create(t, builders.MakeEmailList(ns, report).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).
			APIUpload(putUpload(t, []byte("a@x.com\n")), testTenant).Obj())
		waitHealth(t, "EmailList", ns, report, string(listsv1.PhaseProcessed), argocdhealth.Suspended)
		create(t, builders.MakePurchase(ns, report+"-buy", report).Obj())
		waitHealth(t, "Purchase", ns, report+"-buy", string(listsv1.PurchasePurchased), argocdhealth.Healthy)
		waitHealth(t, "EmailList", ns, report, string(listsv1.PhaseResults), argocdhealth.Healthy)

		bad := uniqueName("argo-bad")
		create(t, builders.MakeEmailList(ns, bad).APIUpload(putUpload(t, nil), testTenant).Obj())
		st := waitHealth(t, "EmailList", ns, bad, string(listsv1.PhaseFailed), argocdhealth.Degraded)
		if !strings.Contains(st.Message, "no data rows") {
			t.Errorf("Degraded message %q does not carry the Stalled condition's", st.Message)
		}
	})
	t.Run("Purchase", func(t *testing.T) {
		nobody := uniqueName("argo-buy-nothing")
		create(t, builders.MakePurchase(ns, nobody, "no-such-list").Obj())
		waitHealth(t, "Purchase", ns, nobody, string(listsv1.PurchasePending), argocdhealth.Progressing)

		ev := uniqueName("argo-ev")
		create(t, builders.MakeEmailList(ns, ev).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).Obj())
		create(t, builders.MakePurchase(ns, ev+"-buy", ev).Obj())
		waitHealth(t, "Purchase", ns, ev+"-buy", string(listsv1.PurchaseFailed), argocdhealth.Degraded)
	})
	t.Run("Dataset", func(t *testing.T) {
		missing := uniqueName("argo-ds-wait")
		create(t, builders.MakeDataset(ns, missing).ConfigMap(missing, "people.csv").ContinueOnError(false).Obj())
		waitHealth(t, "Dataset", ns, missing, string(listsv1.DatasetPending), argocdhealth.Progressing)

		good := uniqueName("argo-ds")
		data, _ := peopleCSV(good, true)
		createConfigMap(t, ns, good, "people.csv", data)
		create(t, builders.MakeDataset(ns, good).ConfigMap(good, "people.csv").ContinueOnError(true).Obj())
		waitHealth(t, "Dataset", ns, good, string(listsv1.DatasetLoaded), argocdhealth.Healthy)

		failed := uniqueName("argo-ds-fail")
		createConfigMap(t, ns, failed, "people.csv", data)
		create(t, builders.MakeDataset(ns, failed).ConfigMap(failed, "people.csv").ContinueOnError(false).Obj())
		waitHealth(t, "Dataset", ns, failed, string(listsv1.DatasetFailed), argocdhealth.Degraded)
	})
}
