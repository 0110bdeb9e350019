package testnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reasonContainerCreating is what the kubelet reports while a pod's
// volume cannot be set up (a ConfigMap or a Secret that does not exist
// yet): it tries again.
const reasonContainerCreating = "ContainerCreating"

// mountVolumes writes the ConfigMap and Secret volumes c mounts into the
// pod's directory (containers share the host's filesystem: there is no
// mount) and returns, for each mount path, the directory that stands for
// it. Other volumes are not mounted (see the package comment).
func (n *Node) mountVolumes(ctx context.Context, pod *corev1.Pod, c *corev1.Container, dir string) (map[string]string, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			continue
		}
		var data map[string][]byte
		switch {
		case v.ConfigMap != nil:
			cm, err := n.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: configmap %q: %w", m.Name, v.ConfigMap.Name, err)
			}
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				data[k] = b
			}
		case v.Secret != nil:
			s, err := n.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: secret %q: %w", m.Name, v.Secret.SecretName, err)
			}
			data = s.Data
		default:
			continue
		}
		local := filepath.Join(dir, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o755); err != nil {
			return nil, err
		}
		for k, b := range data {
			if err := os.WriteFile(filepath.Join(local, filepath.Base(k)), b, 0o644); err != nil {
				return nil, err
			}
		}
		mounts[filepath.Clean(m.MountPath)] = local
	}
	return mounts, nil
}

// remount rewrites s when it names a path under one of the mounts (an
// argument such as --config=/etc/emaildata/config/config.yaml, or an
// environment value) to the directory standing for it.
func remount(s string, mounts map[string]string) string {
	for mp, local := range mounts {
		for _, sep := range []string{"=", ""} {
			prefix, rest, ok := strings.Cut(s, sep+mp)
			if !ok || (sep == "" && prefix != "") || (sep == "=" && strings.Contains(prefix, "/")) {
				continue
			}
			if rest == "" || strings.HasPrefix(rest, "/") {
				return prefix + sep + local + rest
			}
		}
	}
	return s
}
