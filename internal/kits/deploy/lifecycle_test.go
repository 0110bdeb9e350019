package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

const testAPIKey = "lifecycle-test-key-0001"

// createAPIKey makes a key Secret for email_validation in ns.
func (tc *testCluster) createAPIKey(t *testing.T, ns string) {
	t.Helper()
	if err := tc.c.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-key", Labels: map[string]string{apikey.Label: "true"}},
		StringData: map[string]string{"key": testAPIKey, "services": "email_validation", "tenant": "acme"},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUninstallReinstallKeepsResults installs the chart with Helm's Go
// library against a real API server and runs the manager and the API as
// the service accounts the chart made (so its RBAC is what they get), on a
// file store whose directory stands for the PVC's volume (named after the
// claim's UID: a claim made again would find it empty). A list uploaded
// through the API and a list applied with kubectl in another namespace
// finish. Then:
//   - helm uninstall leaves the claim (the same UID), the CRDs, the lists,
//     the list ID counter, the installation secrets and the API key
//     namespace with its key;
//   - with no manager left, deleting a list waits on its finalizer,
//     nothing is removed;
//   - helm install again adopts the claim and the key namespace; the new manager finishes the
//     deletion (the list's store objects go), the API serves the kept
//     list's result, byte for byte, and a new list gets a new ID;
//   - helm upgrade to an object store keeps the claim too.
func TestUninstallReinstallKeepsResults(t *testing.T) {
	t.Parallel() // a control plane of its own
	tc := startCluster(t)
	ctx := context.Background()
	const ns = releaseNS
	tc.namespaces(t, ns, "team-a")
	tc.mustInstall(t, releaseName, ns, nil)
	var pvc corev1.PersistentVolumeClaim
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "emaildata-store"}, &pvc); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(t.TempDir(), string(pvc.UID))
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The key goes where the chart's configuration tells the API to look:
	// by default a key namespace of the release's own, not ns.
	keyNS := tc.releaseConfig(t, ns, releaseName).Namespaces.APIKeys
	if keyNS == "" || keyNS == ns {
		t.Fatalf("the API key namespace is %q, want one apart from %s", keyNS, ns)
	}
	tc.createAPIKey(t, keyNS)
	mgr := tc.startManager(t, ns, releaseName, storeDir)
	api := tc.startAPI(t, ns, releaseName, storeDir)

	apiList := submitList(t, api, "email\nann@example.com\nbob@example.org\n")
	kept := waitResults(t, tc, ns, apiList)
	before := download(t, api, apiList.id)
	if sum := sha256.Sum256(before); hex.EncodeToString(sum[:]) != kept.Status.Result.SHA256 {
		t.Fatalf("downloaded result does not match status.result.sha256")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "team-list"}, Data: map[string]string{"list.csv": "email\ncy@example.net\n"}}
	if err := tc.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	teamList := builders.MakeEmailList("team-a", "team-list").ConfigMap("team-list", "list.csv").Header().Obj()
	if err := tc.c.Create(ctx, teamList); err != nil {
		t.Fatal(err)
	}
	team := waitResults(t, tc, "team-a", listRef{name: "team-list"})
	mgr.stop(t)
	api.stop(t)

	tc.helmUninstall(t, releaseName, ns)
	checkKeptOnUninstall(t, tc, ns, pvc.UID, kept, team)
	// The key namespace and its keys too (the reinstalled API below
	// serves with the kept key).
	var key corev1.Secret
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: keyNS, Name: "tenant-key"}, &key); err != nil {
		t.Errorf("the API key after uninstall: %v", err)
	}

	// No manager: a deletion waits on the finalizer and removes nothing.
	if out, err := tc.kubectl(t, "delete", "emaillist", "team-list", "-n", "team-a", "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %s %v", out, err)
	}
	var deleting listsv1.EmailList
	if err := tc.c.Get(ctx, client.ObjectKeyFromObject(teamList), &deleting); err != nil || deleting.DeletionTimestamp.IsZero() || len(deleting.Finalizers) == 0 {
		t.Fatalf("the list with no manager: %v, deletion %v, finalizers %v", err, deleting.DeletionTimestamp, deleting.Finalizers)
	}
	teamPrefix := blobstore.ListKeys{UID: string(team.UID)}.Prefix()
	if n := countFiles(t, storeDir, teamPrefix); n == 0 {
		t.Fatalf("the deleting list's store objects are gone with no manager")
	}

	tc.mustInstall(t, releaseName, ns, nil)
	var again corev1.PersistentVolumeClaim
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "emaildata-store"}, &again); err != nil || again.UID != pvc.UID {
		t.Fatalf("after the reinstall the claim is %v (%v), want the kept one %s", again.UID, err, pvc.UID)
	}
	mgr = tc.startManager(t, ns, releaseName, storeDir)
	api = tc.startAPI(t, ns, releaseName, storeDir)
	eventually(t, "the deletion finished by the new manager", func() (bool, error) {
		err := tc.c.Get(ctx, client.ObjectKeyFromObject(teamList), &deleting)
		return apierrors.IsNotFound(err), nil
	})
	if n := countFiles(t, storeDir, teamPrefix); n != 0 {
		t.Errorf("%d store objects of the deleted list remain", n)
	}
	after := download(t, api, apiList.id)
	if !bytes.Equal(after, before) {
		t.Errorf("the kept list's result changed across the reinstall: %d bytes, was %d", len(after), len(before))
	}
	next := submitList(t, api, "email\ndee@example.com\n")
	if next.id == apiList.id {
		t.Errorf("the reinstalled API handed out list ID %d again", next.id)
	}
	waitResults(t, tc, ns, next)
	mgr.stop(t)
	api.stop(t)

	// A switch to an object store: the claim is no longer rendered, and kept.
	if err := tc.helmUpgrade(t, releaseName, ns, map[string]any{"store": map[string]any{"url": "s3://lists?region=eu-west-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "emaildata-store"}, &again); err != nil || again.UID != pvc.UID {
		t.Errorf("after the switch to s3 the claim is %v (%v), want the kept one", again.UID, err)
	}
}

// listRef names a list by API ID or by object name.
type listRef struct {
	id   int64
	name string
}

// submitList uploads csv through the API.
func submitList(t *testing.T, api *running, csv string) listRef {
	t.Helper()
	var ref listRef
	eventually(t, "POST /v5/list", func() (bool, error) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", "people.csv")
		_, _ = fw.Write([]byte(csv))
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, api.addr+"/v5/list?service=email_validation&header=true", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		code, out, err := httpDo(req, testAPIKey)
		if err != nil || code != http.StatusAccepted {
			// 401 until the API's informer has the key.
			return false, fmt.Errorf("%d %s %v", code, out, err)
		}
		var r struct {
			ListID int64 `json:"list_id"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return false, err
		}
		ref.id = r.ListID
		return true, nil
	})
	return ref
}

// waitResults waits until the list reaches Results and returns it.
func waitResults(t *testing.T, tc *testCluster, ns string, ref listRef) listsv1.EmailList {
	t.Helper()
	var l listsv1.EmailList
	eventually(t, fmt.Sprintf("list %+v in Results", ref), func() (bool, error) {
		if ref.name != "" {
			if err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ref.name}, &l); err != nil {
				return false, err
			}
		} else {
			var ls listsv1.EmailListList
			if err := tc.c.List(context.Background(), &ls, client.InNamespace(ns), client.MatchingLabels{listsv1.ListIDLabel: fmt.Sprint(ref.id)}); err != nil || len(ls.Items) != 1 {
				return false, err
			}
			l = ls.Items[0]
		}
		if l.Status.Phase == listsv1.PhaseFailed {
			t.Fatalf("list %s failed: %+v", l.Name, l.Status.Conditions)
		}
		return l.Status.Phase == listsv1.PhaseResults && l.Status.Result != nil, nil
	})
	return l
}

// download GETs a list's result through the API.
func download(t *testing.T, api *running, id int64) []byte {
	t.Helper()
	var out []byte
	eventually(t, "GET results", func() (bool, error) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v5/list/%d/results", api.addr, id), nil)
		code, body, err := httpDo(req, testAPIKey)
		out = body
		return code == http.StatusOK, err
	})
	return out
}

// countFiles counts the files under prefix of a file store.
func countFiles(t *testing.T, storeDir, prefix string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(filepath.Join(storeDir, prefix), func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n++
		}
		if os.IsNotExist(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkKeptOnUninstall: what an uninstall must leave, and what it must not.
func checkKeptOnUninstall(t *testing.T, tc *testCluster, ns string, pvcUID types.UID, lists ...listsv1.EmailList) {
	t.Helper()
	ctx := context.Background()
	var pvc corev1.PersistentVolumeClaim
	if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "emaildata-store"}, &pvc); err != nil || pvc.UID != pvcUID {
		t.Errorf("the store claim after uninstall: %v (%v)", pvc.UID, err)
	}
	for _, crd := range []string{"emaillists", "purchases", "datasets"} {
		if err := tc.c.Get(ctx, client.ObjectKey{Name: crd + ".lists.emaildata.io"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s after uninstall: %v", crd, err)
		}
	}
	for _, l := range lists {
		var got listsv1.EmailList
		if err := tc.c.Get(ctx, client.ObjectKeyFromObject(&l), &got); err != nil || got.Status.Result == nil || got.Status.Result.SHA256 != l.Status.Result.SHA256 {
			t.Errorf("list %s/%s after uninstall: %v", l.Namespace, l.Name, err)
		}
	}
	keep := []string{"emaildata-list-ids"}
	for _, s := range installsecret.Specs() {
		keep = append(keep, installsecret.Config{}.Name(s.Kind))
	}
	for _, name := range keep {
		var obj client.Object = &corev1.Secret{}
		if name == "emaildata-list-ids" {
			obj = &corev1.ConfigMap{}
		}
		if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Errorf("%s after uninstall: %v", name, err)
		}
	}
	for _, name := range []string{"emaildata-controller-manager", "emaildata-api"} {
		if err := tc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
			t.Errorf("service account %s after uninstall: %v", name, err)
		}
	}
	var secrets corev1.SecretList
	if err := tc.c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil || len(secrets.Items) != 0 {
		t.Errorf("Helm release records after uninstall: %d (%v)", len(secrets.Items), err)
	}
}
