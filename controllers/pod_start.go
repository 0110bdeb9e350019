package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// A worker pod that cannot start (an image no node can pull, a binary the
// image lacks, requests no node can satisfy) leaves its Job running and
// Pending forever: the Job controller counts no failure. These helpers find
// such a pod, say so on the list or Dataset (the PodsBlocked condition and
// a Warning event, with the kubelet's or the scheduler's reason and
// message), and fail the run once it has lasted the grace period.

// DefaultPodStartGrace is how long a worker pod may be unable to start
// before its run fails.
const DefaultPodStartGrace = 2 * time.Minute

// noPodsAfter is how long a Job may have no pod at all before that counts
// as blocked: the Job controller creates them within a second unless it is
// refused (a quota, an admission webhook, a missing service account).
const noPodsAfter = 15 * time.Second

// ReasonPodsNotCreated: the Job controller could create no pod.
const ReasonPodsNotCreated = "PodsNotCreated"

// BlockedPod is a pod of a run that cannot start.
type BlockedPod struct {
	// Pod is the pod's name; empty when the Job has no pod at all.
	Pod string
	// Index is the pod's completion index, the list's shard ("" for Jobs
	// that are not Indexed).
	Index string
	// Reason and Message are the kubelet's (the container's waiting
	// state) or the scheduler's (the PodScheduled condition).
	Reason, Message string
}

// blocked says what cannot start; failed, what did not within grace.
func (b *BlockedPod) blocked() string {
	if b.Pod == "" {
		return "no worker pod can be created"
	}
	return b.pod() + " cannot start"
}

func (b *BlockedPod) failed(grace time.Duration) string {
	if b.Pod == "" {
		return "no worker pod was created within " + grace.String()
	}
	return b.pod() + " did not start within " + grace.String()
}

func (b *BlockedPod) pod() string {
	if b.Index != "" {
		return fmt.Sprintf("pod %s (shard %s)", b.Pod, b.Index)
	}
	return "pod " + b.Pod
}

// startFailureReasons are the waiting reasons of containers that cannot
// start without someone acting: the kubelet keeps retrying them, the Job
// controller sees nothing. (ContainerCreating and PodInitializing are
// normal steps, however long a large image takes to pull.)
var startFailureReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"RegistryUnavailable": true, "SignatureValidationFailed": true,
	"CreateContainerError": true, "CreateContainerConfigError": true, "RunContainerError": true,
	"PreStartHookError": true,
}

// podStartProblem says why a Pending pod cannot start, if it cannot.
func podStartProblem(pod *corev1.Pod) (reason, message string, ok bool) {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return "", "", false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Reason, c.Message, true
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && startFailureReasons[w.Reason] {
			return w.Reason, fmt.Sprintf("container %s: %s", cs.Name, w.Message), true
		}
	}
	return "", "", false
}

// blockedPod returns the oldest pod of a running Job that cannot start,
// reading pods from pods (the manager's cache). A Job without any pod
// noPodsAfter after its creation is blocked too, with the Job controller's
// latest FailedCreate event as message when events (an uncached reader)
// can read it.
func blockedPod(ctx context.Context, pods, events client.Reader, job *batchv1.Job, now time.Time) (*BlockedPod, error) {
	var list corev1.PodList
	if err := pods.List(ctx, &list, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("list pods of job %s: %w", job.Name, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if !items[i].CreationTimestamp.Equal(&items[j].CreationTimestamp) {
			return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp)
		}
		return items[i].Name < items[j].Name
	})
	for i := range items {
		if reason, msg, ok := podStartProblem(&items[i]); ok {
			return &BlockedPod{Pod: items[i].Name, Index: items[i].Labels[batchv1.JobCompletionIndexAnnotation], Reason: reason, Message: msg}, nil
		}
	}
	st := job.Status
	if len(items) > 0 || st.Active+st.Succeeded+st.Failed > 0 || ptrTrue(job.Spec.Suspend) ||
		now.Sub(job.CreationTimestamp.Time) < noPodsAfter {
		return nil, nil
	}
	msg := fmt.Sprintf("job %s/%s has no pod (kubectl describe job -n %s %s says why)", job.Namespace, job.Name, job.Namespace, job.Name)
	if e := lastFailedCreate(ctx, events, job); e != "" {
		msg = fmt.Sprintf("job %s/%s: %s", job.Namespace, job.Name, e)
	}
	return &BlockedPod{Reason: ReasonPodsNotCreated, Message: msg}, nil
}

// lastFailedCreate is the message of the Job controller's latest
// FailedCreate event about job ("" when there is none or it cannot be read).
func lastFailedCreate(ctx context.Context, events client.Reader, job *batchv1.Job) string {
	if events == nil {
		return ""
	}
	var evs corev1.EventList
	sel := fields.Set{"involvedObject.uid": string(job.UID), "reason": "FailedCreate"}.AsSelector()
	if err := events.List(ctx, &evs, client.InNamespace(job.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range evs.Items {
		if e := &evs.Items[i]; last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return last.Message
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

func podStartGrace(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultPodStartGrace
	}
	return d
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// startWatch is what trackBlocked found.
type startWatch struct {
	// Warn: a pod became blocked, or blocked for another reason: a
	// Warning event says so.
	Warn bool
	// Cleared: the condition was there and nothing is blocked any more.
	Cleared bool
	// Expired: blocked for the whole grace period; Message says so.
	Expired bool
	// Message for the condition, or for the failure when Expired.
	Message string
}

// trackBlocked keeps the PodsBlocked condition in step with b (nil: nothing
// is blocked). The grace runs from the condition's lastTransitionTime, the
// first moment a pod was seen blocked, and carries over from one blocked
// pod or reason to the next.
func trackBlocked(conds *[]metav1.Condition, gen int64, b *BlockedPod, now time.Time, grace time.Duration) startWatch {
	old := meta.FindStatusCondition(*conds, listsv1.ConditionPodsBlocked)
	if b == nil {
		if old == nil {
			return startWatch{}
		}
		meta.RemoveStatusCondition(conds, listsv1.ConditionPodsBlocked)
		return startWatch{Cleared: true}
	}
	since := now
	if old != nil && old.Status == metav1.ConditionTrue {
		since = old.LastTransitionTime.Time
	}
	deadline := since.Add(grace)
	w := startWatch{Warn: old == nil || reasonFamily(old.Reason) != reasonFamily(b.Reason)}
	if now.Before(deadline) {
		w.Message = fmt.Sprintf("%s: %s (the run fails unless it starts by %s)",
			b.blocked(), b.Message, deadline.UTC().Format(time.RFC3339))
	} else {
		w.Expired, w.Warn = true, false // the failure warns
		w.Message = fmt.Sprintf("%s: %s", b.failed(grace), b.Message)
	}
	w.Message = truncate(w.Message, maxConditionMessage)
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: listsv1.ConditionPodsBlocked, Status: metav1.ConditionTrue, Reason: b.Reason, Message: w.Message,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(since),
	})
	return w
}

// maxConditionMessage bounds the pod's message in conditions and events.
const maxConditionMessage = 2048

// reasonFamily folds the kubelet's alternating pull reasons into one, so
// that a pull retried with backoff warns once, not at every try.
func reasonFamily(reason string) string {
	if reason == "ImagePullBackOff" {
		return "ErrImagePull"
	}
	return reason
}

// stopBlockedJob deletes a Job its owner's outcome no longer needs: one
// still running (no terminal or target condition) when the owner has
// failed, its pods unable to start. Finished Jobs stay for their TTL.
func stopBlockedJob(ctx context.Context, c client.Client, job *batchv1.Job, owner metav1.Object) error {
	if !job.DeletionTimestamp.IsZero() || jobExecution(job, owner).State != ExecRunning {
		return nil
	}
	err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID})
	if err != nil && client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete job %s: %w", job.Name, err)
	}
	return nil
}
