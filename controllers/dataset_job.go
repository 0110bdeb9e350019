package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// DatasetJobLoader imports a Dataset with `worker people-import` in a
// batch/v1 Job of one pod. See DatasetSummary for the worker's contract.
type DatasetJobLoader struct {
	Client client.Client
	// Events, when set, reads events uncached (see JobExecutor.Events).
	Events client.Reader
	Scheme *runtime.Scheme
	// Config shapes the pod like the list Jobs; its ExtraArgs are not used.
	Config JobConfig
	// PeopleURL is the people store the worker loads into.
	PeopleURL string
	// Clock dates a Job's age for the pod-start check (nil: the wall clock).
	Clock clock.PassiveClock
}

var _ DatasetLoader = (*DatasetJobLoader)(nil)

// DatasetJobName is the deterministic name of a Dataset's Job, unique per
// Dataset incarnation thanks to the UID hash.
func DatasetJobName(ds *listsv1.Dataset) string {
	h := sha256.Sum256([]byte(ds.UID))
	name := ds.Name
	if len(name) > 47 {
		name = name[:47]
	}
	return name + "-load-" + hex.EncodeToString(h[:])[:8]
}

// Start creates the Dataset's Job when it does not exist yet.
func (l *DatasetJobLoader) Start(ctx context.Context, ds *listsv1.Dataset, key string) error {
	if l.PeopleURL == "" {
		return errPeopleUnavailable
	}
	job, err := l.buildJob(ds, key)
	if err != nil {
		return err
	}
	if err := l.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create job %s: %w", job.Name, err)
	}
	return nil
}

func (l *DatasetJobLoader) buildJob(ds *listsv1.Dataset, key string) (*batchv1.Job, error) {
	labels := map[string]string{
		"app.kubernetes.io/name":      "emaildata",
		"app.kubernetes.io/component": "worker",
		"lists.emaildata.io/dataset":  truncateLabel(ds.Name),
	}
	args := []string{"people-import",
		"--key", key,
		"--summary-key", blobstore.DatasetKeys{UID: string(ds.UID)}.Summary(),
	}
	// A URL with a password never goes in a Job's spec (readable by more
	// people than Secrets): the worker then reads $BLOB_URL or $PEOPLE_URL
	// from Config.EnvFromSecret's Secret, as list workers do.
	for _, u := range []struct{ flag, url string }{{"--blob-url", l.Config.BlobURL}, {"--people-url", l.PeopleURL}} {
		if !cfgv1.HasPassword(u.url) {
			args = append(args, u.flag, u.url)
		}
	}
	if ds.Spec.ContinuesOnError() {
		args = append(args, "--continue-on-error")
	}
	if ds.Spec.MaxErrors > 0 {
		args = append(args, "--max-errors", strconv.Itoa(int(ds.Spec.MaxErrors)))
	}
	pod := workerPod(l.Config, args)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: DatasetJobName(ds), Namespace: ds.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			Completions:      ptr.To(int32(1)),
			Parallelism:      ptr.To(int32(1)),
			BackoffLimit:     ptr.To(int32(1)),
			PodFailurePolicy: workerFailurePolicy(batchv1.PodFailurePolicyActionFailJob),
			// The same guard as the lists' Jobs: an import that never ends fails.
			ActiveDeadlineSeconds: activeDeadlineSeconds(l.Config.ActiveDeadline),
			Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
	if err := controllerutil.SetControllerReference(ds, job, l.Scheme); err != nil {
		return nil, fmt.Errorf("own job: %w", err)
	}
	return job, nil
}

// Observe reads the Dataset's Job, and its pod while it runs.
func (l *DatasetJobLoader) Observe(ctx context.Context, ds *listsv1.Dataset) (Execution, error) {
	job, err := getJob(ctx, l.Client, ds.Namespace, DatasetJobName(ds))
	if err != nil || job == nil {
		return Execution{State: ExecNotStarted}, err
	}
	return observeJob(ctx, l.Client, l.Events, job, ds, clockNow(l.Clock))
}

// Release sets ttlSecondsAfterFinished, now that status holds the outcome;
// the Job of a Dataset that failed while it ran (its pod could not start)
// is deleted.
func (l *DatasetJobLoader) Release(ctx context.Context, ds *listsv1.Dataset) error {
	job, err := getJob(ctx, l.Client, ds.Namespace, DatasetJobName(ds))
	if err != nil || job == nil {
		return err
	}
	if ds.Status.Phase == listsv1.DatasetFailed {
		if err := stopBlockedJob(ctx, l.Client, job, ds); err != nil {
			return err
		}
	}
	return setJobTTL(ctx, l.Client, job, ds, l.Config.TTLSecondsAfterFinished)
}
