package testnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/emaildata/emaildata/internal/platform/logging"
)

var everything = labels.Everything()

// sync moves one pod along, the way the kubelet's pod worker does: start
// it, stop it when it is deleted, and remove it once it has terminated.
func (n *Node) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		n.forgetGone(ns, name)
		return nil
	}
	if err != nil {
		return err
	}
	n.mu.Lock()
	p := n.runs[pod.UID]
	n.mu.Unlock()

	switch {
	case pod.DeletionTimestamp != nil:
		return n.syncDeleted(ctx, pod, p)
	case isTerminal(pod):
		return nil
	case p != nil:
		return nil // running; its exit is reported by the process's waiter
	case pod.Status.Phase == corev1.PodRunning:
		// Running before this node (re)started: the process is gone, as
		// after a node reboot. The kubelet reports such containers so.
		return n.fail(ctx, pod, 137, "ContainerStatusUnknown", "The container could not be located when the node restarted")
	case n.held(pod):
		return n.waiting(ctx, pod, "ContainerCreating", "held by the test node (as a slow image pull)")
	}
	return n.start(ctx, pod)
}

// syncDeleted stops a deleted pod's process (SIGTERM, then SIGKILL after
// the grace period), records its end, and removes the pod.
func (n *Node) syncDeleted(ctx context.Context, pod *corev1.Pod, p *process) error {
	if p != nil && !p.exited() {
		grace := 30 * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		p.terminate(grace)
		return nil // the waiter enqueues the pod again when the process ends
	}
	if p != nil {
		if err := n.reportExit(ctx, pod, p); err != nil {
			return err
		}
	} else if !isTerminal(pod) {
		if err := n.fail(ctx, pod, 137, "ContainerStatusUnknown", "The pod was deleted before its container started"); err != nil {
			return err
		}
	}
	n.mu.Lock()
	delete(n.runs, pod.UID)
	delete(n.starts, pod.UID)
	n.mu.Unlock()
	return n.finalDelete(ctx, pod)
}

// forgetGone kills the process of a pod removed from the API server
// without going through graceful deletion (a force delete).
func (n *Node) forgetGone(ns, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for uid, p := range n.runs {
		if p.namespace == ns && p.name == name {
			p.kill("")
			delete(n.runs, uid)
		}
	}
	for uid, f := range n.starts {
		if f.key == ns+"/"+name {
			delete(n.starts, uid)
		}
	}
}

// start runs the pod's container as a process and reports it Running. A
// container that cannot start waits with the kubelet's reason and the error
// as message, and is tried again with backoff (see inBackoff).
func (n *Node) start(ctx context.Context, pod *corev1.Pod) error {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
		return n.fail(ctx, pod, 1, "UnsupportedByTestNode", "testnode runs pods of exactly one container and no init containers")
	}
	key := pod.Namespace + "/" + pod.Name
	if f, ok := n.backingOff(pod.UID); ok {
		return n.inBackoff(ctx, pod, key, f)
	}
	spec, reason, err := n.processSpec(ctx, pod)
	var p *process
	if err == nil {
		reason = reasonCreateContainerError
		p, err = startProcess(spec)
	}
	if err != nil {
		n.queue.AddAfter(key, n.startFailed(pod.UID, key, reason, err.Error()))
		return n.waiting(ctx, pod, reason, err.Error())
	}
	n.forgetStart(pod.UID)
	n.frozenAtStart(pod, p)
	n.watchYoung(p)
	n.mu.Lock()
	n.runs[pod.UID] = p
	n.mu.Unlock()
	n.log.Debug("started", "pod", pod.Namespace+"/"+pod.Name, "pid", p.pid)
	go n.await(pod.Namespace+"/"+pod.Name, p)

	c := pod.Spec.Containers[0]
	return n.statusUpdate(ctx, pod.Namespace, pod.Name, pod.UID, func(pod *corev1.Pod) {
		if isTerminal(pod) {
			return
		}
		started := metav1.NewTime(p.started)
		pod.Status.Phase = corev1.PodRunning
		setIPs(pod)
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = &started
		}
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			setCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: "testnode://" + spec.path, ContainerID: p.containerID(),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}}
	})
}

// await reports the process's end and looks at the pod again.
func (n *Node) await(key string, p *process) {
	<-p.done
	n.logEnd(key, p)
	n.mu.Lock()
	ctx := n.ctx
	n.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := n.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil && pod.UID == p.uid {
		if err := n.reportExit(ctx, pod, p); err != nil {
			n.log.Warn("report exit", "pod", key, logging.KeyError, err)
		}
	}
	n.queue.Add(key)
}

// reportExit writes the terminated container status of an ended process.
func (n *Node) reportExit(ctx context.Context, pod *corev1.Pod, p *process) error {
	code, reason, message, evicted := p.outcome()
	return n.statusUpdate(ctx, pod.Namespace, pod.Name, pod.UID, func(pod *corev1.Pod) {
		if isTerminal(pod) {
			return
		}
		c := pod.Spec.Containers[0]
		pod.Status.Phase = corev1.PodFailed
		if code == 0 {
			pod.Status.Phase = corev1.PodSucceeded
		}
		if evicted != "" {
			pod.Status.Reason, pod.Status.Message = "Evicted", evicted
			setCondition(pod, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "TerminationByKubelet", Message: evicted})
		}
		notReady(pod)
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: "testnode://" + p.path, ContainerID: p.containerID(), Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: message, ContainerID: p.containerID(),
				StartedAt: metav1.NewTime(p.started), FinishedAt: metav1.NewTime(p.finished),
			}},
		}}
	})
}

// fail ends a pod that has no process: a container the node lost or could
// not run.
func (n *Node) fail(ctx context.Context, pod *corev1.Pod, code int32, reason, message string) error {
	return n.statusUpdate(ctx, pod.Namespace, pod.Name, pod.UID, func(pod *corev1.Pod) {
		if isTerminal(pod) {
			return
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Message = message
		notReady(pod)
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Started: ptr.To(false),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: code, Reason: reason, Message: message, FinishedAt: now}},
			})
		}
	})
}

// waiting reports a pod whose container cannot start (yet).
func (n *Node) waiting(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	if cs := pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil &&
		cs[0].State.Waiting.Reason == reason && cs[0].State.Waiting.Message == message {
		return nil
	}
	return n.statusUpdate(ctx, pod.Namespace, pod.Name, pod.UID, func(pod *corev1.Pod) {
		if isTerminal(pod) {
			return
		}
		pod.Status.Phase = corev1.PodPending
		setIPs(pod)
		if pod.Status.StartTime == nil {
			pod.Status.StartTime = ptr.To(metav1.Now())
		}
		setCondition(pod, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
		for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
			setCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
				Message: fmt.Sprintf("containers with unready status: [%s]", pod.Spec.Containers[0].Name)})
		}
		c := pod.Spec.Containers[0]
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	})
}

func notReady(pod *corev1.Pod) {
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		setCondition(pod, corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "PodCompleted"})
	}
}

func setIPs(pod *corev1.Pod) {
	pod.Status.HostIP, pod.Status.PodIP = "127.0.0.1", "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
}

// Kill ends a running pod's process with SIGKILL. With oom the container
// terminates as the kernel's OOM killer leaves it (reason OOMKilled);
// otherwise as any SIGKILL does (reason Error), a node loss say. Both exit
// with code 137. Kill waits for the pod's status to say so.
func (n *Node) Kill(ctx context.Context, namespace, name string, oom bool) error {
	p, err := n.running(namespace, name)
	if err != nil {
		return err
	}
	reason := "Error"
	if oom {
		reason = reasonOOMKilled
	}
	p.kill(reason)
	return n.waitTerminal(ctx, namespace, name, p)
}

// Evict does what node-pressure eviction does: it marks the pod with the
// DisruptionTarget condition (reason TerminationByKubelet), stops its
// process (SIGTERM, then SIGKILL after the pod's grace period) and reports
// the pod Failed with reason Evicted. It waits for that status.
func (n *Node) Evict(ctx context.Context, namespace, name, message string) error {
	p, err := n.running(namespace, name)
	if err != nil {
		return err
	}
	pod, err := n.pods.Pods(namespace).Get(name)
	if err != nil {
		return err
	}
	grace := 30 * time.Second
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	p.evict(message, grace)
	return n.waitTerminal(ctx, namespace, name, p)
}

// PID returns the process id of a running pod.
func (n *Node) PID(namespace, name string) (int, bool) {
	p, err := n.running(namespace, name)
	if err != nil {
		return 0, false
	}
	return p.pid, true
}

func (n *Node) running(namespace, name string) (*process, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.runs {
		if p.namespace == namespace && p.name == name && !p.exited() {
			return p, nil
		}
	}
	return nil, fmt.Errorf("testnode: no process runs for pod %s/%s", namespace, name)
}

func (n *Node) waitTerminal(ctx context.Context, namespace, name string, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("testnode: pod %s/%s did not stop: %w", namespace, name, ctx.Err())
	}
	for {
		pod, err := n.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (pod.UID != p.uid || isTerminal(pod))) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testnode: pod %s/%s did not report its end: %w", namespace, name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) killAll() {
	n.mu.Lock()
	ps := make([]*process, 0, len(n.runs))
	for _, p := range n.runs {
		ps = append(ps, p)
	}
	n.mu.Unlock()
	for _, p := range ps {
		p.kill("")
		<-p.done
	}
}
