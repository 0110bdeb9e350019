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
	"k8s.io/utils/ptr"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/wiring"
)

// Where a list worker reads the configuration the manager gives it by
// reference (JobConfig.WorkerConfig), and the environment that carries
// what differs per list.
const (
	WorkerConfigDir  = "/etc/emaildata/config"
	WorkerConfigFile = "config.yaml"
	// The per-list environment (wiring.ApplyJobEnv reads it).
	EnvFleetSeats    = wiring.EnvFleetSeats
	EnvFleetRequired = wiring.EnvFleetRequired
	EnvSMTPConns     = wiring.EnvSMTPConns
	EnvSMTPRate      = wiring.EnvSMTPRate
)

// WorkerConfigMapName is the name of the ConfigMap holding the
// configuration data of the Job named job: named by the Job and by its
// content, so that a list's Job keeps referring to the configuration it
// started with when the manager's changes.
func WorkerConfigMapName(job string, data []byte) string {
	h := sha256.Sum256(data)
	return job + "-config-" + hex.EncodeToString(h[:])[:10]
}

// ensureWorkerConfig creates the ConfigMap of the workers' configuration
// that job's pods mount, in the Job's namespace, when it is missing. It is
// immutable: a change of configuration is a new name.
//
// Its owner is the Job. The list cannot own it (a list lives in any
// namespace, the Jobs in the workers' one, and an owner must share its
// dependant's namespace), and a sweep by the manager would need a list
// and a delete grant on every ConfigMap of that namespace, and a guess
// about which ones are still mounted. Owned by its Job, the ConfigMap
// goes when the Job goes (its TTL after the outcome is recorded, or the
// list's deletion), by Kubernetes' garbage collector, even with the
// manager down; the price is one small ConfigMap per list instead of one
// per configuration. The Job exists before its ConfigMap (the owner's UID
// is needed); its pods wait for the volume, as kubelet retries a missing
// ConfigMap, for the moment between the two creates.
func (e *JobExecutor) ensureWorkerConfig(ctx context.Context, job *batchv1.Job) error {
	data, err := workerConfig(e.Config)
	if err != nil {
		return err
	}
	if job.UID == "" { // it existed: its UID, and the ConfigMap it mounts
		existing, err := getJob(ctx, e.Client, job.Namespace, job.Name)
		if err != nil || existing == nil {
			return err
		}
		job = existing
	}
	name := WorkerConfigMapName(job.Name, data)
	if mountedConfigMap(&job.Spec.Template.Spec) != name {
		// Started with an earlier configuration: its own ConfigMap was
		// created with it, and the list keeps it.
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace,
			Labels:          map[string]string{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "worker-config"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}}},
		Immutable: ptr.To(true),
		Data:      map[string]string{WorkerConfigFile: string(data)},
	}
	if err := e.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("worker configuration ConfigMap: %w", err)
	}
	return nil
}

// mountedConfigMap is the ConfigMap a list worker pod reads its
// configuration from ("" for none).
func mountedConfigMap(pod *corev1.PodSpec) string {
	for _, v := range pod.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}

// workerConfig is cfg.WorkerConfig, or when it is empty the
// configuration's defaults with cfg.BlobURL as the store: what a worker
// given no file would run with.
func workerConfig(cfg JobConfig) ([]byte, error) {
	if len(cfg.WorkerConfig) > 0 {
		return cfg.WorkerConfig, nil
	}
	c := cfgv1.Default()
	c.Store.URL = cfg.BlobURL
	data, err := wiring.WorkerConfig(c)
	if err != nil {
		return nil, fmt.Errorf("worker configuration: %w", err)
	}
	return data, nil
}

// byReference shapes a list worker's pod to read its configuration from
// the ConfigMap: the file mounted, --config among its few arguments, the
// list's own values in its environment.
func byReference(cfg JobConfig, job string, pod *corev1.PodSpec, shards int) error {
	data, err := workerConfig(cfg)
	if err != nil {
		return err
	}
	c := &pod.Containers[0]
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: WorkerConfigMapName(job, data)}}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: WorkerConfigDir, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvFleetSeats, Value: strconv.Itoa(shards)})
	if cfg.FleetRequired {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvFleetRequired, Value: "true"})
	}
	return nil
}
