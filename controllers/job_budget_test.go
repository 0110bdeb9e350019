package controllers

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
)

func budgetList(name string, svc listsv1.Service) *listsv1.EmailList {
	return builders.MakeEmailList("team", name).UID("uid-" + name).Service(svc).Obj()
}

func jobOf(t *testing.T, c client.Client, list *listsv1.EmailList) *batchv1.Job {
	t.Helper()
	var j batchv1.Job
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "workers", Name: JobName(list)}, &j); err != nil {
		t.Fatal(err)
	}
	return &j
}

// Without a fleet backend, list Jobs divide each mail host's budget: at
// most as many pods as connections, each a whole connection and its
// fraction of the rate; a list finding it all taken waits; a finished Job
// gives its part back; other services take none.
func TestJobsDivideSMTPBudget(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).Build()
	e := &JobExecutor{Client: c, Config: JobConfig{Namespace: "workers", Image: "worker:1", Parallelism: 8,
		SMTPBudget: SMTPBudget{Conns: 2, Rate: 5}}}

	a := budgetList("a", listsv1.ServiceEmailValidation)
	if err := e.Start(ctx, a, 12); err != nil {
		t.Fatal(err)
	}
	ja := jobOf(t, c, a)
	env := envOf(ja)
	if p := *ja.Spec.Parallelism; p != 2 {
		t.Errorf("parallelism %d, want 2 (one pod a connection)", p)
	}
	for k, want := range map[string]string{EnvSMTPConns: "1", EnvSMTPRate: "2.5", EnvFleetSeats: "12"} {
		if env[k] != want {
			t.Errorf("env %v: %s %q, want %q", env, k, env[k], want)
		}
	}
	if ja.Annotations[JobSMTPConnsAnnotation] != "2" {
		t.Errorf("annotation %q, want 2", ja.Annotations[JobSMTPConnsAnnotation])
	}
	cond := meta.FindStatusCondition(a.Status.Conditions, listsv1.ConditionHostLimits)
	if cond == nil || cond.Reason != ReasonHostLimitsDivided || cond.Status != metav1.ConditionTrue {
		t.Errorf("HostLimits condition %+v", cond)
	}
	// Starting again (a restarted manager) changes nothing.
	if err := e.Start(ctx, a, 12); err != nil {
		t.Fatal(err)
	}

	b := budgetList("b", listsv1.ServiceEmailValidation)
	var wait *BudgetWaitError
	if err := e.Start(ctx, b, 1); !errors.As(err, &wait) {
		t.Fatalf("second list started with the budget all taken: %v", err)
	}
	// Other services send no SMTP: they never wait.
	if err := e.Start(ctx, budgetList("c", listsv1.ServiceEmailIntelligence), 3); err != nil {
		t.Fatal(err)
	}

	ja.Status.Conditions = append(ja.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	if err := c.Status().Update(ctx, ja); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, b, 1); err != nil {
		t.Fatalf("after the first list finished: %v", err)
	}
	jb := jobOf(t, c, b)
	if env := envOf(jb); *jb.Spec.Parallelism != 1 || env[EnvSMTPConns] != "2" || env[EnvSMTPRate] != "5" {
		t.Errorf("one shard: parallelism %d env %v, want one pod with the whole budget", *jb.Spec.Parallelism, env)
	}

	// With the budget shared by a fleet backend, pods take it whole.
	e.Config.SMTPBudget.Shared = true
	d := budgetList("d", listsv1.ServiceEmailValidation)
	if err := e.Start(ctx, d, 12); err != nil {
		t.Fatal(err)
	}
	if jd := jobOf(t, c, d); *jd.Spec.Parallelism != 8 || jd.Annotations[JobSMTPConnsAnnotation] != "" {
		t.Errorf("shared: parallelism %d annotations %v", *jd.Spec.Parallelism, jd.Annotations)
	}
	if cond := meta.FindStatusCondition(d.Status.Conditions, listsv1.ConditionHostLimits); cond == nil || cond.Reason != ReasonHostLimitsShared {
		t.Errorf("shared: condition %+v", cond)
	}
}

// Whole connections only: the sum of the pods' limits never exceeds the
// host's.
func TestBudgetDivideSums(t *testing.T) {
	for _, tc := range []struct{ conns, parallelism, free int }{{2, 8, 2}, {5, 2, 5}, {5, 8, 3}, {10, 3, 10}, {1, 8, 1}} {
		b := SMTPBudget{Conns: tc.conns, Rate: 5}
		par := int32(tc.parallelism)
		job := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: &par, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}}}}
		pods, conns, rate := b.divide(job, tc.free)
		if pods < 1 || conns < 1 || pods*conns > tc.free || float64(pods)*rate > 5*float64(tc.free)/float64(tc.conns)+1e-9 || pods > tc.parallelism {
			t.Errorf("%+v: %d pods × %d conns at %g/s", tc, pods, conns, rate)
		}
	}
}

// A running email_validation list says when the fleet backend stops
// answering, and when it answers again.
func TestFleetBackendCondition(t *testing.T) {
	up, detail := false, "unreachable"
	r := &EmailListReconciler{FleetHealth: func() (bool, string) { return up, detail }}
	l := budgetList("f", listsv1.ServiceEmailValidation)
	r.noteFleet(l)
	c := meta.FindStatusCondition(l.Status.Conditions, listsv1.ConditionFleetBackend)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonFleetUnreachable {
		t.Fatalf("backend down: %+v", c)
	}
	up = true
	r.noteFleet(l)
	if c := meta.FindStatusCondition(l.Status.Conditions, listsv1.ConditionFleetBackend); c.Status != metav1.ConditionTrue {
		t.Errorf("backend back: %+v", c)
	}
	other := budgetList("g", listsv1.ServiceEmailAppend)
	r.noteFleet(other)
	if len(other.Status.Conditions) != 0 {
		t.Errorf("email_append list got %v", other.Status.Conditions)
	}
}

// envOf is the plain environment of a Job's worker container.
func envOf(j *batchv1.Job) map[string]string {
	out := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}
