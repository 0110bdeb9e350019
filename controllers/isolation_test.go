package controllers_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/s3server"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// snapshot keeps the bytes of store objects, to prove they are unchanged.
type snapshot map[string][]byte

func takeSnapshot(t *testing.T, keys ...string) snapshot {
	t.Helper()
	s := snapshot{}
	for _, k := range keys {
		data, err := store.ReadAll(context.Background(), k)
		if err != nil {
			t.Fatalf("snapshot %s: %v", k, err)
		}
		s[k] = data
	}
	return s
}

func (s snapshot) check(t *testing.T) {
	t.Helper()
	for k, want := range s {
		got, err := store.ReadAll(context.Background(), k)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("victim object %s changed: %v (%d bytes, was %d)", k, err, len(got), len(want))
		}
	}
}

// objectsUnder lists the keys under prefix.
func objectsUnder(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	it := store.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			return keys
		}
		keys = append(keys, o.Key)
	}
}

// refusedWith waits for the list to fail with reason and a message holding
// want, plus a Warning event, and checks nothing was staged for it.
func refusedWith(t *testing.T, ns, name, reason, want string) {
	t.Helper()
	l := waitPhase(t, ns, name, listsv1.PhaseFailed)
	c := condition(l.Status.Conditions, listsv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, want) {
		t.Fatalf("%s: Stalled = %+v, want reason %s and a message containing %q", name, c, reason, want)
	}
	eventually(t, 10*time.Second, "a Warning event for "+name, func() (bool, string) {
		evs := warningEvents(t, ns, name)
		for _, e := range evs {
			if strings.HasPrefix(e, reason+": ") {
				return true, ""
			}
		}
		return false, strings.Join(evs, "; ")
	})
	if keys := objectsUnder(t, blobstore.ListKeys{UID: string(l.UID)}.Prefix()); len(keys) != 0 {
		t.Errorf("%s: a refused list staged %v", name, keys)
	}
}

func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, obj.GetName()+" gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err != nil && client.IgnoreNotFound(err) == nil, ""
	})
}

// TestCrossNamespaceMatrix: a user who may create EmailLists, Purchases and
// Datasets in team-b tries every way to name data of the API's tenant,
// team-a and the operator. Each attempt is refused with its condition, and
// the victims' objects are byte-identical afterwards. The allowed paths
// (team-b's own grant, team-b's own bucket) work.
func TestCrossNamespaceMatrix(t *testing.T) {
	ctx := context.Background()
	// One real S3-compatible server; each team's key pair may use only its
	// own bucket.
	admin := s3server.Identity{Name: "admin", AccessKey: "AKADMIN", SecretKey: "admin-secret"}
	s3 := s3server.ForTest(t, s3server.Options{Identities: []s3server.Identity{admin,
		{Name: "team-a", AccessKey: "AKIDTEAMA", SecretKey: "team-a-secret", Buckets: []string{"team-a-bucket"}},
		{Name: "team-b", AccessKey: "AKIDTEAMB", SecretKey: "team-b-secret", Buckets: []string{"team-b-bucket"}},
	}, Buckets: []string{"team-a-bucket", "team-b-bucket"}})
	for bucket, body := range map[string]string{"team-a-bucket": "a@example.com\n", "team-b-bucket": "email\nb@example.com\nc@example.org\n"} {
		if _, err := s3.Client(admin).PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: ptrTo("in/list.csv"), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}

	// The victims: an API tenant's list (upload and result), team-a's
	// granted file, team-a's own bucket and Secret, a report list of team-a
	// awaiting purchase.
	upload := putUpload(t, []byte("email\nvictim@secret.example\n"))
	apiList := uniqueName("victim-api")
	create(t, builders.MakeEmailList(nsLocal, apiList).APIUpload(upload, testTenant).Header().Obj())
	victim := waitPhase(t, nsLocal, apiList, listsv1.PhaseResults)
	teamAFile := testGrants[nsTeamA] + uniqueName("f") + ".csv"
	if err := store.WriteAll(ctx, teamAFile, []byte("email\nalice@team-a.example\n"), nil); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsTeamA, Name: "team-a-s3"},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIDTEAMA"), "AWS_SECRET_ACCESS_KEY": []byte("team-a-secret")}})
	report := uniqueName("victim-report")
	createConfigMap(t, nsTeamA, report, "list.csv", "a@x.com\nb@y.org\n")
	create(t, builders.MakeEmailList(nsTeamA, report).Service(listsv1.ServiceEmailIntelligence).Action(listsv1.ActionReport).ConfigMap(report, "list.csv").Obj())
	reportList := waitPhase(t, nsTeamA, report, listsv1.PhaseProcessed)
	victims := takeSnapshot(t, upload, victim.Status.Result.Key, teamAFile, reportList.Status.Result.Key)
	victimPeople := "victim-person@team-a.example"

	// team-b's own, allowed data.
	teamBFile := testGrants[nsTeamB] + uniqueName("f") + ".csv"
	if err := store.WriteAll(ctx, teamBFile, []byte("bob@team-b.example\n"), nil); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsTeamB, Name: "team-b-s3"},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIDTEAMB"), "AWS_SECRET_ACCESS_KEY": []byte("team-b-secret")}})

	mem := func(key string) string { return "file://" + storeDir + "/" + key }
	b := func(prefix string) *builders.EmailListWrapper {
		return builders.MakeEmailList(nsTeamB, uniqueName(prefix))
	}
	withSecret := func(lb *builders.EmailListWrapper, u, secret string) *builders.EmailListWrapper {
		return lb.BlobURL(u).Credentials(secret)
	}
	refusals := []struct {
		name   string
		list   *builders.EmailListWrapper
		ns     string
		reason string
		want   string
	}{
		{"uploadKey of the API's tenant", b("steal-upload").APIUpload(upload, testTenant).Header(), nsTeamB, controllers.ReasonSourceNotAllowed,
			`source.uploadKey is honoured only for lists the REST API creates in namespace "local-exec"`},
		{"uploadKey in the API namespace, another tenant", builders.MakeEmailList(nsLocal, uniqueName("steal-tenant")).APIUpload(upload, testTenant).
			Labels(listsv1.LabelTenant, "t-other"), nsLocal, controllers.ReasonSourceNotAllowed, "not under the tenant's upload folder uploads/t-other/"},
		{"uploadKey in the API namespace, not made by the API", builders.MakeEmailList(nsLocal, uniqueName("steal-unlabelled")).APIUpload(upload, testTenant).
			Labels(listsv1.LabelManagedBy, "kubectl"), nsLocal, controllers.ReasonSourceNotAllowed, "honoured only for lists the REST API creates"},
		{"blobURL of another list's result", b("steal-result").BlobURL(mem(victim.Status.Result.Key)), nsTeamB, controllers.ReasonSourceNotAllowed,
			`namespace "team-b" may read only objects under imports/team-b/`},
		{"blobURL of team-a's grant", b("steal-grant").BlobURL(mem(teamAFile)), nsTeamB, controllers.ReasonSourceNotAllowed, "is not under the granted prefix imports/team-b/"},
		{"blobURL climbing out of the grant", b("steal-climb").BlobURL(mem(testGrants[nsTeamB] + "../team-a/" + strings.TrimPrefix(teamAFile, testGrants[nsTeamA]))), nsTeamB,
			controllers.ReasonSourceNotAllowed, "relative path element"},
		{"blobURL of the operator's published config", b("steal-config").BlobURL(mem("config/verify-lists.json")), nsTeamB, controllers.ReasonSourceNotAllowed, "imports/team-b/"},
		{"team-a's bucket with team-b's credentials", withSecret(b("steal-bucket"), "s3://team-a-bucket/in/list.csv?endpoint="+s3.Endpoint, "team-b-s3"), nsTeamB,
			controllers.ReasonSourceNotAllowed, "access denied"},
		{"team-a's Secret by name", withSecret(b("steal-secret"), "s3://team-a-bucket/in/list.csv?endpoint="+s3.Endpoint, "team-a-s3"), nsTeamB,
			controllers.ReasonSourceMissing, `Secret "team-a-s3" does not exist`},
		{"a gs:// bucket with a Secret", withSecret(b("steal-gs"), "gs://team-a-bucket/in/list.csv", "team-b-s3"), nsTeamB,
			controllers.ReasonSourceNotAllowed, "cannot be read with credentialsSecretRef; use s3://"},
	}
	t.Run("sources", func(t *testing.T) {
		for _, tc := range refusals {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				l := tc.list.Obj()
				create(t, l)
				refusedWith(t, tc.ns, l.Name, tc.reason, tc.want)
				// Delete through the finalizer: only the refused list's
				// own (empty) prefix goes.
				deleteAndWait(t, l)
			})
		}
	})

	t.Run("Purchase naming team-a's list", func(t *testing.T) {
		bad := builders.MakePurchase(nsTeamB, uniqueName("steal-buy"), nsTeamA+"/"+report).Obj()
		if err := k8s.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.listName") {
			t.Fatalf("a namespace/name listName was accepted: %v", err)
		}
		p := builders.MakePurchase(nsTeamB, uniqueName("steal-buy"), report).Obj()
		create(t, p)
		waitPurchase(t, nsTeamB, p.Name, listsv1.PurchasePending, `EmailList "`+report+`" does not exist in namespace "team-b"`)
		time.Sleep(time.Second) // give a wrong controller time to act
		if l := getList(t, nsTeamA, report); l.Status.Phase != listsv1.PhaseProcessed || l.Status.Purchased {
			t.Fatalf("team-a's list was purchased from team-b: %s", l.Status.Phase)
		}
	})

	t.Run("Dataset outside the operator namespace", func(t *testing.T) {
		cm := uniqueName("steal-people")
		createConfigMap(t, nsTeamB, cm, "people.csv", "email,first,last\n"+victimPeople+",Eve,Mallory\n")
		ds := builders.MakeDataset(nsTeamB, cm).ConfigMap(cm, "people.csv").ContinueOnError(false).Obj()
		create(t, ds)
		got := waitDataset(t, nsTeamB, cm, listsv1.DatasetFailed)
		c := condition(got.Status.Conditions, listsv1.ConditionStalled)
		if c == nil || c.Reason != controllers.ReasonNamespaceNotAllowed || !strings.Contains(c.Message, `honoured only in namespace "local-exec"`) {
			t.Fatalf("Stalled = %+v", c)
		}
		if keys := objectsUnder(t, blobstore.DatasetKeys{UID: string(got.UID)}.Prefix()); len(keys) != 0 {
			t.Errorf("a refused Dataset staged %v", keys)
		}
		res, err := people.Match(ctx, peopleStore, []people.Input{{Email: victimPeople}})
		if err != nil || res[0].Level != people.LevelNone {
			t.Errorf("the refused Dataset loaded people: %+v %v", res, err)
		}
		deleteAndWait(t, ds)
	})

	// The allowed paths.
	t.Run("team-b reads its grant", func(t *testing.T) {
		l := b("own-grant").BlobURL(mem(teamBFile)).Obj()
		create(t, l)
		got := waitPhase(t, nsTeamB, l.Name, listsv1.PhaseResults)
		if !strings.Contains(string(readResult(t, got)), "bob@team-b.example") {
			t.Errorf("result %q", readResult(t, got))
		}
		deleteAndWait(t, l)
		if ok, _ := store.Exists(ctx, teamBFile); !ok {
			t.Errorf("the finalizer deleted the granted source %s, which the list does not own", teamBFile)
		}
	})
	t.Run("team-b reads its own bucket with its Secret", func(t *testing.T) {
		l := withSecret(b("own-bucket"), "s3://team-b-bucket/in/list.csv?endpoint="+s3.Endpoint, "team-b-s3").Header().Obj()
		create(t, l)
		got := waitPhase(t, nsTeamB, l.Name, listsv1.PhaseResults)
		if res := string(readResult(t, got)); !strings.Contains(res, "b@example.com") || !strings.Contains(res, "c@example.org") {
			t.Errorf("result %q", res)
		}
		if n, err := s3.Reads("team-b-bucket"); err != nil || n == 0 {
			t.Errorf("team-b's bucket was never read (%d reads, %v)", n, err)
		}
	})

	t.Run("victims unchanged", func(t *testing.T) {
		victims.check(t)
		if n, err := s3.Reads("team-a-bucket"); err != nil || n != 0 {
			t.Errorf("team-a's bucket served %d reads (%v)", n, err)
		}
		if l := getList(t, nsLocal, apiList); l.Status.Result.SHA256 != victim.Status.Result.SHA256 {
			t.Errorf("the API list's result changed")
		}
	})
}
