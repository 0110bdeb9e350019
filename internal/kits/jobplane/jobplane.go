// Package jobplane is test and local-development infrastructure, not
// product code: it makes an envtest control plane run Jobs. Next to the
// envtest API server it starts the real kube-controller-manager (its Job,
// garbage collector, TTL-after-finished and pod GC controllers) and the real
// kube-scheduler, both built by hack/envtest-assets.sh, and a testnode, the
// kubelet stand-in that runs scheduled pods as local processes.
package jobplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/internal/kits/testnode"
)

// Controllers are the kube-controller-manager controllers the plane runs:
// Jobs, what cleans up after them, and the node lifecycle controller, which
// makes the test node schedulable once it is Ready.
var Controllers = []string{
	"job-controller",
	"node-lifecycle-controller",
	"garbage-collector-controller",
	"ttl-after-finished-controller",
	"pod-garbage-collector-controller",
}

// Options configure the plane.
type Options struct {
	// Env is a started envtest environment; the components get users of it.
	Env *envtest.Environment
	// AssetsDir holds kube-controller-manager and kube-scheduler (the
	// directory hack/envtest-assets.sh prints).
	AssetsDir string
	// Dir holds the components' kubeconfigs and logs, and the node's pods.
	Dir string
	// Images maps image names to directories of binaries (see testnode);
	// relative directories are resolved against the working directory.
	Images map[string]string
	// StartBackoff is the test node's first wait before it tries again a
	// container that could not start (default: the kubelet's 10s).
	StartBackoff time.Duration
	// NodeName names the test node (default "testnode").
	NodeName string
	// NodeCPU and NodeMemory are the node's capacity (default: this
	// machine's CPUs, 8Gi).
	NodeCPU, NodeMemory resource.Quantity
	// Log receives the node's messages.
	Log *slog.Logger
}

// Plane is a running controller-manager, scheduler and test node.
type Plane struct {
	// Node is the test node; tests kill and evict its pods.
	Node *testnode.Node
	// Dir holds the logs: kube-controller-manager.log, kube-scheduler.log,
	// and pods/<namespace>_<name>_<uid>/<container>.log.
	Dir string

	procs    []*exec.Cmd
	exited   []chan struct{}
	cancel   context.CancelFunc
	nodeDone chan error
}

// Start runs the controller-manager, the scheduler and the node. Stop them
// with Stop.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.NodeName == "" {
		o.NodeName = "testnode"
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, bin := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(o.AssetsDir, bin)); err != nil {
			return nil, fmt.Errorf("%s is not in %s: build it with hack/envtest-assets.sh (make envtest-assets)", bin, o.AssetsDir)
		}
	}
	p := &Plane{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = p.Stop()
		}
	}()

	// The controller-manager acts for the whole cluster (its garbage
	// collector deletes any kind); the scheduler gets the bootstrap
	// system:kube-scheduler role, as in a real cluster.
	kcmConfig, err := kubeconfig(o.Env, dir, envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}})
	if err != nil {
		return nil, err
	}
	schedConfig, err := kubeconfig(o.Env, dir, envtest.User{Name: "system:kube-scheduler"})
	if err != nil {
		return nil, err
	}
	if err := p.run(filepath.Join(o.AssetsDir, "kube-controller-manager"), filepath.Join(dir, "kube-controller-manager.log"),
		"--kubeconfig="+kcmConfig,
		"--controllers="+strings.Join(Controllers, ","),
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
		"--kube-api-qps=100", "--kube-api-burst=200",
	); err != nil {
		return nil, err
	}
	if err := p.run(filepath.Join(o.AssetsDir, "kube-scheduler"), filepath.Join(dir, "kube-scheduler.log"),
		"--kubeconfig="+schedConfig, "--leader-elect=false", "--secure-port=0",
	); err != nil {
		return nil, err
	}

	node, err := testnode.New(o.Env.Config, testnode.Config{
		Name: o.NodeName, Images: o.Images, Dir: filepath.Join(dir, "pods"),
		CPU: o.NodeCPU, Memory: o.NodeMemory, StartBackoff: o.StartBackoff, Log: o.Log,
	})
	if err != nil {
		return nil, err
	}
	p.Node = node
	nctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel, p.nodeDone = cancel, make(chan error, 1)
	go func() { p.nodeDone <- node.Run(nctx) }()
	ok = true
	return p, nil
}

// kubeconfig writes a kubeconfig for a new user of env and returns its path.
func kubeconfig(env *envtest.Environment, dir string, u envtest.User) (string, error) {
	au, err := env.AddUser(u, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", u.Name, err)
	}
	kc, err := au.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, strings.TrimPrefix(strings.ReplaceAll(u.Name, ":", "-"), "system-")+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// run starts a component, its output going to logPath.
func (p *Plane) run(bin, logPath string, args ...string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	p.procs = append(p.procs, cmd)
	p.exited = append(p.exited, exited)
	return nil
}

// Stop stops the node (killing its pods' processes), then the scheduler
// and the controller-manager.
func (p *Plane) Stop() error {
	var errs []error
	if p.cancel != nil {
		p.cancel()
		select {
		case err := <-p.nodeDone:
			errs = append(errs, err)
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("test node did not stop within 30s"))
		}
		p.cancel = nil
	}
	for i, cmd := range p.procs {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited[i]:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited[i]
		}
	}
	p.procs, p.exited = nil, nil
	return errors.Join(errs...)
}
