package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// The grace runs from the first time a pod is seen blocked, carries over
// the kubelet's alternating pull reasons (warning once), and the condition
// goes when the pod starts.
func TestTrackBlocked(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	grace := 2 * time.Minute
	pull := &BlockedPod{Pod: "p", Index: "0", Reason: "ErrImagePull", Message: "container worker: no such image"}
	backoff := &BlockedPod{Pod: "p", Index: "0", Reason: "ImagePullBackOff", Message: "container worker: Back-off pulling image"}
	unsched := &BlockedPod{Pod: "q", Index: "1", Reason: "Unschedulable", Message: "0/3 nodes are available"}
	var conds []metav1.Condition
	type step struct {
		at       time.Duration
		b        *BlockedPod
		want     startWatch // Message is checked by prefix
		condWant string     // the condition's reason after the step, "" for none
	}
	for i, s := range []step{
		{0, nil, startWatch{}, ""},
		{time.Second, pull, startWatch{Warn: true, Message: "pod p (shard 0) cannot start: container worker: no such image (the run fails unless it starts by 2026-01-02T03:06:06Z)"}, "ErrImagePull"},
		{10 * time.Second, backoff, startWatch{Message: "pod p (shard 0) cannot start: container worker: Back-off"}, "ImagePullBackOff"},
		{20 * time.Second, unsched, startWatch{Warn: true, Message: "pod q (shard 1) cannot start: 0/3 nodes are available (the run fails unless it starts by 2026-01-02T03:06:06Z)"}, "Unschedulable"},
		{30 * time.Second, nil, startWatch{Cleared: true}, ""},
		{40 * time.Second, nil, startWatch{}, ""},
		// Blocked again: a new grace.
		{50 * time.Second, pull, startWatch{Warn: true, Message: "pod p (shard 0) cannot start: container worker: no such image (the run fails unless it starts by 2026-01-02T03:06:55Z)"}, "ErrImagePull"},
		{50*time.Second + grace - time.Second, backoff, startWatch{}, "ImagePullBackOff"},
		{50*time.Second + grace, backoff, startWatch{Expired: true, Message: "pod p (shard 0) did not start within 2m0s: container worker: Back-off pulling image"}, "ImagePullBackOff"},
	} {
		got := trackBlocked(&conds, 7, s.b, t0.Add(s.at), grace)
		if got.Warn != s.want.Warn || got.Cleared != s.want.Cleared || got.Expired != s.want.Expired ||
			!strings.HasPrefix(got.Message, s.want.Message) {
			t.Errorf("step %d: %+v, want %+v", i, got, s.want)
		}
		c := meta.FindStatusCondition(conds, listsv1.ConditionPodsBlocked)
		switch {
		case s.condWant == "" && c != nil:
			t.Errorf("step %d: condition %+v, want none", i, c)
		case s.condWant != "" && (c == nil || c.Reason != s.condWant || c.ObservedGeneration != 7 || c.Message != got.Message):
			t.Errorf("step %d: condition %+v, want reason %s with the message", i, c, s.condWant)
		}
	}
}

func TestPodStartProblem(t *testing.T) {
	waiting := func(reason, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "worker",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
	}
	for name, c := range map[string]struct {
		status         corev1.PodStatus
		deleting       bool
		reason, prefix string
	}{
		"image":          {status: waiting("ImagePullBackOff", "Back-off pulling image"), reason: "ImagePullBackOff", prefix: "container worker: Back-off"},
		"binary":         {status: waiting("CreateContainerError", `exec: "/worker": stat`), reason: "CreateContainerError", prefix: "container worker: exec"},
		"config":         {status: waiting("CreateContainerConfigError", `secret "s3" not found`), reason: "CreateContainerConfigError", prefix: "container worker: secret"},
		"creating":       {status: waiting("ContainerCreating", "")},
		"no status yet":  {status: corev1.PodStatus{Phase: corev1.PodPending}},
		"running":        {status: corev1.PodStatus{Phase: corev1.PodRunning}},
		"being deleted":  {status: waiting("ErrImagePull", "x"), deleting: true},
		"failed pod":     {status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: waiting("ErrImagePull", "x").ContainerStatuses}},
		"gated":          {status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}}},
		"unschedulable":  {status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes"}}}, reason: "Unschedulable", prefix: "0/1 nodes"},
		"init container": {status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: waiting("ErrImagePull", "nope").ContainerStatuses}, reason: "ErrImagePull", prefix: "container worker: nope"},
	} {
		pod := &corev1.Pod{Status: c.status}
		if c.deleting {
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		reason, msg, ok := podStartProblem(pod)
		if ok != (c.reason != "") || reason != c.reason || !strings.HasPrefix(msg, c.prefix) {
			t.Errorf("%s: %q %q %v, want %q %q...", name, reason, msg, ok, c.reason, c.prefix)
		}
	}
}
