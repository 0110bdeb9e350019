package controllers

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// SMTPBudget is each mail host's politeness budget (connections open at
// once, new connections a second), which every pod of every list Job
// spends from the same egress.
type SMTPBudget struct {
	// Conns and Rate are --smtp-max-conns-per-host and
	// --smtp-rate-per-host; Conns 0 means no SMTP stage: nothing to divide.
	Conns int
	Rate  float64
	// Shared: a fleet backend holds the limits for every pod, which then
	// get the whole budget (the manager sets it with --fleet-url).
	Shared bool
}

// JobSMTPConnsAnnotation holds the connections to each mail host a list
// Job's pods may open together (its part of the budget).
const JobSMTPConnsAnnotation = "lists.emaildata.io/smtp-conns-per-host"

// Reasons of the HostLimits condition and of a list waiting for budget.
const (
	ReasonHostLimitsDivided    = "DividedAmongPods"
	ReasonHostLimitsShared     = "SharedByFleet"
	ReasonWaitingForSMTPBudget = "WaitingForSMTPBudget"
)

// BudgetWaitError: every connection of the budget is held by other lists'
// Jobs; the list waits (Pending) until one finishes.
type BudgetWaitError struct{ msg string }

func (e *BudgetWaitError) Error() string { return e.msg }

// divides reports whether a list's Job must take a part of the budget.
func (b SMTPBudget) divides(list *listsv1.EmailList) bool {
	return b.Conns > 0 && !b.Shared && list.Spec.Service == listsv1.ServiceEmailValidation
}

// divide gives job its part of the budget, free connections of it being
// unused by other lists' Jobs: at most free pods at once, each with a
// whole number of connections and the same fraction of the rate, so that
// every pod's limits together never exceed the host's (a pod's burst is
// its connections; the engine's is its connection limit). Without a
// shared backend this is the only way pods that know nothing of each
// other keep the promise: fewer pods, not fractions of connections.
func (b SMTPBudget) divide(job *batchv1.Job, free int) (pods, conns int, rate float64) {
	pods = min(int(ptr.Deref(job.Spec.Parallelism, 1)), free)
	conns = free / pods
	rate = b.Rate * float64(conns) / float64(b.Conns)
	job.Spec.Parallelism = ptr.To(int32(pods))
	c := &job.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvSMTPConns, Value: strconv.Itoa(conns)},
		corev1.EnvVar{Name: EnvSMTPRate, Value: strconv.FormatFloat(rate, 'g', -1, 64)})
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[JobSMTPConnsAnnotation] = strconv.Itoa(pods * conns)
	return pods, conns, rate
}

// budgetInUse sums the connections held by unfinished list Jobs other than
// list's.
func (e *JobExecutor) budgetInUse(ctx context.Context, list *listsv1.EmailList) (int, error) {
	r := e.Reader
	if r == nil {
		r = e.Client
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(e.Config.Namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "worker"}); err != nil {
		return 0, fmt.Errorf("list jobs: %w", err)
	}
	used := 0
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.Labels[JobListUIDLabel] == string(list.UID) || isJobFinished(j) {
			continue
		}
		n, _ := strconv.Atoi(j.Annotations[JobSMTPConnsAnnotation])
		used += n
	}
	return used, nil
}

// startDivided creates job with its part of the budget, or says the list
// must wait. Starts are serialised: each sees the Jobs created before it.
func (e *JobExecutor) startDivided(ctx context.Context, list *listsv1.EmailList, job *batchv1.Job) error {
	e.budgetMu.Lock()
	defer e.budgetMu.Unlock()
	b := e.Config.SMTPBudget
	used, err := e.budgetInUse(ctx, list)
	if err != nil {
		return err
	}
	free := b.Conns - used
	if free < 1 {
		return &BudgetWaitError{fmt.Sprintf("waiting for a share of each mail host's budget (%d connections, %g/s), all of it held by other lists' pods: without a fleet backend sharing it, lists take turns", b.Conns, b.Rate)}
	}
	pods, conns, rate := b.divide(job, free)
	msg := fmt.Sprintf("each mail host's budget (%d connections at once, %g new a second) is divided among the pods of the lists running: this list has %d of its connections, %d pod(s) at once with %d connection(s) and %.3g/s each",
		b.Conns, b.Rate, pods*conns, pods, conns, rate)
	if err := e.create(ctx, job); err != nil {
		return err
	}
	conditionsOf(&list.Status.Conditions, list.Generation, e.Clock).set(listsv1.ConditionHostLimits, metav1.ConditionTrue, ReasonHostLimitsDivided, msg)
	logf.FromContext(ctx).Info("per-host SMTP budget divided", "list", list.Namespace+"/"+list.Name, "pods", pods, "connsPerPod", conns, "ratePerPod", rate)
	return nil
}
