package controllers_test

import (
	"context"
	"testing"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// TestListHistoryTenant: the tenant a list is verified for (the history's
// scope, issue 30) is stored in its plan, where every shard reads it: the
// API tenant of a list the REST API created, else the list's namespace,
// even when a kubectl list carries the API's labels, so that a namespace
// cannot read an API tenant's history by labelling a list.
func TestListHistoryTenant(t *testing.T) {
	const csv = "a@example.com\n"
	for _, tc := range []struct {
		name, ns string
		build    func(*builders.EmailListWrapper) *builders.EmailListWrapper
		want     string
	}{
		{"api list", nsLocal, func(w *builders.EmailListWrapper) *builders.EmailListWrapper {
			return w.APIUpload(putUpload(t, []byte(csv)), testTenant)
		}, evhistory.APITenant(testTenant)},
		{"kubectl list with forged API labels", nsTeamA, func(w *builders.EmailListWrapper) *builders.EmailListWrapper {
			return w.ConfigMap(configMapWith(t, nsTeamA, csv), "list.txt").
				Labels(listsv1.LabelManagedBy, listsv1.ManagedByAPI, listsv1.LabelTenant, testTenant)
		}, evhistory.NamespaceTenant(nsTeamA)},
		{"kubectl list in the API namespace", nsLocal, func(w *builders.EmailListWrapper) *builders.EmailListWrapper {
			return w.ConfigMap(configMapWith(t, nsLocal, csv), "list.txt").Labels(listsv1.LabelTenant, testTenant)
		}, evhistory.NamespaceTenant(nsLocal)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("tenant")
			create(t, tc.build(builders.MakeEmailList(tc.ns, name).FileName("list.txt")).Obj())
			l := waitPhase(t, tc.ns, name, listsv1.PhaseResults)
			plan, err := pipeline.LoadPlan(context.Background(), store, blobstore.ListKeys{UID: string(l.UID)})
			if err != nil {
				t.Fatal(err)
			}
			if plan.HistoryTenant != tc.want {
				t.Errorf("history tenant %q, want %q", plan.HistoryTenant, tc.want)
			}
		})
	}
}

// configMapWith creates a ConfigMap holding data under list.txt.
func configMapWith(t *testing.T, ns, data string) string {
	t.Helper()
	name := uniqueName("cm")
	createConfigMap(t, ns, name, "list.txt", data)
	return name
}
