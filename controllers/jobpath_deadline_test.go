package controllers_test

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// silentResolver is a DNS server that reads every query and answers none,
// so a worker resolving through it waits for as long as its timeout lets
// it. It counts the queries: the proof that a worker was running.
func silentResolver(t *testing.T) (addr string, queries *atomic.Int64) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	queries = &atomic.Int64{}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, _, err := conn.ReadFrom(buf); err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Logf("silent resolver: %v", err)
				}
				return
			}
			queries.Add(1)
		}
	}()
	t.Cleanup(func() { _ = conn.Close() })
	return conn.LocalAddr().String(), queries
}

// TestJobPathActiveDeadline: a worker Job gets the manager's
// ActiveDeadline (--worker-active-deadline) as activeDeadlineSeconds, and
// when a running list outlasts it (its worker waits on a resolver that
// never answers, with a DNS timeout far beyond the deadline) the real Job
// controller stops the Job and the list fails with the reason
// DeadlineExceeded and a message naming the deadline and the setting.
//
// The workers' namespace enforces Pod Security "restricted": the worker
// pod the manager builds is admitted there (it ran: the resolver counted
// its queries).
func TestJobPathActiveDeadline(t *testing.T) {
	t.Parallel() // its own manager and namespaces
	const deadline = 20 * time.Second
	addr, queries := silentResolver(t)
	ns, workers := uniqueName("deadline"), uniqueName("deadline-workers")
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workers, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: workers, Name: workerSA}})
	opts := jobOptions(ns, workers)
	opts.Job.ActiveDeadline = deadline
	opts.Job.ImagePullPolicy = corev1.PullNever
	opts.Verify.DNSServer = addr
	opts.Verify.DNSTimeout = 10 * time.Minute
	opts.Verify.DNSWorkers = 2
	t.Cleanup(startManager(t, opts))

	name := uniqueName("deadline")
	create(t, builders.MakeEmailList(ns, name).APIUpload(putUpload(t, []byte("email\nann@never-answers.com\n")), testTenant).Header().Obj())
	l := waitPhaseWithin(t, ns, name, listsv1.PhaseFailed, 2*time.Minute)

	c := condition(l.Status.Conditions, listsv1.ConditionStalled)
	if c == nil || c.Reason != controllers.ReasonDeadlineExceeded || !strings.Contains(c.Message, "ran longer than its deadline of 20s") ||
		!strings.Contains(c.Message, "--worker-active-deadline") {
		t.Fatalf("Stalled = %+v, want DeadlineExceeded naming the 20s deadline and --worker-active-deadline", c)
	}
	if r := condition(l.Status.Conditions, listsv1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != controllers.ReasonDeadlineExceeded {
		t.Errorf("Ready = %+v, want False with reason DeadlineExceeded", r)
	}
	if n := queries.Load(); n == 0 {
		t.Errorf("the worker sent no DNS query: it never ran, so the deadline stopped no running list")
	}

	job := listJob(t, workers, l)
	if got := ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0); got != int64(deadline/time.Second) {
		t.Errorf("activeDeadlineSeconds %d, want %d", got, int64(deadline/time.Second))
	}
	if pp := job.Spec.Template.Spec.Containers[0].ImagePullPolicy; pp != corev1.PullNever {
		t.Errorf("worker imagePullPolicy %q, want the configured Never", pp)
	}
	// FailureTarget comes first, Failed once the pods are gone: either
	// decides the outcome (see jobExecution).
	var failed *batchv1.JobCondition
	for i, jc := range job.Status.Conditions {
		if (jc.Type == batchv1.JobFailed || jc.Type == batchv1.JobFailureTarget) && jc.Status == corev1.ConditionTrue {
			failed = &job.Status.Conditions[i]
		}
	}
	if failed == nil || failed.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("job conditions %+v, want FailureTarget or Failed with reason DeadlineExceeded", job.Status.Conditions)
	}
}
