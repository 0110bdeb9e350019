package deploy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// adopt runs hack/helm-adopt.sh with args against the cluster.
func (tc *testCluster) adopt(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../../../hack/helm-adopt.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+tc.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/helm-adopt.sh %v: %v\n%s", args, err, out)
	}
	t.Logf("hack/helm-adopt.sh %v: %s", args, strings.TrimSpace(string(out)))
}

// TestAdoptionPaths walks the documented moves (docs/install.md,
// "Upgrades and adoption") against a real API server with Helm's Go
// library and kubectl:
//   - `kubectl apply --server-side -k config/default`, then `helm install`
//     refuses with a message naming hack/helm-adopt.sh; after it, the same
//     install adopts every object (the Deployment and the claim keep their
//     UIDs: nothing is deleted and made again);
//   - after `helm uninstall`, a release of another name in another
//     namespace is refused on the kept CRDs, naming `helm-adopt.sh --crds`;
//     after it, the install succeeds and the lists are still there.
func TestAdoptionPaths(t *testing.T) {
	t.Parallel() // a control plane of its own
	tc := startCluster(t)
	ctx := context.Background()
	if out, err := tc.kubectl(t, "apply", "--server-side", "-k", kustomizeBase); err != nil {
		t.Fatalf("kubectl apply -k config/default: %v\n%s", err, out)
	}
	var dep appsv1.Deployment
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "emaildata-controller-manager"}, &dep); err != nil {
		t.Fatal(err)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "emaildata-store"}, &pvc); err != nil {
		t.Fatal(err)
	}
	tc.namespaces(t, "team-a")
	list := builders.MakeEmailList("team-a", "kept").ConfigMap("kept", "list.csv").Obj()
	if err := tc.c.Create(ctx, list); err != nil {
		t.Fatal(err)
	}

	err := tc.helmInstall(t, releaseName, releaseNS, nil)
	if err == nil || !strings.Contains(err.Error(), "hack/helm-adopt.sh") {
		t.Fatalf("helm install over config/default: %v, want a refusal naming hack/helm-adopt.sh", err)
	}
	tc.adopt(t, releaseName, releaseNS)
	tc.mustInstall(t, releaseName, releaseNS, nil)
	var adopted appsv1.Deployment
	if err := tc.c.Get(ctx, client.ObjectKeyFromObject(&dep), &adopted); err != nil || adopted.UID != dep.UID ||
		adopted.Labels["app.kubernetes.io/managed-by"] != "Helm" || adopted.Annotations["meta.helm.sh/release-name"] != releaseName {
		t.Errorf("the manager Deployment after adoption: uid %s (was %s), labels %v, annotations %v (%v)",
			adopted.UID, dep.UID, adopted.Labels, adopted.Annotations, err)
	}
	var claim corev1.PersistentVolumeClaim
	if err := tc.c.Get(ctx, client.ObjectKeyFromObject(&pvc), &claim); err != nil || claim.UID != pvc.UID ||
		claim.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the store claim after adoption: uid %s (was %s), annotations %v (%v)", claim.UID, pvc.UID, claim.Annotations, err)
	}

	tc.helmUninstall(t, releaseName, releaseNS)
	tc.namespaces(t, "mail-system")
	err = tc.helmInstall(t, "mail", "mail-system", nil)
	if err == nil || !strings.Contains(err.Error(), "helm-adopt.sh --crds mail mail-system") {
		t.Fatalf("helm install of another release over kept CRDs: %v, want a refusal naming helm-adopt.sh --crds", err)
	}
	tc.adopt(t, "--crds", "mail", "mail-system")
	tc.mustInstall(t, "mail", "mail-system", nil)
	var crd apiextensionsv1.CustomResourceDefinition
	if err := tc.c.Get(ctx, client.ObjectKey{Name: "emaillists.lists.emaildata.io"}, &crd); err != nil ||
		crd.Annotations["meta.helm.sh/release-name"] != "mail" || crd.Annotations["meta.helm.sh/release-namespace"] != "mail-system" {
		t.Errorf("CRD after the move: %v (%v)", crd.Annotations, err)
	}
	var got listsv1.EmailList
	if err := tc.c.Get(ctx, client.ObjectKeyFromObject(list), &got); err != nil || got.UID != list.UID {
		t.Errorf("the list across the moves: %v", err)
	}
}
