package controllers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// ExitBadInput is the worker's exit code for a problem with the list itself;
// the Job's podFailurePolicy fails the index at once instead of retrying.
const ExitBadInput = pipeline.ExitBadInput

// WorkerContainer is the name of the worker container in Job pods.
const WorkerContainer = "worker"

// A list's Job runs in the workers' namespace, not the list's, so it cannot
// have the list as its owner: these say whose it is.
const (
	// JobListUIDLabel holds the UID of the list a Job runs.
	JobListUIDLabel = "lists.emaildata.io/list-uid"
	// JobListNamespaceLabel holds the namespace of that list.
	JobListNamespaceLabel = "lists.emaildata.io/list-namespace"
	// JobListAnnotation holds "<namespace>/<name>" of that list.
	JobListAnnotation = "lists.emaildata.io/list"
)

// JobConfig shapes the worker Jobs.
type JobConfig struct {
	// Namespace the list Jobs run in: the operator's, where the worker
	// service account, the store's credentials and PVC live, so no list's
	// namespace ever holds (or can read) access to the shared store.
	Namespace string
	// Image of the worker (the same image as the manager).
	Image string
	// ImagePullPolicy of the worker container; IfNotPresent when empty.
	// The chart passes its image.pullPolicy, so the workers are pulled as
	// the manager and the API are.
	ImagePullPolicy corev1.PullPolicy
	// BlobURL is the store the workers open when WorkerConfig is empty
	// (otherwise the file's store.url, or $BLOB_URL from EnvFromSecret).
	BlobURL string
	// Parallelism caps pods running at once for one list.
	Parallelism int32
	// BackoffLimitPerIndex retries a failed index this many times.
	BackoffLimitPerIndex int32
	// TTLSecondsAfterFinished is set once the outcome is in status.
	TTLSecondsAfterFinished int32
	// ActiveDeadline bounds how long a worker Job (a list's, or a
	// Dataset's import) may run from its start: past it the Job controller
	// stops its pods and fails the Job (activeDeadlineSeconds), and the list
	// or Dataset fails with the reason DeadlineExceeded. It is a guard
	// against a run that never ends (a mail host that keeps every
	// connection waiting, pods that keep failing), not a time budget: set it
	// above the longest run you expect. Zero or negative: no deadline
	// (operator.Options defaults it to DefaultWorkerActiveDeadline).
	ActiveDeadline time.Duration
	// ServiceAccountName of worker pods; it needs no API permissions.
	ServiceAccountName string
	// EnvFromSecret, when set, feeds store credentials to the workers.
	EnvFromSecret string
	// HistoryKeySecret, when set, names the Secret whose HistoryKeyField
	// becomes the list workers' $HISTORY_KEY: the verification history's
	// key, which every process must share (evhistory.LoadSecret). The
	// manager sets both from the installation secret
	// (installsecret.HistoryKey) when its workers open a history, once it
	// has read the Secret, so the kubelet finds it.
	HistoryKeySecret string
	// HistoryKeyField is the field holding that key: installsecret.Field
	// when empty (or the LegacyField of a Secret made before).
	HistoryKeyField string
	// StorePVC, when set, is mounted at StoreMountPath for file:// stores.
	StorePVC       string
	StoreMountPath string
	// Resources of the worker container.
	Resources corev1.ResourceRequirements
	// NodeSelector, Tolerations and PriorityClassName place worker pods.
	NodeSelector      map[string]string
	Tolerations       []corev1.Toleration
	PriorityClassName string
	// ExtraArgs are passed to the worker after the shard arguments.
	ExtraArgs []string
	// SMTPBudget is each mail host's budget, which email_validation Jobs
	// divide among their pods unless a fleet backend shares it.
	SMTPBudget SMTPBudget
	// WorkerConfig is the list workers' configuration file (kind
	// Configuration, without secrets): the executor keeps it in a
	// ConfigMap named by its content and mounts it, and the workers get
	// no settings as arguments (ExtraArgs still follow). When empty, the
	// configuration's defaults with BlobURL as the store (workerConfig).
	WorkerConfig []byte
	// FleetRequired makes by-reference workers refuse to start without
	// the fleet backend (see wiring.FleetConfig.Required).
	FleetRequired bool
}

// JobExecutor runs each list as a batch/v1 Indexed Job, one index a shard,
// in the workers' namespace (JobConfig.Namespace).
type JobExecutor struct {
	Client client.Client
	// Events, when set, reads events uncached: why the Job controller could
	// create no pod (see blockedPod).
	Events client.Reader
	Config JobConfig
	// Reader reads live, uncached (the API reader): Jobs, so that each start
	// sees the budget the ones before it took (Client when nil), and the
	// pods of a failed Job, to say why they died (nil: not read, and a
	// failure says only what the Job says).
	Reader client.Reader
	// Clock dates a Job's age for the pod-start check (nil: the wall
	// clock), so that tests set it.
	Clock clock.PassiveClock

	budgetMu sync.Mutex
}

var _ Executor = (*JobExecutor)(nil)

// JobName is the deterministic name of a list's Job: readable, and unique
// per list incarnation thanks to the UID hash.
func JobName(list *listsv1.EmailList) string {
	h := sha256.Sum256([]byte(list.UID))
	suffix := hex.EncodeToString(h[:])[:8]
	name := list.Name
	if len(name) > 52 {
		name = name[:52]
	}
	return name + "-" + suffix
}

// Start creates the list's Job when it does not exist yet.
func (e *JobExecutor) Start(ctx context.Context, list *listsv1.EmailList, shards int) error {
	job, err := e.buildJob(list, shards)
	if err != nil {
		return err
	}
	if e.Config.SMTPBudget.divides(list) {
		existing, err := getJob(ctx, e.Client, job.Namespace, job.Name)
		if err != nil {
			return err
		}
		if existing != nil { // already started (with its part of the budget)
			return e.ensureWorkerConfig(ctx, existing)
		}
		if err := e.startDivided(ctx, list, job); err != nil {
			return err
		}
		return e.ensureWorkerConfig(ctx, job)
	}
	if err := e.create(ctx, job); err != nil {
		return err
	}
	if err := e.ensureWorkerConfig(ctx, job); err != nil {
		return err
	}
	if e.Config.SMTPBudget.Shared && list.Spec.Service == listsv1.ServiceEmailValidation {
		conditionsOf(&list.Status.Conditions, list.Generation, e.Clock).set(listsv1.ConditionHostLimits, metav1.ConditionTrue, ReasonHostLimitsShared,
			"each mail host's limits hold for the whole fleet (every pod of every list, every API replica), counted per egress, through the fleet backend")
	}
	return nil
}

func (e *JobExecutor) create(ctx context.Context, job *batchv1.Job) error {
	err := e.Client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create job %s: %w", job.Name, err)
	}
	return nil
}

func (e *JobExecutor) buildJob(list *listsv1.EmailList, shards int) (*batchv1.Job, error) {
	n := int32(shards)
	parallelism := n
	if e.Config.Parallelism > 0 && parallelism > e.Config.Parallelism {
		parallelism = e.Config.Parallelism
	}
	if e.Config.Namespace == "" {
		return nil, fmt.Errorf("the job executor has no worker namespace")
	}
	labels := map[string]string{
		"app.kubernetes.io/name":      "emaildata",
		"app.kubernetes.io/component": "worker",
		"lists.emaildata.io/list":     truncateLabel(list.Name),
		JobListNamespaceLabel:         list.Namespace,
		JobListUIDLabel:               string(list.UID),
	}
	// The worker reads every setting from the mounted configuration, the
	// per-list values from its environment: its arguments are the command,
	// --config, the list and what executor.jobs.extraArgs adds.
	args := append([]string{"shard", "--config=" + WorkerConfigDir + "/" + WorkerConfigFile, "--list-uid=" + string(list.UID)}, e.Config.ExtraArgs...)
	pod := workerPod(e.Config, args)
	if err := byReference(e.Config, JobName(list), &pod, shards); err != nil {
		return nil, err
	}
	if k := historyKeyEnv(e.Config); k != nil {
		pod.Containers[0].Env = append(pod.Containers[0].Env, *k)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(list), Namespace: e.Config.Namespace, Labels: labels,
			Annotations: map[string]string{JobListAnnotation: list.Namespace + "/" + list.Name},
		},
		Spec: batchv1.JobSpec{
			CompletionMode:       ptr.To(batchv1.IndexedCompletion),
			Completions:          ptr.To(n),
			Parallelism:          ptr.To(parallelism),
			BackoffLimitPerIndex: ptr.To(e.Config.BackoffLimitPerIndex),
			// One index failing for good fails the list: no partial results.
			MaxFailedIndexes:      ptr.To(int32(0)),
			PodFailurePolicy:      workerFailurePolicy(batchv1.PodFailurePolicyActionFailIndex),
			ActiveDeadlineSeconds: activeDeadlineSeconds(e.Config.ActiveDeadline),
			Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
	return job, nil
}

// historyKeyEnv is a list worker's HISTORY_KEY from cfg's Secret (nil:
// none named, the workers open no history), by reference: the key is
// never in the Job's spec or args. Only list Jobs get it: they run in the
// workers' namespace, where the Secret is; Dataset Jobs run in their
// Dataset's and never open the history. Not optional: the manager read the
// Secret before it made any Job, and should it be deleted since, the
// kubelet holds the pod until it is back (a pod that cannot start fails
// its list after --pod-start-grace, saying why) rather than start a
// worker without the key.
func historyKeyEnv(cfg JobConfig) *corev1.EnvVar {
	if cfg.HistoryKeySecret == "" {
		return nil
	}
	return &corev1.EnvVar{Name: evhistory.SecretEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cfg.HistoryKeySecret},
		Key:                  cmp.Or(cfg.HistoryKeyField, installsecret.Field), Optional: ptr.To(false)}}}
}

// workerPod is the pod of a worker Job running args, shaped by cfg.
func workerPod(cfg JobConfig, args []string) corev1.PodSpec {
	container := corev1.Container{
		Name:            WorkerContainer,
		Image:           cfg.Image,
		ImagePullPolicy: pullPolicy(cfg.ImagePullPolicy),
		Command:         []string{"/worker"},
		Args:            args,
		Resources:       cfg.Resources,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if cfg.EnvFromSecret != "" {
		container.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cfg.EnvFromSecret}}}}
	}
	pod := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           cfg.ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers:        []corev1.Container{container},
		NodeSelector:      cfg.NodeSelector,
		Tolerations:       cfg.Tolerations,
		PriorityClassName: cfg.PriorityClassName,
	}
	if cfg.StorePVC != "" {
		pod.Volumes = []corev1.Volume{{Name: "store", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cfg.StorePVC}}}}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "store", MountPath: cfg.StoreMountPath}}
	}
	return pod
}

// DefaultWorkerActiveDeadline is the manager's default JobConfig.ActiveDeadline:
// a day. A Job still running after it is taken to be stuck; where a list's
// run may take longer (a very large list, a tight per-host politeness),
// raise it with --worker-active-deadline.
const DefaultWorkerActiveDeadline = 24 * time.Hour

// activeDeadlineSeconds is a Job's activeDeadlineSeconds for d: whole
// seconds, rounded up (the field's unit), nil for no deadline.
func activeDeadlineSeconds(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	return ptr.To(int64(math.Ceil(d.Seconds())))
}

func pullPolicy(p corev1.PullPolicy) corev1.PullPolicy {
	if p == "" {
		return corev1.PullIfNotPresent
	}
	return p
}

// workerFailurePolicy applies onBadInput at once when the worker exits with
// ExitBadInput (retrying cannot fix the input), and ignores evictions and
// preemptions, which are not the worker's fault.
func workerFailurePolicy(onBadInput batchv1.PodFailurePolicyAction) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action: onBadInput,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(WorkerContainer),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        []int32{ExitBadInput},
			},
		},
		{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		},
	}}
}

// Observe reads the list's Job, and its pods while it runs.
func (e *JobExecutor) Observe(ctx context.Context, list *listsv1.EmailList) (Execution, error) {
	job, err := getJob(ctx, e.Client, e.Config.Namespace, JobName(list))
	if err != nil || job == nil {
		return Execution{State: ExecNotStarted}, err
	}
	exec, err := observeJob(ctx, e.Client, e.Events, job, list, clockNow(e.Clock))
	if err != nil {
		return exec, err
	}
	if exec.State == ExecFailed && e.Reader != nil && jobBelongsTo(job, list) {
		why, err := oomKilledShards(ctx, e.Reader, job)
		if err != nil {
			return exec, err
		}
		if why != "" {
			exec.Message += "; " + why
		}
	}
	return exec, nil
}

// observeJob is a Job's execution, with the pod that cannot start while it
// runs.
func observeJob(ctx context.Context, pods, events client.Reader, job *batchv1.Job, owner metav1.Object, now time.Time) (Execution, error) {
	ex := jobExecution(job, owner)
	if ex.State != ExecRunning {
		return ex, nil
	}
	var err error
	ex.Blocked, err = blockedPod(ctx, pods, events, job, now)
	return ex, err
}

// Release sets ttlSecondsAfterFinished, now that status holds the outcome;
// the Job of a list that failed while it ran (its pods could not start) is
// deleted.
func (e *JobExecutor) Release(ctx context.Context, list *listsv1.EmailList) error {
	job, err := getJob(ctx, e.Client, e.Config.Namespace, JobName(list))
	if err != nil || job == nil {
		return err
	}
	if list.Status.Phase == listsv1.PhaseFailed {
		if err := stopBlockedJob(ctx, e.Client, job, list); err != nil {
			return err
		}
	}
	return setJobTTL(ctx, e.Client, job, list, e.Config.TTLSecondsAfterFinished)
}

// getJob returns the named Job, or nil when it does not exist.
func getJob(ctx context.Context, c client.Client, namespace, name string) (*batchv1.Job, error) {
	var job batchv1.Job
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get job: %w", err)
	}
	return &job, nil
}

// jobExecution reads a worker Job's terminal conditions. SuccessCriteriaMet
// and FailureTarget come before Complete and Failed and already decide the
// outcome, so either of each pair counts.
func jobExecution(job *batchv1.Job, owner metav1.Object) Execution {
	if !jobBelongsTo(job, owner) {
		return Execution{State: ExecFailed, Message: fmt.Sprintf("job %s exists but is not owned by %s", job.Name, owner.GetName())}
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return deadlineExceeded(job)
			}
			msg := c.Message
			if msg == "" {
				msg = c.Reason
			}
			return Execution{State: ExecFailed, Message: fmt.Sprintf("job %s failed: %s", job.Name, msg)}
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet) {
			return Execution{State: ExecSucceeded}
		}
	}
	return Execution{State: ExecRunning}
}

// deadlineExceeded is the failure of a Job the Job controller stopped at
// its activeDeadlineSeconds: the run's own reason, not a shard's.
func deadlineExceeded(job *batchv1.Job) Execution {
	limit := "its activeDeadlineSeconds"
	if s := job.Spec.ActiveDeadlineSeconds; s != nil {
		limit = fmt.Sprintf("its deadline of %s (activeDeadlineSeconds)", time.Duration(*s)*time.Second)
	}
	return Execution{State: ExecFailed, Reason: ReasonDeadlineExceeded, Message: fmt.Sprintf(
		"job %s ran longer than %s and was stopped with its pods; the deadline is the manager's --worker-active-deadline: raise it if runs this long are expected", job.Name, limit)}
}

// setJobTTL sets ttlSecondsAfterFinished on a finished Job its owner
// controls; callers do this only once the outcome is saved in status.
func setJobTTL(ctx context.Context, c client.Client, job *batchv1.Job, owner metav1.Object, ttl int32) error {
	if !isJobFinished(job) || job.Spec.TTLSecondsAfterFinished != nil || !jobBelongsTo(job, owner) {
		return nil
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
	if err := c.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set job ttl: %w", err)
	}
	return nil
}

// jobBelongsTo: the Job is owner's, by owner reference (Jobs in the
// owner's namespace) or by the UID label (list Jobs in the workers'
// namespace).
func jobBelongsTo(job *batchv1.Job, owner metav1.Object) bool {
	if metav1.IsControlledBy(job, owner) {
		return true
	}
	uid := job.Labels[JobListUIDLabel]
	return uid != "" && uid == string(owner.GetUID())
}

func isJobFinished(job *batchv1.Job) bool {
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if c := findJobCondition(job, t); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func findJobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == t {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func truncateLabel(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}
