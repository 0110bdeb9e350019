// Command localstack is `make run`: a local control plane, the CRDs and the
// manager with a file:// store (or, with --store=s3, an s3:// one on a local
// S3-compatible server), running lists in-process (the default, the
// quickest to start) or, with --executor=job, as Indexed Jobs carried out by
// the real Job controller and scheduler and a local node that runs worker
// pods as processes. Ctrl-C stops everything.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	// The settings are a Configuration: this directory's
	// configuration.yaml (offline, loopback callbacks, text logs, lists
	// in-process), with the --config file read over it; the flags are what
	// differs per run (where the state is, what listens where, how lists
	// run). docs/configuration.md has every key.
	path := wiring.ConfigPath(os.Args[1:])
	conf, err := loadConfig(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	f := bindFlags(fs, conf)
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if f.printConfig {
		os.Exit(wiring.PrintConfig(os.Stdout, conf, fs))
	}
	// --executor, --log-level and --log-format override the file's keys.
	if _, err := wiring.ApplyFlags(conf, fs); err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		os.Exit(2)
	}
	vc := wiring.VerifyFrom(conf)
	log, err := logging.New(os.Stderr, f.lo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(log))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: start this with `make run`, which builds the control plane binaries")
		os.Exit(2)
	}
	s, err := localstack.Start(ctx, localstack.Options{
		Dir: f.dir, CRDDir: crdDir, AssetsDir: os.Getenv("KUBEBUILDER_ASSETS"),
		MetricsAddr: f.metrics, ProbeAddr: f.probe, APIListen: f.apiListen, APIMetricsListen: f.apiMetrics, Verify: vc,
		Executor: conf.Executor.Mode, WorkerDir: f.workerDir, Store: f.store, S3Port: f.s3Port,
		ShardBytes: conf.Pipeline.ShardBytes.Value(), MaxShards: conf.Pipeline.MaxShards, ShardBy: conf.Pipeline.ShardBy,
		Limits: wiring.LimitsFrom(conf),
		// The file's list; none written (an empty list): public
		// addresses only, as a cluster's default.
		CallbackAllowCIDRs: cmp.Or(strings.Join(conf.Manager.CallbackAllowCIDRs, ","), "none"),
		Log:                log,
	})
	if err != nil {
		if ctx.Err() != nil { // Ctrl-C while starting: what started is stopped
			fmt.Println("stopped.")
			return
		}
		fmt.Fprintln(os.Stderr, "local stack:", err)
		os.Exit(1)
	}
	samples, _ := filepath.Abs("config/samples")
	fmt.Printf(`
emaildata local stack is running (Ctrl-C stops it).

  kubeconfig:  %[1]s
  blob store:  %[2]s
  REST API:    %[4]s   (OpenAPI document: %[4]s/openapi.json)
  web console: %[4]s/console/   (sign in with the API key below; docs/console.md)
  API key:     %[5]s   (enabled for every service)
  Validation key: %[8]s   (email_validation alone: lists submitted without service=)
  callbacks:   may reach %[9]s   (manager.callbackAllowCIDRs; a cluster refuses loopback and private addresses unless allowed)
  verification: %[6]s
  history:     %[10]s
  executor:    %[7]s

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

`, s.Kubeconfig, storeMode(s), samples, s.APIURL, s.APIKey, verifyMode(vc), executorMode(s), s.ValidationKey,
		cmp.Or(s.CallbackAllowCIDRs, "public addresses only"), cmp.Or(s.History, `none (verification.history.url: "off")`))
	printMetrics(s)
	if s.Jobs != nil {
		fmt.Printf(`Watch the Job path (in other terminals, with the KUBECONFIG above):
  kubectl get jobs -n %[1]s -w    # one Indexed Job per list
  kubectl get pods -n %[1]s -w    # one pod per shard: Pending, Running, Completed
  kubectl get nodes                              # %[2]s runs the pods as local processes
  logs: %[3]s/{kube-controller-manager,kube-scheduler}.log and pods/<namespace>_<pod>_<uid>/worker.log

`, localstack.Namespace, localstack.NodeName, s.Jobs.Dir)
	}

	select {
	case <-ctx.Done():
	case err := <-s.Done():
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
	}
	quitOnSecondInterrupt() // before stop: no moment without a handler
	stop()
	fmt.Println("stopping... (Ctrl-C again quits at once; the next make run cleans up)")
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		os.Exit(1)
	}
	fmt.Println("stopped.")
}

// quitOnSecondInterrupt makes a second Ctrl-C (or SIGTERM) quit at once,
// with status 0 all the same: the user asked for it, and the next run stops
// the control plane left behind. Dying of the signal instead would have
// make report the run as failed ("make: *** [run] Interrupt").
func quitOnSecondInterrupt() {
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-again
		fmt.Println("quitting without waiting; the next make run stops what is left")
		os.Exit(0)
	}()
}

// printMetrics says where the manager's and the API's metrics are.
func printMetrics(s *localstack.Stack) {
	if s.MetricsURL == "" && s.APIMetricsURL == "" {
		return
	}
	fmt.Println("Metrics (Prometheus text format; the API's public port answers 404 for /metrics):")
	if s.MetricsURL != "" {
		fmt.Printf("  manager metrics: %s   (HTTPS, self-signed, needs a token with the %s ClusterRole)\n", s.MetricsURL, localstack.MetricsReader)
		fmt.Printf("  metrics token: %s\n", s.MetricsTokenFile)
		fmt.Printf("  curl -sk -H \"Authorization: Bearer $(cat %s)\" %s | grep ^emaildata_\n", s.MetricsTokenFile, s.MetricsURL)
	}
	if s.APIMetricsURL != "" {
		fmt.Printf("  API metrics: %s\n", s.APIMetricsURL)
		fmt.Printf("  curl -s %s | grep ^emaildata_\n", s.APIMetricsURL)
	}
	fmt.Println()
}

func storeMode(s *localstack.Stack) string {
	if s.S3Endpoint == "" {
		return s.StoreDir
	}
	return fmt.Sprintf("%s\n               (SeaweedFS S3 API at %s; its key pair is in Secret %s/%s)", s.BlobURL, s.S3Endpoint, localstack.Namespace, localstack.StoreSecret)
}

func executorMode(s *localstack.Stack) string {
	if s.Jobs != nil {
		return "job (Indexed Jobs: real kube-controller-manager and kube-scheduler, pods run as local processes)"
	}
	return "local (shards run in the manager); make run ARGS=--executor=job runs them as Jobs and pods"
}

func verifyMode(vc wiring.VerifyConfig) string {
	if vc.DNSServer == "off" || vc.DNSServer == "" {
		return "offline (syntax, corrections, lists); make run CONFIG=hack/localstack/online.yaml adds DNS and SMTP checks"
	}
	if !vc.SMTP {
		return "syntax, corrections, lists and DNS via " + vc.DNSServer
	}
	return "all stages, DNS via " + vc.DNSServer + ", SMTP on"
}
