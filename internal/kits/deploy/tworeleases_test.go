package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// TestTwoReleases: two releases in one cluster, each in its namespace and
// watching its own team's, install side by side (the second without the
// CRDs, which the first owns), and each manager, run as its service
// account, processes its team's list and not the other's: the result is
// in its own store, the ID drawn from its own counter. An install that would
// overlap is refused at install with a message saying why: one watching
// every namespace, one watching a namespace already watched, one in a
// namespace already holding an installation, one reusing a release name
// in another namespace, one installing the CRDs another release owns.
func TestTwoReleases(t *testing.T) {
	t.Parallel() // a control plane of its own
	tc := startCluster(t)
	ctx := context.Background()
	tc.namespaces(t, "ops-a", "ops-b", "ops-c", "ops-d", "team-a", "team-b")
	watching := func(ns string) map[string]any { return map[string]any{"watchNamespaces": []any{ns}} }
	tc.mustInstall(t, "mail-a", "ops-a", watching("team-a"))
	second := watching("team-b")
	second["crds"] = map[string]any{"install": false}
	tc.mustInstall(t, "mail-b", "ops-b", second)
	// Each with its own API key namespace.
	for _, keyNS := range []string{"ops-a-mail-a-keys", "ops-b-mail-b-keys"} {
		if err := tc.c.Get(ctx, client.ObjectKey{Name: keyNS}, &corev1.Namespace{}); err != nil {
			t.Errorf("key namespace %s: %v", keyNS, err)
		}
	}

	for _, tc2 := range []struct {
		name, release, ns string
		vals              map[string]any
		want              string
	}{
		{"every namespace", "mail-c", "ops-c", map[string]any{"crds": map[string]any{"install": false}}, "one of the two would watch every namespace"},
		{"overlapping", "mail-d", "ops-d", map[string]any{"watchNamespaces": []any{"team-a"}, "crds": map[string]any{"install": false}}, `already watches namespace "team-a"`},
		{"same namespace", "mail-f", "ops-a", map[string]any{"watchNamespaces": []any{"team-f"}, "crds": map[string]any{"install": false}}, `already watches namespace "ops-a"`},
		{"same name", "mail-a", "ops-c", map[string]any{"watchNamespaces": []any{"team-c"}, "crds": map[string]any{"install": false}}, "has this release's name"},
		{"the CRDs again", "mail-e", "ops-d", map[string]any{"watchNamespaces": []any{"team-e"}}, `belong to the Helm release "mail-a" in namespace "ops-a"`},
	} {
		t.Run("refused: "+tc2.name, func(t *testing.T) {
			err := tc.helmInstall(t, tc2.release, tc2.ns, tc2.vals)
			if err == nil || !strings.Contains(err.Error(), tc2.want) {
				t.Fatalf("helm install %s -n %s: %v, want %q", tc2.release, tc2.ns, err, tc2.want)
			}
		})
	}

	stores := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
	for _, x := range []string{"a", "b"} {
		tc.startManager(t, "ops-"+x, "mail-"+x+"-emaildata", stores[x])
		team := "team-" + x
		if err := tc.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "list"},
			Data: map[string]string{"list.csv": "email\nann@example.com\n"}}); err != nil {
			t.Fatal(err)
		}
		if err := tc.c.Create(ctx, builders.MakeEmailList(team, "list").ConfigMap("list", "list.csv").Header().Obj()); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []string{"a", "b"} {
		l := waitResults(t, tc, "team-"+x, listRef{name: "list"})
		other := map[string]string{"a": "b", "b": "a"}[x]
		if n := countFiles(t, stores[x], filepath.Dir(l.Status.Result.Key)); n == 0 {
			t.Errorf("team-%s's result is not in release %s's store", x, x)
		}
		if n := countFiles(t, stores[other], filepath.Dir(l.Status.Result.Key)); n != 0 {
			t.Errorf("team-%s's list was written to release %s's store", x, other)
		}
		var counter corev1.ConfigMap
		// Its ID came from its release's own counter (a reconcile that
		// met a stale cache may have drawn one more: IDs are never reused).
		if err := tc.c.Get(ctx, client.ObjectKey{Namespace: "ops-" + x, Name: "mail-" + x + "-emaildata-list-ids"}, &counter); err != nil ||
			counter.Data["last"] == "" || counter.Data["last"] == "0" || l.Status.ListID == 0 {
			t.Errorf("release %s's counter: %v (%v), list ID %d", x, counter.Data, err, l.Status.ListID)
		}
	}
}
