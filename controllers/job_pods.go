package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Job that fails says only that an index failed ("Job has failed
// indexes"). A worker that met bad input or an error writes its own summary,
// which the list's condition quotes; a worker the kernel killed for memory
// writes nothing, and only its pod says so. The executor then reads the
// failed pods of the Job, once, when the Job has failed.

// ReasonOOMKilled is the terminated reason of a container the kernel killed
// for going over its memory limit.
const ReasonOOMKilled = "OOMKilled"

// oomKilledShards describes the shards of job whose worker was OOMKilled,
// for the list's message, or "" when none was. It reads the pods with an
// uncached reader: one list, only when a Job has failed.
func oomKilledShards(ctx context.Context, r client.Reader, job *batchv1.Job) (string, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return "", fmt.Errorf("list the pods of job %s: %w", job.Name, err)
	}
	type shard struct {
		index, limit string
		kills        int
	}
	byIndex := map[string]*shard{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodFailed || !oomKilled(p) {
			continue
		}
		idx := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		s := byIndex[idx]
		if s == nil {
			s = &shard{index: idx, limit: workerMemoryLimit(p)}
			byIndex[idx] = s
		}
		s.kills++
	}
	if len(byIndex) == 0 {
		return "", nil
	}
	shards := make([]*shard, 0, len(byIndex))
	for _, s := range byIndex {
		shards = append(shards, s)
	}
	sort.Slice(shards, func(i, j int) bool { return lessIndex(shards[i].index, shards[j].index) })
	parts := make([]string, 0, len(shards))
	for _, s := range shards {
		why := "over its memory limit of " + s.limit
		if s.limit == "" {
			why = "the node ran out of memory"
		}
		parts = append(parts, fmt.Sprintf("shard %s: worker %s (exit code 137) %d time(s), %s", s.index, ReasonOOMKilled, s.kills, why))
	}
	return strings.Join(parts, "; ") + "; raise the workers' memory limit (--worker-memory)", nil
}

// oomKilled reports whether the pod's worker container was OOM-killed.
func oomKilled(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == WorkerContainer && cs.State.Terminated != nil && cs.State.Terminated.Reason == ReasonOOMKilled {
			return true
		}
	}
	return false
}

// workerMemoryLimit is the worker container's memory limit, "" when none.
func workerMemoryLimit(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == WorkerContainer {
			return q.String()
		}
	}
	return ""
}

// lessIndex orders completion indexes numerically.
func lessIndex(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
