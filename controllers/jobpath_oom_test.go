package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/operator"
)

// TestJobPathOOMKilledFailsList: workers whose memory limit is below what
// the worker needs (its peak resident set is well over 24Mi however small
// the list) are killed by the test node as the kernel would, and reported
// OOMKilled with exit code 137. The Job controller retries the index within
// backoffLimitPerIndex, then fails the Job, and the list fails with a
// message that says OOMKilled and names the limit.
func TestJobPathOOMKilledFailsList(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	ns, workers := uniqueName("oom"), uniqueName("oom-workers")
	for _, n := range []string{ns, workers} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
	opts := jobOptions(ns, workers)
	res, err := operator.WorkerResources("10m", "24Mi", "")
	if err != nil {
		t.Fatal(err)
	}
	opts.Job.Resources = res
	opts.Job.BackoffLimitPerIndex = 1
	defer startManager(t, opts)()

	name := uniqueName("oom")
	create(t, builders.MakeEmailList(ns, name).APIUpload(putUpload(t, []byte("email\na@example.com\nb@example.org\n")), testTenant).Header().Obj())
	l := waitPhaseWithin(t, ns, name, listsv1.PhaseFailed, 2*time.Minute)
	c := condition(l.Status.Conditions, listsv1.ConditionStalled)
	if c == nil || c.Reason != controllers.ReasonProcessingFailed || !strings.Contains(c.Message, "shard 0: worker OOMKilled (exit code 137) 2 time(s)") ||
		!strings.Contains(c.Message, "over its memory limit of 24Mi") {
		t.Fatalf("Stalled = %+v, want ProcessingFailed saying shard 0 was OOMKilled twice over its 24Mi limit", c)
	}

	job := listJob(t, workers, l)
	if !jobCondition(job, batchv1.JobFailed) && !jobCondition(job, batchv1.JobFailureTarget) {
		t.Errorf("job conditions %v, want it failed", job.Status.Conditions)
	}
	if got := ptr.Deref(job.Status.FailedIndexes, ""); got != "0" {
		t.Errorf("failedIndexes %q, want 0", got)
	}
	pods := podsByIndex(t, job)["0"]
	if len(pods) != 2 {
		t.Fatalf("index 0 has %d pods, want 2 (the first try and one retry)", len(pods))
	}
	for _, p := range pods {
		term := terminatedState(p)
		if p.Status.Phase != corev1.PodFailed || term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
			t.Errorf("pod %s: phase %s terminated %s", p.Name, p.Status.Phase, describeTerminated(term))
		}
	}
}

func describeTerminated(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return "<not terminated>"
	}
	return fmt.Sprintf("exit %d reason %q", t.ExitCode, t.Reason)
}
