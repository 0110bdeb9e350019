// Package localstack runs the whole operator on one machine without a
// cluster: a kube-apiserver and etcd (the envtest binaries), the CRDs, and
// the manager with the in-process executor and a file:// store.
package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/internal/operator"
)

// Options configure the stack.
type Options struct {
	// Dir holds the kubeconfig, etcd's data and the blob store.
	Dir string
	// CRDDir holds the CRD manifests.
	CRDDir string
	// AssetsDir holds kube-apiserver, etcd and kubectl.
	AssetsDir string
	// MetricsAddr and ProbeAddr of the manager; "0" disables.
	MetricsAddr, ProbeAddr string
}

// Stack is a running local control plane with the manager.
type Stack struct {
	// Kubeconfig is the path of an admin kubeconfig for kubectl.
	Kubeconfig string
	// StoreDir is the directory behind the file:// store.
	StoreDir string
	// BlobURL is the store's URL.
	BlobURL string

	env     *envtest.Environment
	cancel  context.CancelFunc
	mgrDone chan error
}

// Namespace the operator runs in.
const Namespace = "emaildata-system"

// Start brings the stack up. Stop it with Stop.
func Start(ctx context.Context, o Options) (*Stack, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	storeDir := filepath.Join(dir, "store")
	etcdDir := filepath.Join(dir, "etcd")
	for _, d := range []string{storeDir, etcdDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{o.CRDDir},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: o.AssetsDir,
	}
	// Keep etcd's data between runs, so lists and IDs survive a restart.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	s := &Stack{env: env, StoreDir: storeDir, BlobURL: "file://" + storeDir}
	ok := false
	defer func() {
		if !ok {
			_ = env.Stop()
		}
	}()

	admin, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}

	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}

	mctx, cancel := context.WithCancel(ctx)
	mgr, err := operator.New(mctx, cfg, operator.Options{
		Namespace:   Namespace,
		BlobURL:     s.BlobURL,
		Executor:    operator.ExecutorLocal,
		MetricsAddr: o.MetricsAddr,
		ProbeAddr:   o.ProbeAddr,
		// Locally, a list waits a little for a ConfigMap applied after it.
		SourceGrace:  30 * time.Second,
		PollInterval: time.Second,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	s.cancel = cancel
	s.mgrDone = make(chan error, 1)
	go func() { s.mgrDone <- mgr.Start(mctx) }()
	ok = true
	return s, nil
}

// Done reports the manager stopping on its own.
func (s *Stack) Done() <-chan error { return s.mgrDone }

// Stop stops the manager, then the control plane.
func (s *Stack) Stop() error {
	s.cancel()
	var errs []error
	select {
	case err := <-s.mgrDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	case <-time.After(30 * time.Second):
		errs = append(errs, errors.New("manager did not stop within 30s"))
	}
	if err := s.env.Stop(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
