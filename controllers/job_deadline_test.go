package controllers

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

// TestWorkerJobDeadlineAndPullPolicy: JobConfig.ActiveDeadline becomes
// activeDeadlineSeconds (rounded up to whole seconds, none when zero or
// negative) and ImagePullPolicy the container's pull policy (IfNotPresent
// when unset), on list Jobs and Dataset import Jobs alike.
func TestWorkerJobDeadlineAndPullPolicy(t *testing.T) {
	list := builders.MakeEmailList("team", "l").UID("uid-l").Obj()
	ds := &listsv1.Dataset{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "people", UID: "uid-ds"}}
	for _, tc := range []struct {
		deadline time.Duration
		policy   corev1.PullPolicy
		wantSecs *int64
		wantPull corev1.PullPolicy
	}{
		{0, "", nil, corev1.PullIfNotPresent},
		{-time.Second, corev1.PullAlways, nil, corev1.PullAlways},
		{DefaultWorkerActiveDeadline, corev1.PullNever, ptr.To(int64(86400)), corev1.PullNever},
		{1500 * time.Millisecond, "", ptr.To(int64(2)), corev1.PullIfNotPresent},
	} {
		cfg := JobConfig{Namespace: "workers", Image: "worker:1", ActiveDeadline: tc.deadline, ImagePullPolicy: tc.policy}
		lj, err := (&JobExecutor{Config: cfg}).buildJob(list, 3)
		if err != nil {
			t.Fatal(err)
		}
		dj, err := (&DatasetJobLoader{Config: cfg, Scheme: kubescheme.New()}).buildJob(ds, "datasets/x")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range []*batchv1.Job{lj, dj} {
			if got := j.Spec.ActiveDeadlineSeconds; !ptrEqual(got, tc.wantSecs) {
				t.Errorf("deadline %s: job %s activeDeadlineSeconds %v, want %v", tc.deadline, j.Name, deref(got), deref(tc.wantSecs))
			}
			if got := j.Spec.Template.Spec.Containers[0].ImagePullPolicy; got != tc.wantPull {
				t.Errorf("policy %q: job %s pulls %q, want %q", tc.policy, j.Name, got, tc.wantPull)
			}
		}
	}
}

// TestJobExecutionDeadlineExceeded: a Job the Job controller stopped at its
// deadline fails the run with ReasonDeadlineExceeded (which outranks the
// shards' summaries) and a message naming the deadline and the setting;
// another failure keeps the Job's own message and no reason.
func TestJobExecutionDeadlineExceeded(t *testing.T) {
	list := builders.MakeEmailList("team", "l").UID("uid-l").Obj()
	job := func(reason, msg string, secs *int64) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "l-job", Labels: map[string]string{JobListUIDLabel: "uid-l"}},
			Spec:       batchv1.JobSpec{ActiveDeadlineSeconds: secs},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: msg},
			}},
		}
	}
	for _, tc := range []struct {
		name       string
		job        *batchv1.Job
		wantReason string
		wantMsg    []string
	}{
		{"deadline", job(batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", ptr.To(int64(5400))),
			ReasonDeadlineExceeded, []string{"job l-job ran longer than its deadline of 1h30m0s", "--worker-active-deadline"}},
		{"deadline, field gone", job(batchv1.JobReasonDeadlineExceeded, "", nil),
			ReasonDeadlineExceeded, []string{"ran longer than its activeDeadlineSeconds", "--worker-active-deadline"}},
		{"backoff", job(batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", ptr.To(int64(60))),
			"", []string{"job l-job failed: Job has reached the specified backoff limit"}},
	} {
		ex := jobExecution(tc.job, list)
		if ex.State != ExecFailed || ex.Reason != tc.wantReason {
			t.Errorf("%s: state %v reason %q, want failed with %q", tc.name, ex.State, ex.Reason, tc.wantReason)
		}
		for _, m := range tc.wantMsg {
			if !strings.Contains(ex.Message, m) {
				t.Errorf("%s: message %q lacks %q", tc.name, ex.Message, m)
			}
		}
	}
}

func ptrEqual(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return "<none>"
	}
	return *p
}
