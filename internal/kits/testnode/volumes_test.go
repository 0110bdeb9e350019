package testnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMountVolumes: a ConfigMap or Secret volume is written into the
// pod's directory and stands for its mountPath; one that does not exist
// yet is an error the kubelet would report as ContainerCreating; other
// volumes are not mounted.
func TestMountVolumes(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "w", Name: "conf"}, Data: map[string]string{"config.yaml": "kind: Configuration\n"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "w", Name: "key"}, Data: map[string][]byte{"key": []byte("s3cret")}}
	n := &Node{client: fake.NewSimpleClientset(cm, sec)}
	pod := func(cmName string) (*corev1.Pod, *corev1.Container) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "w", Name: "p"}, Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cmName}}}},
				{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "key"}}},
				{Name: "store", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "store"}}},
			},
			Containers: []corev1.Container{{Name: "worker", VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/emaildata/config"}, {Name: "key", MountPath: "/etc/key/"}, {Name: "store", MountPath: "/var/lib/emaildata"}}}},
		}}
		return p, &p.Spec.Containers[0]
	}
	dir := t.TempDir()
	p, c := pod("conf")
	mounts, err := n.mountVolumes(context.Background(), p, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 2 || mounts["/var/lib/emaildata"] != "" {
		t.Errorf("mounts %v, want the ConfigMap's and the Secret's only", mounts)
	}
	for path, want := range map[string]string{
		remount("/etc/emaildata/config/config.yaml", mounts): "kind: Configuration\n",
		remount("/etc/key/key", mounts):                      "s3cret",
	} {
		if !strings.HasPrefix(path, dir) {
			t.Errorf("%s is not in the pod's directory", path)
			continue
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", filepath.Base(path), b, err, want)
		}
	}
	p, c = pod("not-yet")
	if _, err := n.mountVolumes(context.Background(), p, c, t.TempDir()); err == nil || !strings.Contains(err.Error(), `configmap "not-yet"`) {
		t.Errorf("missing ConfigMap: %v", err)
	}
}
