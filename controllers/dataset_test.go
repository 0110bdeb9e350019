package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// peopleCSV returns a people file with three good rows and, when bad is
// set, a malformed row (two fields of three) on line 4, plus the emails of
// the good rows.
func peopleCSV(prefix string, bad bool) (string, []string) {
	emails := []string{prefix + "-ann@example.com", prefix + "-bob@example.com", prefix + "-cy@example.net"}
	var b strings.Builder
	b.WriteString("email,first,last\n")
	fmt.Fprintf(&b, "%s,Ann,Lee\n", emails[0])
	fmt.Fprintf(&b, "%s,Bob,Ray\n", emails[1])
	if bad {
		b.WriteString("secret-value,only-two\n") // line 4
	}
	fmt.Fprintf(&b, "%s,Cy,Dee\n", emails[2])
	return b.String(), emails
}

func getDataset(t *testing.T, ns, name string) *listsv1.Dataset {
	t.Helper()
	var ds listsv1.Dataset
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
		t.Fatal(err)
	}
	return &ds
}

func waitDataset(t *testing.T, ns, name string, phase listsv1.DatasetPhase) *listsv1.Dataset {
	t.Helper()
	var ds *listsv1.Dataset
	eventually(t, 60*time.Second, fmt.Sprintf("dataset %s/%s to be %s", ns, name, phase), func() (bool, string) {
		ds = getDataset(t, ns, name)
		return ds.Status.Phase == phase, fmt.Sprintf("phase=%q %s", ds.Status.Phase, fmtConds(ds.Status.Conditions))
	})
	return ds
}

func TestDatasetLocalContinueOnError(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("ds-cont")
	data, emails := peopleCSV(name, true)
	createConfigMap(t, nsLocal, name, "people.csv", data)
	create(t, builders.MakeDataset(nsLocal, name).ConfigMap(name, "people.csv").ContinueOnError(true).Obj())

	ds := waitDataset(t, nsLocal, name, listsv1.DatasetLoaded)
	if ds.Status.Rows != 4 || ds.Status.Imported != 3 || ds.Status.Failed != 1 {
		t.Errorf("rows %d imported %d failed %d, want 4, 3, 1", ds.Status.Rows, ds.Status.Imported, ds.Status.Failed)
	}
	if len(ds.Status.Errors) != 1 || !strings.HasPrefix(ds.Status.Errors[0], "line 4:") {
		t.Errorf("errors %q, want one naming line 4", ds.Status.Errors)
	}
	if strings.Contains(strings.Join(ds.Status.Errors, " "), "secret-value") {
		t.Errorf("errors leak row contents: %q", ds.Status.Errors)
	}
	if c := condition(ds.Status.Conditions, listsv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready: %v", ds.Status.Conditions)
	}
	if ds.Status.StartedAt == nil || ds.Status.CompletedAt == nil || ds.Status.ObservedGeneration != ds.Generation {
		t.Errorf("startedAt %v completedAt %v observedGeneration %d", ds.Status.StartedAt, ds.Status.CompletedAt, ds.Status.ObservedGeneration)
	}
	for _, e := range emails {
		rec, err := peopleStore.Get(ctx, people.EmailKey(e))
		if err != nil {
			t.Fatalf("get %s: %v", e, err)
		}
		if rec.Last == "" {
			t.Errorf("%s has no last name", e)
		}
	}

	// Deleting the Dataset deletes its blobs (the staged copy, the summary).
	keys := blobstore.DatasetKeys{UID: string(ds.UID)}
	if _, err := store.Size(ctx, keys.Source()); err != nil {
		t.Fatalf("staged source: %v", err)
	}
	if err := k8s.Delete(ctx, ds); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "dataset gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(ds), &listsv1.Dataset{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, k := range []string{keys.Source(), keys.Summary()} {
		if _, err := store.Size(ctx, k); !blobstore.IsNotFound(err) {
			t.Errorf("%s survived the dataset: %v", k, err)
		}
	}
}

func TestDatasetLocalStopsOnError(t *testing.T) {
	name := uniqueName("ds-stop")
	data, _ := peopleCSV(name, true)
	createConfigMap(t, nsLocal, name, "people.csv", data)
	create(t, builders.MakeDataset(nsLocal, name).ConfigMap(name, "people.csv").ContinueOnError(false).Obj())

	ds := waitDataset(t, nsLocal, name, listsv1.DatasetFailed)
	c := condition(ds.Status.Conditions, listsv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "line 4") {
		t.Fatalf("Stalled %+v, want one naming line 4", c)
	}
	if strings.Contains(c.Message, "secret-value") {
		t.Errorf("message leaks row contents: %q", c.Message)
	}
	if ds.Status.Failed != 1 || ds.Status.Imported > 2 {
		t.Errorf("imported %d failed %d", ds.Status.Imported, ds.Status.Failed)
	}
	if evs := warningEvents(t, nsLocal, name); len(evs) == 0 {
		t.Errorf("no warning event")
	}
}

func TestDatasetValidation(t *testing.T) {
	ctx := context.Background()
	both := builders.MakeDataset(nsLocal, uniqueName("ds-both")).ConfigMap("cm", "people.csv").ContinueOnError(true).Obj()
	both.Spec.Source.BlobURL = "mem://x/y.csv"
	if err := k8s.Create(ctx, both); err == nil || !strings.Contains(err.Error(), "exactly one of") {
		t.Errorf("two sources accepted: %v", err)
	}
	none := builders.MakeDataset(nsLocal, uniqueName("ds-none")).ConfigMap("cm", "people.csv").ContinueOnError(true).Obj()
	none.Spec.Source.ConfigMapKeyRef = nil
	if err := k8s.Create(ctx, none); err == nil {
		t.Errorf("no source accepted")
	}

	name := uniqueName("ds-immutable")
	ds := builders.MakeDataset(nsLocal, name).ConfigMap(name, "people.csv").ContinueOnError(true).Obj()
	create(t, ds)
	ds = getDataset(t, nsLocal, name)
	ds.Spec.ContinueOnError = ptrTo(false)
	if err := k8s.Update(ctx, ds); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("spec update accepted: %v", err)
	}
}

// requireJobPeople skips the Dataset Job tests without PostgreSQL: worker
// processes cannot share the suite's bolt file.
func requireJobPeople(t *testing.T) {
	t.Helper()
	if jobPeopleURL == "" {
		t.Skip("PostgreSQL is unreachable; the Dataset Job tests need it for the workers' people store")
	}
}

// TestDatasetJob: the Dataset's Job runs `worker people-import` as a real
// pod, which loads the PostgreSQL people store and writes the summary the
// controller copies into status.
func TestDatasetJob(t *testing.T) {
	requireJobPeople(t)
	ctx := context.Background()
	name := uniqueName("ds-job")
	data, emails := peopleCSV(name, true)
	createConfigMap(t, nsJob, name, "people.csv", data)
	ds := builders.MakeDataset(nsJob, name).ConfigMap(name, "people.csv").ContinueOnError(true).Obj()
	ds.Spec.MaxErrors = 5
	create(t, ds)

	var job batchv1.Job
	eventually(t, 30*time.Second, "the dataset's job", func() (bool, string) {
		ds = getDataset(t, nsJob, name)
		if ds.UID == "" {
			return false, "no uid"
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: nsJob, Name: controllers.DatasetJobName(ds)}, &job)
		return err == nil, fmt.Sprint(err)
	})
	keys := blobstore.DatasetKeys{UID: string(ds.UID)}

	spec := job.Spec
	if !metav1.IsControlledBy(&job, ds) {
		t.Errorf("job is not owned by the dataset")
	}
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 1 {
		t.Errorf("backoffLimit %v, want 1", spec.BackoffLimit)
	}
	if spec.PodFailurePolicy == nil || spec.PodFailurePolicy.Rules[0].Action != batchv1.PodFailurePolicyActionFailJob ||
		spec.PodFailurePolicy.Rules[0].OnExitCodes.Values[0] != controllers.ExitBadInput {
		t.Errorf("podFailurePolicy %+v", spec.PodFailurePolicy)
	}
	if spec.TTLSecondsAfterFinished != nil {
		t.Errorf("ttl set before the outcome was saved")
	}
	if job.Labels["app.kubernetes.io/component"] != "worker" {
		t.Errorf("labels %v", job.Labels)
	}
	c := spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"people-import", "--key " + keys.Source(), "--summary-key " + keys.Summary(),
		"--people-url " + jobPeopleURL, "--blob-url file://" + storeDir, "--continue-on-error", "--max-errors 5"} {
		if !strings.Contains(args, want) {
			t.Errorf("worker args %q lack %q", args, want)
		}
	}
	if c.Command[0] != "/worker" || c.Image != workerImage {
		t.Errorf("command %v image %s", c.Command, c.Image)
	}

	ds = waitDataset(t, nsJob, name, listsv1.DatasetLoaded)
	if ds.Status.Rows != 4 || ds.Status.Imported != 3 || ds.Status.Failed != 1 || len(ds.Status.Errors) != 1 ||
		!strings.HasPrefix(ds.Status.Errors[0], "line 4:") {
		t.Errorf("status %+v", ds.Status)
	}
	ps, err := people.Open(ctx, jobPeopleURL)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for _, e := range emails {
		if rec, err := ps.Get(ctx, people.EmailKey(e)); err != nil || rec.Last == "" {
			t.Errorf("%s in the workers' people store: %+v, %v", e, rec, err)
		}
	}
	eventually(t, 10*time.Second, "ttlSecondsAfterFinished", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(&job), &job); err != nil {
			return false, err.Error()
		}
		return job.Spec.TTLSecondsAfterFinished != nil, "no ttl"
	})
}

// TestDatasetJobFailed: a malformed row without continueOnError makes the
// worker exit 42; the pod failure policy fails the Job at once, and the
// Dataset goes Failed with the summary's line.
func TestDatasetJobFailed(t *testing.T) {
	requireJobPeople(t)
	ctx := context.Background()
	name := uniqueName("ds-jobfail")
	data, _ := peopleCSV(name, true)
	createConfigMap(t, nsJob, name, "people.csv", data)
	create(t, builders.MakeDataset(nsJob, name).ConfigMap(name, "people.csv").ContinueOnError(false).Obj())
	ds := waitDataset(t, nsJob, name, listsv1.DatasetFailed)
	c := condition(ds.Status.Conditions, listsv1.ConditionStalled)
	if c == nil || !strings.Contains(c.Message, "line 4") {
		t.Errorf("Stalled %+v, want the summary's line", c)
	}
	if ds.Status.Failed != 1 {
		t.Errorf("status %+v", ds.Status)
	}
	// The Dataset fails on the Job's FailureTarget; Failed and the counts follow.
	var job batchv1.Job
	eventually(t, 30*time.Second, "the job to be Failed", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsJob, Name: controllers.DatasetJobName(ds)}, &job); err != nil {
			return false, err.Error()
		}
		return jobCondition(&job, batchv1.JobFailed), fmt.Sprint(job.Status.Conditions)
	})
	if job.Status.Failed != 1 {
		t.Errorf("job failed %d conditions %v, want one failed pod and Failed (no retry for bad input)", job.Status.Failed, job.Status.Conditions)
	}
}
