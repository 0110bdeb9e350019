package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

// helmConfig is Helm's action configuration for namespace ns, as the helm
// CLI builds it from a kubeconfig (release records in Secrets, Helm's
// default storage).
func (tc *testCluster) helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &tc.kubeconfig
	flags.Namespace = &ns
	cache := t.TempDir()
	flags.CacheDir = &cache
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// helmInstall is `helm install name charts/emaildata -n ns` with vals.
func (tc *testCluster) helmInstall(t *testing.T, name, ns string, vals map[string]any) error {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(tc.helmConfig(t, ns))
	in.ReleaseName, in.Namespace, in.Timeout = name, ns, 2*time.Minute
	_, err = in.Run(ch, vals)
	return err
}

// helmUpgrade is `helm upgrade name charts/emaildata -n ns` with vals.
func (tc *testCluster) helmUpgrade(t *testing.T, name, ns string, vals map[string]any) error {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(tc.helmConfig(t, ns))
	up.Namespace, up.Timeout = ns, 2*time.Minute
	_, err = up.Run(name, ch, vals)
	return err
}

// helmUninstall is `helm uninstall name -n ns`.
func (tc *testCluster) helmUninstall(t *testing.T, name, ns string) {
	t.Helper()
	un := action.NewUninstall(tc.helmConfig(t, ns))
	un.Timeout = 2 * time.Minute
	if _, err := un.Run(name); err != nil {
		t.Fatalf("helm uninstall %s: %v", name, err)
	}
}

// mustInstall fails the test when the install fails.
func (tc *testCluster) mustInstall(t *testing.T, name, ns string, vals map[string]any) {
	t.Helper()
	if err := tc.helmInstall(t, name, ns, vals); err != nil {
		t.Fatalf("helm install %s -n %s: %v", name, ns, err)
	}
}

// impersonate returns cfg acting as the service account ns/name: what the
// pod's token would be.
func impersonate(cfg *rest.Config, ns, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: serviceAccountUser(ns, name),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return c
}

// podSpec reads a Deployment the release made: its service account and
// its container's args.
func (tc *testCluster) podSpec(t *testing.T, ns, name string) (account string, args []string) {
	t.Helper()
	var d appsv1.Deployment
	if err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.Containers[0].Args
}

// releaseConfig is the Configuration the release installed (its
// <fullname>-config ConfigMap, which its Deployments mount and name with
// --config), loaded with the binaries' strict loader.
func (tc *testCluster) releaseConfig(t *testing.T, ns, fullname string) *cfgv1.Configuration {
	t.Helper()
	var cm corev1.ConfigMap
	if err := tc.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: fullname + "-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	c, err := cfgv1.Decode([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("configuration of %s: %v", fullname, err)
	}
	return c
}

// running is a manager or an API started by a test; stop ends it and
// waits for it.
type running struct {
	cancel context.CancelFunc
	done   chan error
	addr   string // the API's
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("stopped with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("did not stop")
	}
}

// startManager runs the manager of release fullname in ns as its service
// account, with the flags its Deployment has, in-process and with the
// local executor (envtest runs no pods), on a file store in storeDir.
func (tc *testCluster) startManager(t *testing.T, ns, fullname, storeDir string) *running {
	t.Helper()
	account, args := tc.podSpec(t, ns, fullname+"-controller-manager")
	o := operator.Options{
		Namespace: ns, Executor: operator.ExecutorLocal, BlobURL: "file://" + storeDir, Registry: wiring.Registry(nil),
		MetricsAddr: "0", ProbeAddr: "0", SkipNameValidation: true, PollInterval: 200 * time.Millisecond,
		LeaderElection: slices.Contains(args, "--leader-elect"),
		// stop waits for Start to return: the next manager of the release
		// (after a reinstall) takes the Lease at once, not 15 s later.
		ReleaseLeaseOnStop: true,
	}
	conf := tc.releaseConfig(t, ns, fullname)
	o.Secrets, o.ListIDConfigMap = wiring.SecretsFrom(conf), conf.Installation.ListIDConfigMap
	o.LeaderElectionID, o.WatchNamespaces = conf.Manager.LeaderElectionID, conf.Namespaces.Watch
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.New(ctx, impersonate(tc.cfg, ns, account), o)
	if err != nil {
		cancel()
		t.Fatalf("manager of %s: %v", fullname, err)
	}
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel() })
	return r
}

// startAPI runs the API of release fullname in ns as its service account,
// with its Deployment's flags, on the file store in storeDir.
func (tc *testCluster) startAPI(t *testing.T, ns, fullname, storeDir string) *running {
	t.Helper()
	account, _ := tc.podSpec(t, ns, fullname+"-api")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := restapi.RunOptions{Listener: ln, MetricsListen: "0", KeyNamespace: ns, BlobURL: "file://" + storeDir,
		ShutdownTimeout: 5 * time.Second, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	conf := tc.releaseConfig(t, ns, fullname)
	o.Secrets, o.ListIDConfigMap = wiring.SecretsFrom(conf), conf.Installation.ListIDConfigMap
	o.APIKeyNamespace = conf.Namespaces.APIKeys
	ready := make(chan struct{})
	o.Ready = func(string) { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), addr: "http://" + ln.Addr().String()}
	go func() { r.done <- restapi.Run(ctx, impersonate(tc.cfg, ns, account), o) }()
	t.Cleanup(func() { cancel() })
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("API of %s: %v", fullname, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("API of %s did not start", fullname)
	}
	return r
}

// eventually polls cond until it holds or a minute passed.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within a minute (last error %v)", what, last)
}

// httpDo sends a request with the API key and returns status and body.
func httpDo(req *http.Request, key string) (int, []byte, error) {
	req.Header.Set("api_key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode >= 500 {
		err = fmt.Errorf("%d: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, body, err
}
