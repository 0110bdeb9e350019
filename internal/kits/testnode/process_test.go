package testnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "POD": "p-0"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":            "plain",
		"$(A)":             "1",
		"x-$(POD)-$(A)":    "x-p-0-1",
		"$$(A)":            "$(A)",
		"$(MISSING)":       "$(MISSING)",
		"$(unterminated":   "$(unterminated",
		"cost $5":          "cost $5",
		"trailing $":       "trailing $",
		"--index=$(A)$(A)": "--index=11",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPodField(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "ns", UID: "u1",
			Labels:      map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "n", ServiceAccountName: "sa"},
	}
	for path, want := range map[string]string{
		"metadata.name": "w-0", "metadata.namespace": "ns", "metadata.uid": "u1",
		"metadata.labels['batch.kubernetes.io/job-completion-index']": "3",
		"metadata.annotations['a']":                                   "b", "metadata.annotations['none']": "",
		"spec.nodeName": "n", "spec.serviceAccountName": "sa", "status.podIP": "127.0.0.1",
	} {
		if got, err := podField(pod, path); err != nil || got != want {
			t.Errorf("podField(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := podField(pod, "spec.hostname"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("unsupported field path: %v", err)
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := 0; i < 100; i++ {
		b.WriteString("line\n")
	}
	b.WriteString("last words\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := logTail(path, 3, 2048)
	if got != "line\nline\nlast words" {
		t.Errorf("tail of 3 lines = %q", got)
	}
	if got := logTail(path, 80, 16); len(got) > 16 || !strings.HasSuffix(got, "last words") {
		t.Errorf("tail of 16 bytes = %q", got)
	}
}

// A relative image directory is resolved when the node is made: its
// processes run in their pods' directories, where "bin" names nothing.
func TestNewResolvesImageDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Config{Name: "n", Dir: "pods",
		Images: map[string]string{"rel": "bin", "abs": "/opt/images/x", "dots": "../x/../bin"}})
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"rel": filepath.Join(wd, "bin"), "abs": "/opt/images/x", "dots": filepath.Join(filepath.Dir(wd), "bin"),
	} {
		if got := n.cfg.Images[image]; got != want {
			t.Errorf("image %s: directory %q, want %q", image, got, want)
		}
	}
	if n.cfg.Dir != filepath.Join(wd, "pods") {
		t.Errorf("node dir %q, want it absolute", n.cfg.Dir)
	}
	if _, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Config{Name: "n", Dir: "pods", Images: map[string]string{"empty": ""}}); err == nil {
		t.Error("an image without a directory was accepted")
	}
}

func TestRemount(t *testing.T) {
	mounts := map[string]string{"/etc/emaildata/config": "/pods/p/volumes/config"}
	for _, tc := range []struct{ in, want string }{
		{"--config=/etc/emaildata/config/config.yaml", "--config=/pods/p/volumes/config/config.yaml"},
		{"/etc/emaildata/config/config.yaml", "/pods/p/volumes/config/config.yaml"},
		{"/etc/emaildata/config", "/pods/p/volumes/config"},
		{"--config=/etc/emaildata/configs/x", "--config=/etc/emaildata/configs/x"},
		{"--list-uid=u", "--list-uid=u"},
		{"/tmp/etc/emaildata/config/x", "/tmp/etc/emaildata/config/x"},
		{"--a=/x=/etc/emaildata/config/x", "--a=/x=/etc/emaildata/config/x"},
	} {
		if got := remount(tc.in, mounts); got != tc.want {
			t.Errorf("remount(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
