// Command manager runs the emaildata controllers: it reconciles EmailList
// and Purchase resources and runs lists as Indexed Jobs.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	var o operator.Options
	o.Pipeline = pipeline.DefaultConfig()
	o.Verify = wiring.DefaultVerifyConfig()
	o.Verify.BindFlags(flag.CommandLine)
	w := bindWorkerFlags(flag.CommandLine, &o)
	grants, metricsSecure := bindManagerFlags(flag.CommandLine, &o)
	var lo logging.Options
	lo.BindFlags(flag.CommandLine, logging.Options{Level: slog.LevelInfo, Format: logging.FormatJSON})
	flag.Parse()
	if err := pipeline.CheckShardBy(o.Pipeline.ShardBy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o.MetricsInsecure = !*metricsSecure
	slogger, lerr := logging.New(os.Stderr, lo)
	if lerr != nil {
		fmt.Fprintln(os.Stderr, lerr)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(slogger))
	log := ctrl.Log.WithName("setup")
	o.Verify.Log = slogger

	var err error
	if o.StoreGrants, err = blobstore.ParseGrants(*grants); err != nil {
		log.Error(err, "bad --namespace-store-prefixes")
		os.Exit(2)
	}
	if what, err := w.apply(&o); err != nil {
		log.Error(err, what)
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

// workerFlags are the worker pod flags that need parsing after flag.Parse.
type workerFlags struct {
	cpu, memory, cpuLimit, nodeSelector, tolerations, extraArgs string
	pullPolicy                                                  string
	parallelism, backoff, ttl                                   int
}

// bindWorkerFlags binds the flags of the list Jobs and their pods.
func bindWorkerFlags(fs *flag.FlagSet, o *operator.Options) *workerFlags {
	w := &workerFlags{}
	fs.StringVar(&o.PeopleURL, "people-url", os.Getenv("PEOPLE_URL"), "reference people store for email_intelligence and email_append (bolt:///path.db or postgres://...)")
	fs.StringVar(&o.Namespace, "namespace", envOr("POD_NAMESPACE", listid.DefaultNamespace), "namespace of the operator (holds the list ID counter)")
	fs.StringVar(&o.Job.Namespace, "worker-namespace", "", "namespace the list Jobs run in, whatever the list's namespace (default: the operator's); the worker service account, --worker-env-secret and --store-pvc live there")
	fs.StringVar(&o.BlobURL, "blob-url", envOr("BLOB_URL", "file:///var/lib/emaildata/store"), "blob store URL (file://, s3://, gs://, azblob://)")
	fs.StringVar(&o.Executor, "executor", operator.ExecutorJob, "job (Kubernetes Jobs) or local (in-process)")
	fs.StringVar(&o.Job.Image, "worker-image", os.Getenv("WORKER_IMAGE"), "image of the worker Jobs")
	fs.StringVar(&w.pullPolicy, "worker-image-pull-policy", string(corev1.PullIfNotPresent), "imagePullPolicy of the worker Jobs' container: Always, IfNotPresent or Never")
	fs.DurationVar(&o.Job.ActiveDeadline, "worker-active-deadline", controllers.DefaultWorkerActiveDeadline, "longest a worker Job (a list's shards, a Dataset's import) may run before it is stopped and its list or Dataset fails with reason DeadlineExceeded (activeDeadlineSeconds, rounded up to seconds); negative: none")
	fs.StringVar(&o.Job.ServiceAccountName, "worker-service-account", "", "service account of worker pods, in the workers' namespace (default: its default account; no token is mounted either way)")
	fs.StringVar(&o.Job.EnvFromSecret, "worker-env-secret", "", "Secret whose keys become the workers' environment (store credentials)")
	fs.StringVar(&o.Job.StorePVC, "store-pvc", "", "PVC holding a file:// store, mounted into worker pods")
	fs.StringVar(&o.Job.StoreMountPath, "store-mount-path", "/var/lib/emaildata", "where the store PVC is mounted")
	fs.StringVar(&w.cpu, "worker-cpu", "500m", "CPU request of a worker pod")
	fs.StringVar(&w.memory, "worker-memory", operator.DefaultWorkerMemory, "memory request and limit of a worker pod")
	fs.StringVar(&w.cpuLimit, "worker-cpu-limit", "", "CPU limit of a worker pod (default: none)")
	fs.StringVar(&w.nodeSelector, "worker-node-selector", "", "node selector of worker pods: key=value,...")
	fs.StringVar(&w.tolerations, "worker-tolerations", "", "tolerations of worker pods: key=value:Effect, key:Effect, key or *, comma separated")
	fs.StringVar(&o.Job.PriorityClassName, "worker-priority-class", "", "priorityClassName of worker pods")
	fs.StringVar(&w.extraArgs, "worker-args", "", "extra worker arguments, space separated")
	fs.IntVar(&w.parallelism, "job-parallelism", 8, "pods running at once for one list")
	fs.IntVar(&w.backoff, "backoff-limit-per-index", 2, "retries of a failed shard")
	fs.IntVar(&w.ttl, "job-ttl-seconds", 3600, "how long a finished Job stays, once its outcome is in status")
	return w
}

// bindManagerFlags binds the pipeline, source, callback, metrics and
// election flags; it returns the two that need parsing after flag.Parse.
func bindManagerFlags(fs *flag.FlagSet, o *operator.Options) (grants *string, metricsSecure *bool) {
	fs.Int64Var(&o.Pipeline.ShardBytes, "shard-bytes", o.Pipeline.ShardBytes, "target input bytes per shard")
	fs.IntVar(&o.Pipeline.MaxShards, "max-shards", o.Pipeline.MaxShards, "most shards per list")
	pipeline.BindShardBy(fs, &o.Pipeline.ShardBy, pipeline.ShardByDomain)
	fs.Int64Var(&o.Pipeline.DistributeMemory, "distribute-memory", o.Pipeline.DistributeMemory, "memory holding rows while preparation regroups them by domain shard (--shard-by domain), in bytes, shared by the lists prepared at once; past it runs spill to the store")
	fs.Int64Var(&o.Pipeline.DedupMemory, "dedup-memory", o.Pipeline.DedupMemory, "memory of the duplicate search at preparation, in bytes, shared by the lists prepared at once (--max-concurrent-reconciles); past it sorted runs spill to the store")
	o.Pipeline.Limits.BindFlags(fs) // the API's flags of the same names: one setting
	fs.StringVar(&o.APINamespace, "api-namespace", "", "namespace where the REST API creates lists, the only one where source.uploadKey is honoured (default: --namespace)")
	grants = fs.String("namespace-store-prefixes", "", "prefixes of the store namespaces may read through source.blobURL, e.g. team-a=imports/team-a/,team-b=imports/team-b/")
	fs.StringVar(&o.SourceAllowCIDRs, "source-allow-cidrs", "", "private ranges the S3 endpoints of credentialsSecretRef sources may resolve to, comma separated")
	fs.BoolVar(&o.KeepParts, "keep-parts", false, "keep the shards' intermediate parts after the merge (debugging)")
	fs.StringVar(&o.CallbackAllowCIDRs, "callback-allow-cidrs", "", "private ranges callbacks may reach, comma separated (e.g. 10.0.0.0/8)")
	o.Secrets.BindFlags(fs) // the API's flags of the same names: one setting
	o.Secrets.BindManagerFlags(fs)
	fs.StringVar(&o.ListIDConfigMap, "list-id-configmap", listid.DefaultConfigMap, "the list ID counter ConfigMap in --namespace (the API's flag of the same name)")
	fs.Func("watch-namespaces", "reconcile lists, Purchases and Datasets only in these namespaces (comma separated) and in --namespace and --api-namespace; default: every namespace", func(v string) error {
		o.WatchNamespaces = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				return fmt.Errorf("namespace %q: %s", n, strings.Join(errs, "; "))
			}
			o.WatchNamespaces = append(o.WatchNamespaces, n)
		}
		return nil
	})
	fs.DurationVar(&o.SourceGrace, "source-grace", 0, "how long to wait for a missing list source (default 2m)")
	fs.DurationVar(&o.OrphanUploadAge, "orphan-upload-age", controllers.DefaultOrphanUploadAge, "remove an upload no list names once nothing has written it for this long (what an API killed mid-upload leaves); negative: never")
	fs.DurationVar(&o.UploadSweepInterval, "upload-sweep-interval", controllers.DefaultUploadSweepInterval, "how often the store's uploads folder is swept for orphaned uploads")
	fs.DurationVar(&o.PodStartGrace, "pod-start-grace", 0, "how long a worker pod may be unable to start (image pull, missing binary, no node fits) before its list or Dataset fails (default 2m; raise it where nodes are added on demand)")
	fs.IntVar(&o.MaxConcurrent, "max-concurrent-reconciles", 4, "lists reconciled at once")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "metrics address (0 disables)")
	metricsSecure = fs.Bool("metrics-secure", true, "serve metrics over HTTPS behind TokenReview/SubjectAccessReview (false: plain HTTP, anyone)")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics server (default: self-signed)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "health probe address")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader, for several replicas")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", operator.DefaultLeaderElectionID, "name of the leader election Lease in --namespace, one per installation")
	return grants, metricsSecure
}

// apply parses the worker flags into o.Job; on error it also returns what
// to log.
func (w *workerFlags) apply(o *operator.Options) (string, error) {
	o.Job.Parallelism, o.Job.BackoffLimitPerIndex, o.Job.TTLSecondsAfterFinished = int32(w.parallelism), int32(w.backoff), int32(w.ttl)
	o.Job.ExtraArgs = strings.Fields(w.extraArgs)
	var err error
	if o.Job.ImagePullPolicy, err = operator.ParsePullPolicy(w.pullPolicy); err != nil {
		return "bad --worker-image-pull-policy", err
	}
	if o.Job.Resources, err = operator.WorkerResources(w.cpu, w.memory, w.cpuLimit); err != nil {
		return "bad worker resources", err
	}
	if o.Job.NodeSelector, err = operator.ParseNodeSelector(w.nodeSelector); err != nil {
		return "bad --worker-node-selector", err
	}
	if o.Job.Tolerations, err = operator.ParseTolerations(w.tolerations); err != nil {
		return "bad --worker-tolerations", err
	}
	return "", nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
