package controllers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

const sampleCSV = "id,name,email\n" +
	"1,\"Doe, John\",john@example.com\n" +
	"2,Ann,ann@example\n" +
	"3,Bob\n" +
	"4,\"multi\nline\",carol@example.org\n"

// TestListReachesResults runs a process list through both executors.
func TestListReachesResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   string
	}{
		{"job executor", nsJob},
		{"local executor", nsLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("results")
			createConfigMap(t, tc.ns, name, "list.csv", sampleCSV)
			create(t, builders.MakeEmailList(tc.ns, name).ConfigMap(name, "list.csv").Header().EmailColumn(3).Obj())

			l := waitPhase(t, tc.ns, name, listsv1.PhaseResults)
			if l.Status.ListID <= 0 {
				t.Errorf("listID = %d, want > 0", l.Status.ListID)
			}
			if l.Status.Records != 4 || l.Status.Progress == nil || l.Status.Progress.Done != 4 || l.Status.ProgressText != "4/4" {
				t.Errorf("records=%d progress=%+v text=%q, want 4 and 4/4", l.Status.Records, l.Status.Progress, l.Status.ProgressText)
			}
			if !l.Status.Purchased || l.Status.StartedAt == nil || l.Status.CompletedAt == nil {
				t.Errorf("purchased=%v startedAt=%v completedAt=%v", l.Status.Purchased, l.Status.StartedAt, l.Status.CompletedAt)
			}
			if l.Status.ObservedGeneration != l.Generation {
				t.Errorf("observedGeneration %d != generation %d", l.Status.ObservedGeneration, l.Generation)
			}
			if c := condition(l.Status.Conditions, listsv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("Ready condition = %+v", c)
			}
			if c := condition(l.Status.Conditions, listsv1.ConditionReconciling); c != nil {
				t.Errorf("Reconciling should be gone, got %+v", c)
			}
			if got := l.Status.Reporting["status"]; got["valid"] != 2 || got["invalid"] != 2 {
				t.Errorf("reporting = %v, want 2 valid and 2 invalid", l.Status.Reporting)
			}

			data := readResult(t, l)
			want := "id,name,email,ev_status,ev_status_code,ev_domain_type,ev_role_account,ev_correction,ev_duplicate,ev_valid,ev_from_history\n" +
				"1,\"Doe, John\",john@example.com,valid,10,biz,false,,false,true,false\n" +
				"2,Ann,ann@example,invalid,115,,false,,false,false,false\n" +
				"3,Bob,,invalid,100,,false,,false,false,false\n" +
				"4,\"multi\nline\",carol@example.org,valid,10,biz,false,,false,true,false\n"
			if string(data) != want {
				t.Errorf("result file:\n%s\nwant:\n%s", data, want)
			}
			sum := sha256.Sum256(data)
			r := l.Status.Result
			if r.SHA256 != hex.EncodeToString(sum[:]) || r.Bytes != int64(len(data)) || r.Rows != 4 {
				t.Errorf("result status %+v does not match the file (%d bytes)", r, len(data))
			}
			if want := "list-" + itoa(l.Status.ListID) + "-results.csv"; r.FileName != want {
				t.Errorf("file name %q, want %q", r.FileName, want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestJobShape checks the Job the controller creates, in the workers'
// namespace with the operator's pod placement, run by the real Job
// controller; its TTL is set only after the outcome is saved, and the real
// TTL controller then removes it.
func TestJobShape(t *testing.T) {
	t.Parallel() // its list alone: most of its time is the TTL's wait
	ctx := context.Background()
	name := uniqueName("shape")
	var body strings.Builder
	body.WriteString("email\n")
	for i := 0; i < 100; i++ {
		body.WriteString("user" + itoa(int64(i)) + "@example.com\n")
	}
	create(t, builders.MakeEmailList(nsJob, name).APIUpload(putUpload(t, []byte(body.String())), testTenant).Header().Obj())
	l := getList(t, nsJob, name)
	order := watchOrder(t, l)

	var job batchv1.Job
	eventually(t, 20*time.Second, "the job", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: nsWorkers, Name: controllers.JobName(l)}, &job)
		return err == nil, "no job yet"
	})
	// The Job is created in the reconcile that saves the shard count.
	eventually(t, 20*time.Second, "the shard count in status", func() (bool, string) {
		l = getList(t, nsJob, name)
		return l.Status.Shards > 0, "no shards yet"
	})
	spec := job.Spec
	if *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completion mode %v", *spec.CompletionMode)
	}
	if *spec.Completions != l.Status.Shards || l.Status.Shards < 2 || l.Status.Shards > 8 {
		t.Errorf("completions %d, shards %d: want several shards, at most max-shards 8", *spec.Completions, l.Status.Shards)
	}
	if spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex != 2 || spec.MaxFailedIndexes == nil || *spec.MaxFailedIndexes != 0 {
		t.Errorf("backoffLimitPerIndex %v maxFailedIndexes %v", spec.BackoffLimitPerIndex, spec.MaxFailedIndexes)
	}
	if spec.PodFailurePolicy == nil || spec.PodFailurePolicy.Rules[0].Action != batchv1.PodFailurePolicyActionFailIndex ||
		spec.PodFailurePolicy.Rules[0].OnExitCodes.Values[0] != controllers.ExitBadInput {
		t.Errorf("podFailurePolicy %+v", spec.PodFailurePolicy)
	}
	// The Job runs in the workers' namespace: no owner reference can cross
	// namespaces, so labels and an annotation say whose it is.
	if len(job.OwnerReferences) != 0 || job.Labels[controllers.JobListUIDLabel] != string(l.UID) ||
		job.Labels[controllers.JobListNamespaceLabel] != nsJob || job.Annotations[controllers.JobListAnnotation] != nsJob+"/"+name {
		t.Errorf("owner refs %v labels %v annotations %v", job.OwnerReferences, job.Labels, job.Annotations)
	}
	pod := spec.Template.Spec
	if pod.ServiceAccountName != workerSA || pod.PriorityClassName != workerPrio || pod.NodeSelector["node.emaildata.io/testnode"] != "true" ||
		len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" || pod.Containers[0].Resources.Requests.Cpu().String() != "10m" {
		t.Errorf("pod placement: sa %q priority %q nodeSelector %v tolerations %v resources %v", pod.ServiceAccountName,
			pod.PriorityClassName, pod.NodeSelector, pod.Tolerations, pod.Containers[0].Resources)
	}
	// The history's key comes from the Secret, never from the Job spec:
	// required, so the kubelet holds the pod until the Secret exists.
	var key *corev1.EnvVar
	for i, e := range pod.Containers[0].Env {
		if e.Name == "HISTORY_KEY" {
			key = &pod.Containers[0].Env[i]
		}
	}
	if key == nil || key.Value != "" || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || *key.ValueFrom.SecretKeyRef.Optional ||
		key.ValueFrom.SecretKeyRef.Name != historyKeySecret || key.ValueFrom.SecretKeyRef.Key != installsecret.Field {
		t.Errorf("worker env %+v, want HISTORY_KEY from Secret %s, field %s", pod.Containers[0].Env, historyKeySecret, installsecret.Field)
	}
	// The settings come by reference: the manager's (its input limits, its
	// engine without DNS) in the ConfigMap the pod mounts, no setting in
	// the arguments.
	args := pod.Containers[0].Args
	if want := []string{"shard", "--config=" + controllers.WorkerConfigDir + "/" + controllers.WorkerConfigFile, "--list-uid=" + string(l.UID)}; !slices.Equal(args, want) {
		t.Errorf("worker args %q, want %q", args, want)
	}
	var cm corev1.ConfigMap
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil {
			cm.Name = v.ConfigMap.Name
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsWorkers, Name: cm.Name}, &cm); err != nil {
		t.Fatalf("the workers' ConfigMap %q: %v", cm.Name, err)
	}
	wc, err := cfgv1.Decode([]byte(cm.Data[controllers.WorkerConfigFile]))
	if err != nil {
		t.Fatal(err)
	}
	if wc.Pipeline.Limits.MaxRecordBytes.Value() != 4096 || wc.Verification.DNS.Server != "off" || wc.Store.URL != baseOptions.BlobURL {
		t.Errorf("workers' configuration: limits %+v dns %q store %q", wc.Pipeline.Limits, wc.Verification.DNS.Server, wc.Store.URL)
	}

	l = waitPhase(t, nsJob, name, listsv1.PhaseResults)
	if l.Status.Records != 100 || l.Status.Result.Rows != 100 {
		t.Errorf("records %d rows %d, want 100", l.Status.Records, l.Status.Result.Rows)
	}
	// Rows stay in input order across shards.
	lines := strings.Split(strings.TrimSpace(string(readResult(t, l))), "\n")
	for i, line := range lines[1:] {
		if !strings.HasPrefix(line, "user"+itoa(int64(i))+"@") {
			t.Fatalf("row %d is %q: order lost", i, line)
		}
	}
	// The pods were the test node's processes, one success per index.
	for i, pods := range podsByIndex(t, &job) {
		if n := len(succeeded(pods)); n != 1 {
			t.Errorf("index %s: %d succeeded pods of %d", i, n, len(pods))
		}
	}
	order.check(t)

	// The real TTL controller deletes the Job (and the garbage collector its
	// pods) once the TTL passes; the list keeps its outcome.
	eventually(t, (jobTTLSeconds+30)*time.Second, "the TTL controller to delete the job", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&job), &batchv1.Job{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	eventually(t, 30*time.Second, "the job's pods to go", func() (bool, string) {
		n := len(podsByIndex(t, &job))
		return n == 0, fmt.Sprintf("%d indexes have pods", n)
	})
	if l = getList(t, nsJob, name); l.Status.Phase != listsv1.PhaseResults {
		t.Errorf("list is %s after its Job went, want Results", l.Status.Phase)
	}
}

// TestBadInputFails: each bad list ends Failed with a precise message and a
// Warning event, and a good list next to them still completes.
func TestBadInputFails(t *testing.T) {
	t.Parallel() // its lists alone: the missing ConfigMap waits out the source grace
	bomb := strings.Repeat("a@example.com\n", testLimit/10)
	cases := []struct {
		name  string
		build func(name string) *listsv1.EmailList
		want  string
	}{
		{"missing configmap", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).ConfigMap("does-not-exist", "x").Obj()
		}, `ConfigMap "does-not-exist" does not exist`},
		{"missing upload", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).APIUpload(blobstore.UploadPrefix(testTenant)+"nothing-here", testTenant).Obj()
		}, "does not exist in the store"},
		{"email column beyond columns", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).APIUpload(putUpload(t, []byte("a,b\nc,d\n")), testTenant).EmailColumn(5).Obj()
		}, "email column 5 is beyond the file's 2 columns"},
		{"zip without a file", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).FileName("l.zip").APIUpload(putUpload(t, zipOf(t, map[string]string{})), testTenant).Obj()
		}, "no file"},
		{"zip with several files", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).FileName("l.zip").APIUpload(putUpload(t, zipOf(t, map[string]string{"a.csv": "a@b.com\n", "b.csv": "c@d.com\n"})), testTenant).Obj()
		}, "contains 2 files"},
		{"zip path traversal", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).FileName("l.zip").APIUpload(putUpload(t, zipOf(t, map[string]string{"../evil.csv": "a@b.com\n"})), testTenant).Obj()
		}, "evil.csv"},
		{"zip bomb", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).FileName("l.zip").APIUpload(putUpload(t, zipOf(t, map[string]string{"big.csv": bomb})), testTenant).Obj()
		}, "expands beyond"},
		{"binary file", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).APIUpload(putUpload(t, []byte("email\nalice@example.com\nbob@exa\x00mple.com\n")), testTenant).Obj()
		}, "NUL byte"},
		{"excel workbook", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).APIUpload(putUpload(t, []byte("PK\x03\x04\x14\x00\x06\x00junk")), testTenant).Obj()
		}, "not delimited text"},
		{"empty file", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).APIUpload(putUpload(t, nil), testTenant).Obj()
		}, "no data rows"},
		{"service not available", func(n string) *listsv1.EmailList {
			return builders.MakeEmailList(nsLocal, n).Service(listsv1.ServiceEmailAppend).APIUpload(putUpload(t, []byte("a@b.com\n")), testTenant).Obj()
		}, `service "email_append" is not available`},
	}
	good := uniqueName("good-neighbour")
	create(t, builders.MakeEmailList(nsLocal, good).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).Obj())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := uniqueName("bad")
			create(t, tc.build(name))
			l := waitPhase(t, nsLocal, name, listsv1.PhaseFailed)
			c := condition(l.Status.Conditions, listsv1.ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.want) {
				t.Fatalf("Stalled = %+v, want a message containing %q", c, tc.want)
			}
			if r := condition(l.Status.Conditions, listsv1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse {
				t.Errorf("Ready = %+v, want False", r)
			}
			eventually(t, 10*time.Second, "a Warning event", func() (bool, string) {
				evs := warningEvents(t, nsLocal, name)
				for _, e := range evs {
					if strings.Contains(e, tc.want) {
						return true, ""
					}
				}
				return false, strings.Join(evs, "; ")
			})
		})
	}
	t.Run("neighbour", func(t *testing.T) {
		waitPhase(t, nsLocal, good, listsv1.PhaseResults)
	})
}

// TestCallback: one POST with list_id, status and name when Results is
// reached, recorded in status; failing receivers are retried, then given up.
func TestCallback(t *testing.T) {
	type got struct {
		body map[string]any
		ct   string
	}
	var mu sync.Mutex
	var calls []got
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		calls = append(calls, got{m, r.Header.Get("Content-Type")})
		mu.Unlock()
	}))
	defer ok.Close()
	var failures int
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		failures++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer bad.Close()

	name := uniqueName("cb")
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).CallbackURL(ok.URL+"/done?token=x").Obj())
	l := waitPhase(t, nsLocal, name, listsv1.PhaseResults)
	eventually(t, 10*time.Second, "callback delivered", func() (bool, string) {
		l = getList(t, nsLocal, name)
		return l.Status.Callback != nil && l.Status.Callback.State == listsv1.CallbackDelivered, ""
	})
	time.Sleep(500 * time.Millisecond) // no second delivery
	mu.Lock()
	if len(calls) != 1 {
		t.Fatalf("%d callbacks, want exactly 1", len(calls))
	}
	c := calls[0]
	mu.Unlock()
	if c.ct != "application/json" || c.body["status"] != "Results" || c.body["name"] != "list.csv" || c.body["list_id"] != float64(l.Status.ListID) {
		t.Errorf("callback %v (%s)", c.body, c.ct)
	}

	name = uniqueName("cbfail")
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).CallbackURL(bad.URL).Obj())
	eventually(t, 20*time.Second, "callback given up", func() (bool, string) {
		l = getList(t, nsLocal, name)
		return l.Status.Callback != nil && l.Status.Callback.State == listsv1.CallbackFailed, ""
	})
	if l.Status.Callback.Attempts != 3 || !strings.Contains(l.Status.Callback.LastError, "503") {
		t.Errorf("callback status %+v, want 3 attempts ending in 503", l.Status.Callback)
	}
	if l.Status.Phase != listsv1.PhaseResults {
		t.Errorf("a failed callback must not fail the list; phase %s", l.Status.Phase)
	}
}

// TestFinalizerDeletesBlobs: deleting a list deletes its objects.
func TestFinalizerDeletesBlobs(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("del")
	key := putUpload(t, []byte("a@example.com\n"))
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(key, testTenant).Obj())
	l := waitPhase(t, nsLocal, name, listsv1.PhaseResults)
	if err := k8s.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "list gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(l), &listsv1.EmailList{})
		return client.IgnoreNotFound(err) == nil && err != nil, ""
	})
	keys := blobstore.ListKeys{UID: string(l.UID)}
	for _, k := range []string{keys.Plan(), l.Status.Result.Key, key} {
		if ok, _ := store.Exists(ctx, k); ok {
			t.Errorf("%s still exists", k)
		}
	}
}

// TestCELRules: the API server enforces the spec's rules.
func TestCELRules(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		obj  *listsv1.EmailList
		want string
	}{
		{"report with validation", builders.MakeEmailList(nsLocal, uniqueName("cel")).Action(listsv1.ActionReport).APIUpload("k", testTenant).Obj(), "email_validation always runs with action=process"},
		{"no source", builders.MakeEmailList(nsLocal, uniqueName("cel")).Obj(), "exactly one of uploadKey, configMapKeyRef or blobURL"},
		{"two sources", builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("k", testTenant).ConfigMap("a", "b").Obj(), "exactly one of"},
		{"bad extension", builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("k", testTenant).FileName("list.exe").Obj(), "spec.format.name"},
		{"hidden file name", builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("k", testTenant).FileName(".list.csv").Obj(), "spec.format.name"},
		{"bad callback", builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("k", testTenant).CallbackURL("ftp://x").Obj(), "spec.callbackURL"},
		{"negative max age", builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("k", testTenant).MaxAge(-time.Hour).Obj(), "maxAge must not be negative"},
		{"max age on another service", builders.MakeEmailList(nsLocal, uniqueName("cel")).Service(listsv1.ServiceEmailAppend).APIUpload("k", testTenant).MaxAge(time.Hour).Obj(), "verification applies to email_validation lists only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(ctx, tc.obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("immutable", func(t *testing.T) {
		l := builders.MakeEmailList(nsLocal, uniqueName("cel")).APIUpload("uploads/none", testTenant).Obj()
		create(t, l)
		var err error
		for i := 0; i < 20; i++ { // the controller adds its finalizer meanwhile
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(l), l)
			l.Spec.Format.Header = ptrTo(true)
			if err = k8s.Update(ctx, l); !apierrors.IsConflict(err) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "spec is immutable") {
			t.Fatalf("update error %v, want immutability", err)
		}
	})
}

// The list's maximum age reaches its plan, so every shard (in a Job pod or
// in-process) verifies with it.
func TestListMaxAgeReachesPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  *time.Duration
	}{{"probe everything", ptrTo(time.Duration(0))}, {"a week", ptrTo(168 * time.Hour)}, {"default", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("maxage")
			createConfigMap(t, nsLocal, name, "list.csv", sampleCSV)
			b := builders.MakeEmailList(nsLocal, name).ConfigMap(name, "list.csv").Header().EmailColumn(3)
			if tc.age != nil {
				b = b.MaxAge(*tc.age)
			}
			create(t, b.Obj())
			l := waitPhase(t, nsLocal, name, listsv1.PhaseResults)
			plan, err := pipeline.LoadPlan(context.Background(), store, blobstore.ListKeys{UID: string(l.UID)})
			if err != nil {
				t.Fatal(err)
			}
			if (plan.MaxAge == nil) != (tc.age == nil) || (tc.age != nil && *plan.MaxAge != *tc.age) {
				t.Errorf("plan max age %v, want %v", plan.MaxAge, tc.age)
			}
			if !strings.HasSuffix(strings.SplitN(string(readResult(t, l)), "\n", 2)[0], ",ev_from_history") {
				t.Error("no ev_from_history column")
			}
		})
	}
}
