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
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	dir := flag.String("dir", ".local", "state directory (kubeconfig, etcd data, blob store)")
	crds := flag.String("crd-dir", "config/crd/bases", "CRD manifests")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:18080", "manager metrics address (0 disables)")
	probe := flag.String("health-probe-bind-address", "127.0.0.1:18081", "manager health address (0 disables)")
	apiListen := flag.String("api-listen", "127.0.0.1:8090", "REST API address")
	apiMetrics := flag.String("api-metrics-bind-address", "127.0.0.1:8091", "REST API metrics address (0 disables)")
	executor := flag.String("executor", operator.ExecutorLocal, "local (shards run in the manager) or job (Indexed Jobs, pods run as local processes)")
	workerDir := flag.String("worker-dir", "bin", "directory of the worker binary, for --executor=job")
	store := flag.String("store", localstack.StoreFile, "file (a directory under --dir) or s3 (a local S3-compatible server, SeaweedFS, its data under --dir; built by hack/s3-server.sh)")
	s3Port := flag.Int("s3-port", 8333, "port of the local S3 API, for --store=s3 (0: any free port)")
	shardBytes := flag.Int64("shard-bytes", 0, "target input bytes per shard (0: the manager's default)")
	maxShards := flag.Int("max-shards", 0, "most shards per list (0: the manager's default)")
	var shardBy string
	pipeline.BindShardBy(flag.CommandLine, &shardBy, pipeline.ShardByMX)
	callbacks := flag.String("callback-allow-cidrs", localstack.DefaultCallbackAllowCIDRs,
		"private ranges callbacks may reach, comma separated (none: only public addresses, as a cluster's default)")
	flag.String("config", "", "configuration file (kind Configuration, see docs/configuration.md; make run CONFIG=path); without one the stack runs offline (no DNS, no SMTP)")
	path := wiring.ConfigPath(os.Args[1:])
	conf, err := wiring.LoadConfig(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		os.Exit(2)
	}
	limits := wiring.LimitsFrom(conf)
	limits.BindFlags(flag.CommandLine) // the API's and the manager's alike
	vc := wiring.VerifyFrom(conf)
	lo := logging.Options{Level: slog.LevelInfo, Format: logging.FormatText}
	if path == "" {
		vc.DNSServer, vc.SMTP = "off", false // offline by default: this machine may have no network
	} else {
		*shardBytes, *maxShards, shardBy = conf.Pipeline.ShardBytes.Value(), conf.Pipeline.MaxShards, conf.Pipeline.ShardBy
		if len(conf.Manager.CallbackAllowCIDRs) > 0 {
			*callbacks = strings.Join(conf.Manager.CallbackAllowCIDRs, ",")
		}
		lo = wiring.LoggingFrom(conf)
	}
	vc.BindFlags(flag.CommandLine)
	lo.BindFlags(flag.CommandLine, lo)
	flag.Parse()
	if err := pipeline.CheckShardBy(shardBy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log, err := logging.New(os.Stderr, lo)
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
		Dir: *dir, CRDDir: *crds, AssetsDir: os.Getenv("KUBEBUILDER_ASSETS"),
		MetricsAddr: *metrics, ProbeAddr: *probe, APIListen: *apiListen, APIMetricsListen: *apiMetrics, Verify: vc,
		Executor: *executor, WorkerDir: *workerDir, Store: *store, S3Port: *s3Port,
		ShardBytes: *shardBytes, MaxShards: *maxShards, ShardBy: shardBy, Limits: limits,
		CallbackAllowCIDRs: cmp.Or(*callbacks, "none"),
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
  callbacks:   may reach %[9]s   (--callback-allow-cidrs; a cluster refuses loopback and private addresses unless allowed)
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
		cmp.Or(s.CallbackAllowCIDRs, "public addresses only"), cmp.Or(s.History, "none (--history-url=off)"))
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
		return "offline (syntax, corrections, lists); add --dns-server=system --smtp (make run ARGS=...) for DNS and SMTP checks"
	}
	if !vc.SMTP {
		return "syntax, corrections, lists and DNS via " + vc.DNSServer
	}
	return "all stages, DNS via " + vc.DNSServer + ", SMTP on"
}
