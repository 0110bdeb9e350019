// Command localstack is `make run`: a local control plane, the CRDs and the
// manager with the in-process executor and a file:// store. Ctrl-C stops
// everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/emaildata/emaildata/internal/localstack"
)

func main() {
	dir := flag.String("dir", ".local", "state directory (kubeconfig, etcd data, blob store)")
	crds := flag.String("crd-dir", "config/crd/bases", "CRD manifests")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:18080", "manager metrics address (0 disables)")
	probe := flag.String("health-probe-bind-address", "127.0.0.1:18081", "manager health address (0 disables)")
	zopts := zap.Options{Development: true}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: start this with `make run`, which builds the control plane binaries")
		os.Exit(2)
	}
	s, err := localstack.Start(ctx, localstack.Options{
		Dir: *dir, CRDDir: *crds, AssetsDir: os.Getenv("KUBEBUILDER_ASSETS"),
		MetricsAddr: *metrics, ProbeAddr: *probe,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		os.Exit(1)
	}
	samples, _ := filepath.Abs("config/samples")
	fmt.Printf(`
emaildata local stack is running (Ctrl-C stops it).

  kubeconfig:  %[1]s
  blob store:  %[2]s

Try it:
  export KUBECONFIG=%[1]s
  kubectl apply -f %[3]s/
  kubectl get emaillists -w          # sample-list reaches Results
  kubectl get emaillist sample-list -o jsonpath='{.status.result.key}'   # result file, under the blob store

`, s.Kubeconfig, s.StoreDir, samples)

	select {
	case <-ctx.Done():
	case err := <-s.Done():
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
	}
	fmt.Println("stopping...")
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		os.Exit(1)
	}
	fmt.Println("stopped.")
}
