package builders

import (
	"testing"
	"time"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

func TestEmailListWrapper(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := MakeEmailList("ns", "l").Service(listsv1.ServiceEmailAppend).Action(listsv1.ActionReport).
		APIUpload("uploads/t/x/list.csv", "t").Header().EmailColumn(3).UID("u1").Generation(2).Created(at).ListID(7)
	a := w.Obj()
	b := w.Labels("k", "v").Obj()
	switch {
	case a.Namespace != "ns" || a.Name != "l" || a.Spec.Service != listsv1.ServiceEmailAppend || a.Spec.Action != listsv1.ActionReport:
		t.Errorf("identity or service: %+v", a)
	case a.Spec.Source.UploadKey != "uploads/t/x/list.csv" || a.Labels[listsv1.LabelManagedBy] != listsv1.ManagedByAPI || a.Labels[listsv1.LabelTenant] != "t":
		t.Errorf("upload: %+v %v", a.Spec.Source, a.Labels)
	case !a.Spec.Format.HasHeader() || a.Spec.Format.EmailColumn != 3 || a.Spec.Format.Name != "list.csv":
		t.Errorf("format: %+v", a.Spec.Format)
	case a.UID != "u1" || a.Generation != 2 || !a.CreationTimestamp.Time.Equal(at) || a.Status.ListID != 7:
		t.Errorf("metadata or status: %+v", a)
	case a.Labels["k"] != "" || b.Labels["k"] != "v":
		t.Errorf("Obj must return copies: %v then %v", a.Labels, b.Labels)
	}
}

func TestPurchaseAndDatasetWrappers(t *testing.T) {
	p := MakePurchase("ns", "p", "l").Fields("a", "b").MatchType(listsv1.MatchIndividual).Generation(3).Obj()
	if p.Spec.ListName != "l" || len(p.Spec.Fields) != 2 || p.Spec.MatchType != "I" || p.Generation != 3 {
		t.Errorf("purchase: %+v", p)
	}
	d := MakeDataset("ns", "d").ConfigMap("cm", "people.csv").ContinueOnError(true).MaxErrors(5).UID("u").Obj()
	if d.Spec.Source.ConfigMapKeyRef.Name != "cm" || !d.Spec.ContinuesOnError() || d.Spec.MaxErrors != 5 || d.UID != "u" {
		t.Errorf("dataset: %+v", d)
	}
}
