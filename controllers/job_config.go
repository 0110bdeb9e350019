package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// WorkerConfigMapName is the name of the ConfigMap holding data: named by
// its content, so that a list's Job keeps referring to the configuration
// it started with when the manager's changes, and lists started with the
// same configuration share one.
func WorkerConfigMapName(data []byte) string {
	h := sha256.Sum256(data)
	return "emaildata-worker-config-" + hex.EncodeToString(h[:])[:10]
}

// ensureWorkerConfig creates the ConfigMap of the workers' configuration
// in the workers' namespace when it is missing. It is immutable: a change
// of configuration is a new name.
func (e *JobExecutor) ensureWorkerConfig(ctx context.Context) error {
	data := e.Config.WorkerConfig
	if len(data) == 0 {
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerConfigMapName(data), Namespace: e.Config.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "worker-config"}},
		Immutable: ptr.To(true),
		Data:      map[string]string{WorkerConfigFile: string(data)},
	}
	if err := e.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("worker configuration ConfigMap: %w", err)
	}
	return nil
}

// byReference shapes a list worker's pod to read its configuration from
// the ConfigMap: the file mounted, --config among its few arguments, the
// list's own values in its environment.
func byReference(cfg JobConfig, pod *corev1.PodSpec, shards int) {
	c := &pod.Containers[0]
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: WorkerConfigMapName(cfg.WorkerConfig)}}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: WorkerConfigDir, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvFleetSeats, Value: strconv.Itoa(shards)})
	if cfg.FleetRequired {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvFleetRequired, Value: "true"})
	}
}

// byReferencePod reports whether c reads its configuration by reference.
func byReferencePod(c *corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == WorkerConfigDir {
			return true
		}
	}
	return false
}
