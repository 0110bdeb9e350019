// Command manager runs the emaildata controllers: it reconciles EmailList
// and Purchase resources and runs lists as Indexed Jobs.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/catalog"
	"github.com/emaildata/emaildata/internal/logging"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/pipeline"
)

func main() {
	var o operator.Options
	o.Pipeline = pipeline.DefaultConfig()
	o.Verify = catalog.DefaultVerifyConfig()
	o.Verify.BindFlags(flag.CommandLine)
	flag.StringVar(&o.PeopleURL, "people-url", os.Getenv("PEOPLE_URL"), "reference people store for email_intelligence and email_append (bolt:///path.db or postgres://...)")
	var workerCPU, workerMemory, workerCPULimit, nodeSelector, tolerations, extraArgs, grants string
	flag.StringVar(&o.Namespace, "namespace", envOr("POD_NAMESPACE", "emaildata-system"), "namespace of the operator (holds the list ID counter)")
	flag.StringVar(&o.Job.Namespace, "worker-namespace", "", "namespace the list Jobs run in, whatever the list's namespace (default: the operator's); the worker service account, --worker-env-secret and --store-pvc live there")
	flag.StringVar(&o.BlobURL, "blob-url", envOr("BLOB_URL", "file:///var/lib/emaildata/store"), "blob store URL (file://, s3://, gs://, azblob://)")
	flag.StringVar(&o.Executor, "executor", operator.ExecutorJob, "job (Kubernetes Jobs) or local (in-process)")
	flag.StringVar(&o.Job.Image, "worker-image", os.Getenv("WORKER_IMAGE"), "image of the worker Jobs")
	flag.StringVar(&o.Job.ServiceAccountName, "worker-service-account", "", "service account of worker pods, in the workers' namespace (default: its default account; no token is mounted either way)")
	flag.StringVar(&o.Job.EnvFromSecret, "worker-env-secret", "", "Secret whose keys become the workers' environment (store credentials)")
	flag.StringVar(&o.Job.StorePVC, "store-pvc", "", "PVC holding a file:// store, mounted into worker pods")
	flag.StringVar(&o.Job.StoreMountPath, "store-mount-path", "/var/lib/emaildata", "where the store PVC is mounted")
	flag.StringVar(&workerCPU, "worker-cpu", "500m", "CPU request of a worker pod")
	flag.StringVar(&workerMemory, "worker-memory", "256Mi", "memory request and limit of a worker pod")
	flag.StringVar(&workerCPULimit, "worker-cpu-limit", "", "CPU limit of a worker pod (default: none)")
	flag.StringVar(&nodeSelector, "worker-node-selector", "", "node selector of worker pods: key=value,...")
	flag.StringVar(&tolerations, "worker-tolerations", "", "tolerations of worker pods: key=value:Effect, key:Effect, key or *, comma separated")
	flag.StringVar(&o.Job.PriorityClassName, "worker-priority-class", "", "priorityClassName of worker pods")
	flag.StringVar(&extraArgs, "worker-args", "", "extra worker arguments, space separated")
	var parallelism, backoff, ttl int
	flag.IntVar(&parallelism, "job-parallelism", 8, "pods running at once for one list")
	flag.IntVar(&backoff, "backoff-limit-per-index", 2, "retries of a failed shard")
	flag.IntVar(&ttl, "job-ttl-seconds", 3600, "how long a finished Job stays, once its outcome is in status")
	flag.Int64Var(&o.Pipeline.ShardBytes, "shard-bytes", o.Pipeline.ShardBytes, "target input bytes per shard")
	flag.IntVar(&o.Pipeline.MaxShards, "max-shards", o.Pipeline.MaxShards, "most shards per list")
	flag.Int64Var(&o.Pipeline.Limits.MaxExpandedBytes, "max-expanded-bytes", o.Pipeline.Limits.MaxExpandedBytes, "largest uncompressed size of a zipped list")
	flag.IntVar(&o.Pipeline.Limits.MaxRecordBytes, "max-record-bytes", o.Pipeline.Limits.MaxRecordBytes, "largest single row")
	flag.StringVar(&o.APINamespace, "api-namespace", "", "namespace where the REST API creates lists, the only one where source.uploadKey is honoured (default: --namespace)")
	flag.StringVar(&grants, "namespace-store-prefixes", "", "prefixes of the store namespaces may read through source.blobURL, e.g. team-a=imports/team-a/,team-b=imports/team-b/")
	flag.StringVar(&o.SourceAllowCIDRs, "source-allow-cidrs", "", "private ranges the S3 endpoints of credentialsSecretRef sources may resolve to, comma separated")
	flag.BoolVar(&o.KeepParts, "keep-parts", false, "keep the shards' intermediate parts after the merge (debugging)")
	flag.StringVar(&o.CallbackAllowCIDRs, "callback-allow-cidrs", "", "private ranges callbacks may reach, comma separated (e.g. 10.0.0.0/8)")
	flag.DurationVar(&o.SourceGrace, "source-grace", 0, "how long to wait for a missing list source (default 2m)")
	flag.IntVar(&o.MaxConcurrent, "max-concurrent-reconciles", 4, "lists reconciled at once")
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "metrics address (0 disables)")
	metricsSecure := flag.Bool("metrics-secure", true, "serve metrics over HTTPS behind TokenReview/SubjectAccessReview (false: plain HTTP, anyone)")
	flag.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics server (default: self-signed)")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "health probe address")
	flag.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader, for several replicas")
	var lo logging.Options
	lo.BindFlags(flag.CommandLine, logging.Options{Level: slog.LevelInfo, Format: logging.FormatJSON})
	flag.Parse()
	o.MetricsInsecure = !*metricsSecure
	slogger, lerr := logging.New(os.Stderr, lo)
	if lerr != nil {
		fmt.Fprintln(os.Stderr, lerr)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(slogger))
	log := ctrl.Log.WithName("setup")

	o.Job.Parallelism, o.Job.BackoffLimitPerIndex, o.Job.TTLSecondsAfterFinished = int32(parallelism), int32(backoff), int32(ttl)
	o.Job.ExtraArgs = strings.Fields(extraArgs)
	var err error
	if o.StoreGrants, err = blobstore.ParseGrants(grants); err != nil {
		log.Error(err, "bad --namespace-store-prefixes")
		os.Exit(2)
	}
	if o.Job.Resources, err = operator.WorkerResources(workerCPU, workerMemory, workerCPULimit); err != nil {
		log.Error(err, "bad worker resources")
		os.Exit(2)
	}
	if o.Job.NodeSelector, err = operator.ParseNodeSelector(nodeSelector); err != nil {
		log.Error(err, "bad --worker-node-selector")
		os.Exit(2)
	}
	if o.Job.Tolerations, err = operator.ParseTolerations(tolerations); err != nil {
		log.Error(err, "bad --worker-tolerations")
		os.Exit(2)
	}

	ctx := ctrl.SetupSignalHandler()
	mgr, err := operator.New(ctx, ctrl.GetConfigOrDie(), o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
