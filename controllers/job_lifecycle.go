package controllers

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// Stopper is an executor that can stop a list's run, so that nothing writes
// under the list's prefix once the finalizer deletes it.
type Stopper interface {
	// Stop asks the run to stop and reports whether nothing runs any more;
	// the caller looks again later while it is false.
	Stop(ctx context.Context, list *listsv1.EmailList) (bool, error)
}

var _ Stopper = (*JobExecutor)(nil)

// Stop deletes the list's Job with foreground propagation: the garbage
// collector deletes its pods, the kubelet stops their containers, and the
// Job goes only once they are all gone. Stopped means the Job is gone.
func (e *JobExecutor) Stop(ctx context.Context, list *listsv1.EmailList) (bool, error) {
	job, err := getJob(ctx, e.Client, e.Config.Namespace, JobName(list))
	if err != nil {
		return false, err
	}
	if job == nil || !jobBelongsTo(job, list) {
		return true, nil
	}
	if job.DeletionTimestamp.IsZero() {
		err := e.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &job.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("delete job %s: %w", job.Name, err)
		}
	}
	return false, nil
}

// jobToList maps a list Job to its list, from the annotation the executor
// sets (the Job lives in the workers' namespace, without an owner).
func jobToList(_ context.Context, o client.Object) []reconcile.Request {
	job, ok := o.(*batchv1.Job)
	if !ok || job.Labels[JobListUIDLabel] == "" {
		return nil
	}
	ns, name, ok := strings.Cut(job.Annotations[JobListAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
