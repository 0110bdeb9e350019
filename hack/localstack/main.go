// Command localstack is `make run`: a local control plane, the CRDs and the
// manager with the in-process executor and a file:// store. Ctrl-C stops
// everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/emaildata/emaildata/internal/catalog"
	"github.com/emaildata/emaildata/internal/localstack"
)

func main() {
	dir := flag.String("dir", ".local", "state directory (kubeconfig, etcd data, blob store)")
	crds := flag.String("crd-dir", "config/crd/bases", "CRD manifests")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:18080", "manager metrics address (0 disables)")
	probe := flag.String("health-probe-bind-address", "127.0.0.1:18081", "manager health address (0 disables)")
	apiListen := flag.String("api-listen", "127.0.0.1:8090", "REST API address")
	vc := catalog.DefaultVerifyConfig()
	vc.DNSServer, vc.SMTP = "off", false // offline by default: this machine may have no network
	vc.BindFlags(flag.CommandLine)
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
		MetricsAddr: *metrics, ProbeAddr: *probe, APIListen: *apiListen, Verify: vc,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
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
  REST API:    %[4]s   (OpenAPI document: %[4]s/openapi.json)
  API key:     %[5]s   (enabled for every service)
  verification: %[6]s

With kubectl:
  export KUBECONFIG=%[1]s
  kubectl apply -f %[3]s/
  kubectl get emaillists -w          # sample-list reaches Results
  kubectl get emaillist sample-list -o jsonpath='{.status.result.key}'   # result file, under the blob store

With the REST API:
  export API=%[4]s KEY=%[5]s
  curl -s -X POST "$API/v5/list?service=email_validation&email_column=4&header=true&delimiter=%%2C&name=people.csv" -H "api_key: $KEY" -H "accept: application/json" -F "file=@%[3]s/sample-list.csv"
  curl -s "$API/v5/list/LIST_ID" -H "api_key: $KEY" -H "accept: application/json"
  curl -s -OJ "$API/v5/list/LIST_ID/results" -H "api_key: $KEY"

`, s.Kubeconfig, s.StoreDir, samples, s.APIURL, s.APIKey, verifyMode(vc))

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

func verifyMode(vc catalog.VerifyConfig) string {
	if vc.DNSServer == "off" || vc.DNSServer == "" {
		return "offline (syntax, corrections, lists); add --dns-server=system --smtp (make run ARGS=...) for DNS and SMTP checks"
	}
	if !vc.SMTP {
		return "syntax, corrections, lists and DNS via " + vc.DNSServer
	}
	return "all stages, DNS via " + vc.DNSServer + ", SMTP on"
}
