package deploy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const envtestVersion = "1.36.3" // hack/envtest-assets.sh's k8s_version

// fakeRelease serves an envtest index, an envtest tarball and Kubernetes
// release binaries (with .sha256) the way controller-tools' index and
// dl.k8s.io do, with checksums that can be made wrong.
type fakeRelease struct {
	tarball, kcm, sched []byte
	badTarballSum       bool
	badReleaseSum       bool
	noEntry             bool
	requests            atomic.Int64
}

func fakeBinary(name string) []byte { return []byte("#!/bin/sh\necho fake " + name + "\n") }

func envtestTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		body := fakeBinary(name)
		if err := tw.WriteHeader(&tar.Header{Name: "controller-tools/envtest/" + name, Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (f *fakeRelease) handler(base *string) http.Handler {
	platform := runtime.GOOS + "-" + runtime.GOARCH
	file := fmt.Sprintf("envtest-v%s-%s.tar.gz", envtestVersion, platform)
	sum512 := sha512.Sum512(f.tarball)
	hash := hex.EncodeToString(sum512[:])
	if f.badTarballSum {
		hash = strings.Repeat("0", 128)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/envtest-releases.yaml", func(w http.ResponseWriter, _ *http.Request) {
		version := envtestVersion
		if f.noEntry {
			version = "1.30.0"
		}
		// Another version first, as in the real index.
		fmt.Fprintf(w, "releases:\n  v1.29.0:\n    %s:\n      hash: %s\n      selfLink: %s/wrong.tar.gz\n", strings.ReplaceAll(file, envtestVersion, "1.29.0"), strings.Repeat("1", 128), *base)
		fmt.Fprintf(w, "  v%s:\n    %s:\n      hash: %s\n      selfLink: %s/download/%s\n", version, file, hash, *base, file)
	})
	mux.HandleFunc("/download/"+file, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(f.tarball) })
	for name, body := range map[string][]byte{"kube-controller-manager": f.kcm, "kube-scheduler": f.sched} {
		path := fmt.Sprintf("/release/v%s/bin/%s/%s/%s", envtestVersion, runtime.GOOS, runtime.GOARCH, name)
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
		mux.HandleFunc(path+".sha256", func(w http.ResponseWriter, _ *http.Request) {
			s := sha256.Sum256(body)
			if f.badReleaseSum {
				s = sha256.Sum256([]byte("tampered"))
			}
			fmt.Fprint(w, hex.EncodeToString(s[:]))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		mux.ServeHTTP(w, r)
	})
}

// runAssets runs hack/envtest-assets.sh with KUBEBUILDER_ASSETS=dir and the
// download URLs pointed at base; building is disabled (it takes minutes).
func runAssets(t *testing.T, dir, indexURL, releaseURL string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command("bash", "../../../hack/envtest-assets.sh")
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+dir, "EMAILDATA_ENVTEST_BUILD=0",
		"EMAILDATA_ENVTEST_INDEX_URL="+indexURL, "EMAILDATA_K8S_RELEASE_URL="+releaseURL, "EMAILDATA_CONNECT_TIMEOUT=2")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestEnvtestAssetsDownload: released binaries are installed only when
// their checksums match; stdout is only the directory; stderr says which
// path was taken and why.
func TestEnvtestAssetsDownload(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed by hack/envtest-assets.sh")
	}
	tests := []struct {
		name                            string
		badTarball, badRelease, noEntry bool
		wantOK                          bool
		wantInstalled, wantAbsent       []string
		wantStderr                      string
	}{
		{name: "verified", wantOK: true, wantInstalled: []string{"kube-apiserver", "etcd", "kubectl", "kube-controller-manager", "kube-scheduler"}, wantStderr: "sha512 verified"},
		{name: "tarball checksum mismatch", badTarball: true, wantInstalled: []string{"kube-controller-manager", "kube-scheduler"}, wantAbsent: []string{"kube-apiserver", "etcd"}, wantStderr: "envtest.tar.gz: sha512"},
		{name: "release checksum mismatch", badRelease: true, wantInstalled: []string{"kube-apiserver", "etcd"}, wantAbsent: []string{"kube-controller-manager", "kube-scheduler"}, wantStderr: "kube-controller-manager: sha256"},
		{name: "no release of the version", noEntry: true, wantAbsent: []string{"kube-apiserver", "etcd"}, wantStderr: "no envtest release v" + envtestVersion},
	}
	tarball := envtestTarball(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // its own release server and directory
			f := &fakeRelease{tarball: tarball, kcm: fakeBinary("kcm"), sched: fakeBinary("sched"),
				badTarballSum: tc.badTarball, badReleaseSum: tc.badRelease, noEntry: tc.noEntry}
			var base string
			srv := httptest.NewServer(f.handler(&base))
			defer srv.Close()
			base = srv.URL
			dir := t.TempDir()
			stdout, stderr, err := runAssets(t, dir, base+"/envtest-releases.yaml", base+"/release")
			if (err == nil) != tc.wantOK {
				t.Fatalf("err %v, want ok=%v; stderr:\n%s", err, tc.wantOK, stderr)
			}
			if tc.wantOK && stdout != dir+"\n" {
				t.Errorf("stdout %q, want only the directory", stdout)
			}
			if !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.wantStderr)
			}
			for _, b := range tc.wantInstalled {
				data, err := os.ReadFile(filepath.Join(dir, b))
				if err != nil || !bytes.HasPrefix(data, []byte("#!/bin/sh\necho fake")) {
					t.Errorf("%s not installed: %q %v", b, data, err)
				}
			}
			for _, b := range tc.wantAbsent {
				if _, err := os.Stat(filepath.Join(dir, b)); err == nil {
					t.Errorf("%s installed despite the failed download", b)
				}
			}
			if leftovers, _ := filepath.Glob(filepath.Join(dir, ".download.*")); len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

// TestEnvtestAssetsOffline: an unreachable download host fails within the
// connect timeout, is named on stderr, and the second host is not tried.
// A directory holding every binary makes no request at all.
func TestEnvtestAssetsOffline(t *testing.T) {
	f := &fakeRelease{tarball: envtestTarball(t), kcm: fakeBinary("kcm"), sched: fakeBinary("sched")}
	var base string
	srv := httptest.NewServer(f.handler(&base))
	defer srv.Close()
	base = srv.URL
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()

	start := time.Now()
	_, stderr, err := runAssets(t, t.TempDir(), closed+"/envtest-releases.yaml", base+"/release")
	if err == nil || !strings.Contains(stderr, "cannot reach "+closed) {
		t.Errorf("err %v, stderr %q", err, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the offline fallback took %s", d)
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("%d requests to the release host after the index host was unreachable", n)
	}

	dir := t.TempDir()
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(dir, b), fakeBinary(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, err := runAssets(t, dir, base+"/envtest-releases.yaml", base+"/release")
	if err != nil || stdout != dir+"\n" || f.requests.Load() != 0 {
		t.Errorf("complete dir: err %v stdout %q stderr %q requests %d", err, stdout, stderr, f.requests.Load())
	}
}
