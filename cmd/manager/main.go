// Command manager runs the emaildata controllers: it reconciles EmailList
// and Purchase resources and runs lists as Indexed Jobs.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	// The --config file gives every flag its default; a flag given
	// overrides it (the flags go in stages, see docs/configuration.md).
	flag.String("config", "", "configuration file (kind Configuration, config.emaildata.io/v1alpha1; see docs/configuration.md)")
	printConfig := flag.Bool("print-config", false, "print the effective configuration (the --config file, its defaults and the flags given; secrets redacted) and exit")
	conf, cerr := wiring.LoadConfig(wiring.ConfigPath(os.Args[1:]))
	if cerr != nil {
		fmt.Fprintln(os.Stderr, "configuration:", cerr)
		os.Exit(2)
	}
	f := bindAll(flag.CommandLine, conf)
	o, w, grants, metricsSecure, lo := &f.o, f.w, f.grants, f.metricsSecure, &f.lo
	flag.Parse()
	if *printConfig {
		os.Exit(wiring.PrintConfig(os.Stdout, conf, flag.CommandLine, false))
	}
	// Worker Jobs read the effective configuration (the flags given
	// included) by reference; an invalid one stops the manager here.
	if _, err := wiring.ApplyFlags(conf, flag.CommandLine, false); err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		os.Exit(2)
	}
	if o.Executor == operator.ExecutorJob {
		var err error
		if o.WorkerConfig, err = wiring.WorkerConfig(conf); err != nil {
			fmt.Fprintln(os.Stderr, "configuration:", err)
			os.Exit(2)
		}
	}
	if err := pipeline.CheckShardBy(o.Pipeline.ShardBy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o.MetricsInsecure = !*metricsSecure
	slogger, lerr := logging.New(os.Stderr, *lo)
	if lerr != nil {
		fmt.Fprintln(os.Stderr, lerr)
		os.Exit(2)
	}
	ctrl.SetLogger(logging.Logr(slogger))
	log := ctrl.Log.WithName("setup")
	o.Verify.Log = slogger

	var err error
	if *grants != "" {
		if o.StoreGrants, err = blobstore.ParseGrants(*grants); err != nil {
			log.Error(err, "bad --namespace-store-prefixes")
			os.Exit(2)
		}
	}
	if what, err := w.apply(o); err != nil {
		log.Error(err, what)
		os.Exit(2)
	}

	ctx := ctrl.SetupSignalHandler()
	mgr, err := operator.New(ctx, ctrl.GetConfigOrDie(), *o)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// managerFlags are the manager's flags, bound with the configuration's
// values as defaults.
type managerFlags struct {
	o             operator.Options
	w             *workerFlags
	grants        *string
	metricsSecure *bool
	lo            logging.Options
}

// bindAll binds every flag of the manager on fs.
func bindAll(fs *flag.FlagSet, conf *cfgv1.Configuration) *managerFlags {
	f := &managerFlags{}
	f.w = fromConfig(conf, &f.o)
	f.o.Verify.BindFlags(fs)
	bindWorkerFlags(fs, &f.o, f.w)
	f.grants, f.metricsSecure = bindManagerFlags(fs, &f.o, conf)
	f.lo.BindFlags(fs, wiring.LoggingFrom(conf))
	return f
}

// workerFlags are the worker pod flags that need parsing after flag.Parse.
type workerFlags struct {
	cpu, memory, cpuLimit, nodeSelector, tolerations, extraArgs string
	pullPolicy                                                  string
	parallelism, backoff, ttl                                   int
}

// fromConfig sets o from the configuration; the flags bound next start
// from its values.
func fromConfig(c *cfgv1.Configuration, o *operator.Options) *workerFlags {
	o.Pipeline = pipeline.Config{
		Limits: wiring.LimitsFrom(c), ShardBytes: c.Pipeline.ShardBytes.Value(), MaxShards: c.Pipeline.MaxShards,
		ShardBy: c.Pipeline.ShardBy, MXLookupTimeout: c.Pipeline.MXLookupTimeout.Duration, MXLookupBudget: c.Pipeline.MXLookupBudget.Duration,
		MXLookupConcurrency: c.Pipeline.MXLookupConcurrency,
		DistributeMemory:    c.Pipeline.DistributeMemory.Value(), DedupMemory: c.Pipeline.DedupMemory.Value(),
	}
	o.Verify = wiring.VerifyFrom(c)
	o.PeopleURL, o.BlobURL, o.Executor = c.People.URL, c.Store.URL, c.Executor.Mode
	o.Namespace, o.Job.Namespace, o.APINamespace = c.Namespaces.Operator, c.Namespaces.Workers, c.Namespaces.Lists
	o.WatchNamespaces = c.Namespaces.Watch
	j := c.Executor.Jobs
	o.Job.Image, o.Job.ActiveDeadline, o.Job.ServiceAccountName = j.Image, j.ActiveDeadline.Duration, j.ServiceAccountName
	o.Job.EnvFromSecret, o.Job.StorePVC, o.Job.StoreMountPath = j.EnvFromSecret, c.Store.PVC, c.Store.MountPath
	o.Job.PriorityClassName, o.Job.NodeSelector, o.Job.Tolerations = j.PriorityClassName, j.NodeSelector, tolerations(j.Tolerations)
	o.SourceAllowCIDRs, o.KeepParts = strings.Join(c.Manager.SourceAllowCIDRs, ","), c.Store.KeepParts
	o.CallbackAllowCIDRs, o.ListIDConfigMap = strings.Join(c.Manager.CallbackAllowCIDRs, ","), c.Installation.ListIDConfigMap
	o.Secrets = wiring.SecretsFrom(c)
	o.SourceGrace, o.PodStartGrace, o.MaxConcurrent = c.Manager.SourceGrace.Duration, j.PodStartGrace.Duration, c.Executor.MaxConcurrentReconciles
	o.OrphanUploadAge, o.UploadSweepInterval = c.Store.OrphanUploadAge.Duration, c.Store.UploadSweepInterval.Duration
	o.MetricsCertDir, o.LeaderElectionID = c.Metrics.CertDir, c.Manager.LeaderElectionID
	w := &workerFlags{cpu: j.Resources.CPU.String(), memory: j.Resources.Memory.String(), pullPolicy: j.ImagePullPolicy,
		extraArgs: strings.Join(j.ExtraArgs, " "), parallelism: int(j.Parallelism), backoff: int(j.BackoffLimitPerIndex),
		ttl: int(j.TTLAfterFinished.Seconds())}
	if !j.Resources.CPULimit.IsZero() {
		w.cpuLimit = j.Resources.CPULimit.String()
	}
	return w
}

// bindWorkerFlags binds the flags of the list Jobs and their pods.
func bindWorkerFlags(fs *flag.FlagSet, o *operator.Options, w *workerFlags) {
	fs.StringVar(&o.PeopleURL, "people-url", o.PeopleURL, "reference people store for email_intelligence and email_append (bolt:///path.db or postgres://...)")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the operator (holds the list ID counter)")
	fs.StringVar(&o.Job.Namespace, "worker-namespace", o.Job.Namespace, "namespace the list Jobs run in, whatever the list's namespace (default: the operator's); the worker service account, --worker-env-secret and --store-pvc live there")
	fs.StringVar(&o.BlobURL, "blob-url", o.BlobURL, "blob store URL (file://, s3://, gs://, azblob://)")
	fs.StringVar(&o.Executor, "executor", o.Executor, "job (Kubernetes Jobs) or local (in-process)")
	fs.StringVar(&o.Job.Image, "worker-image", o.Job.Image, "image of the worker Jobs")
	fs.StringVar(&w.pullPolicy, "worker-image-pull-policy", w.pullPolicy, "imagePullPolicy of the worker Jobs' container: Always, IfNotPresent or Never")
	fs.DurationVar(&o.Job.ActiveDeadline, "worker-active-deadline", o.Job.ActiveDeadline, "longest a worker Job (a list's shards, a Dataset's import) may run before it is stopped and its list or Dataset fails with reason DeadlineExceeded (activeDeadlineSeconds, rounded up to seconds); negative: none")
	fs.StringVar(&o.Job.ServiceAccountName, "worker-service-account", o.Job.ServiceAccountName, "service account of worker pods, in the workers' namespace (default: its default account; no token is mounted either way)")
	fs.StringVar(&o.Job.EnvFromSecret, "worker-env-secret", o.Job.EnvFromSecret, "Secret whose keys become the workers' environment (store credentials)")
	fs.StringVar(&o.Job.StorePVC, "store-pvc", o.Job.StorePVC, "PVC holding a file:// store, mounted into worker pods")
	fs.StringVar(&o.Job.StoreMountPath, "store-mount-path", o.Job.StoreMountPath, "where the store PVC is mounted")
	fs.StringVar(&w.cpu, "worker-cpu", w.cpu, "CPU request of a worker pod")
	fs.StringVar(&w.memory, "worker-memory", w.memory, "memory request and limit of a worker pod")
	fs.StringVar(&w.cpuLimit, "worker-cpu-limit", w.cpuLimit, "CPU limit of a worker pod (default: none)")
	fs.StringVar(&w.nodeSelector, "worker-node-selector", "", "node selector of worker pods: key=value,... (replaces the file's)")
	fs.StringVar(&w.tolerations, "worker-tolerations", "", "tolerations of worker pods: key=value:Effect, key:Effect, key or *, comma separated (replaces the file's)")
	fs.StringVar(&o.Job.PriorityClassName, "worker-priority-class", o.Job.PriorityClassName, "priorityClassName of worker pods")
	fs.StringVar(&w.extraArgs, "worker-args", w.extraArgs, "extra worker arguments, space separated")
	fs.IntVar(&w.parallelism, "job-parallelism", w.parallelism, "pods running at once for one list")
	fs.IntVar(&w.backoff, "backoff-limit-per-index", w.backoff, "retries of a failed shard")
	fs.IntVar(&w.ttl, "job-ttl-seconds", w.ttl, "how long a finished Job stays, once its outcome is in status")
}

// bindManagerFlags binds the pipeline, source, callback, metrics and
// election flags; it returns the two that need parsing after flag.Parse.
func bindManagerFlags(fs *flag.FlagSet, o *operator.Options, c *cfgv1.Configuration) (grants *string, metricsSecure *bool) {
	fs.Int64Var(&o.Pipeline.ShardBytes, "shard-bytes", o.Pipeline.ShardBytes, "target input bytes per shard")
	fs.IntVar(&o.Pipeline.MaxShards, "max-shards", o.Pipeline.MaxShards, "most shards per list")
	pipeline.BindShardBy(fs, &o.Pipeline.ShardBy, o.Pipeline.ShardBy)
	fs.Int64Var(&o.Pipeline.DistributeMemory, "distribute-memory", o.Pipeline.DistributeMemory, "memory holding rows while preparation regroups them by domain shard (--shard-by domain), in bytes, shared by the lists prepared at once; past it runs spill to the store")
	fs.Int64Var(&o.Pipeline.DedupMemory, "dedup-memory", o.Pipeline.DedupMemory, "memory of the duplicate search at preparation, in bytes, shared by the lists prepared at once (--max-concurrent-reconciles); past it sorted runs spill to the store")
	o.Pipeline.Limits.BindFlags(fs) // the API's flags of the same names: one setting
	fs.StringVar(&o.APINamespace, "api-namespace", o.APINamespace, "namespace where the REST API creates lists, the only one where source.uploadKey is honoured (default: --namespace)")
	grants = fs.String("namespace-store-prefixes", formatGrants(c.Namespaces.StorePrefixes), "prefixes of the store namespaces may read through source.blobURL, e.g. team-a=imports/team-a/,team-b=imports/team-b/ (replaces the file's)")
	fs.StringVar(&o.SourceAllowCIDRs, "source-allow-cidrs", o.SourceAllowCIDRs, "private ranges the S3 endpoints of credentialsSecretRef sources may resolve to, comma separated")
	fs.BoolVar(&o.KeepParts, "keep-parts", o.KeepParts, "keep the shards' intermediate parts after the merge (debugging)")
	fs.StringVar(&o.CallbackAllowCIDRs, "callback-allow-cidrs", o.CallbackAllowCIDRs, "private ranges callbacks may reach, comma separated (e.g. 10.0.0.0/8)")
	o.Secrets.BindFlags(fs) // the API's flags of the same names: one setting
	o.Secrets.BindManagerFlags(fs)
	fs.StringVar(&o.ListIDConfigMap, "list-id-configmap", o.ListIDConfigMap, "the list ID counter ConfigMap in --namespace (the API's flag of the same name)")
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
	fs.DurationVar(&o.SourceGrace, "source-grace", o.SourceGrace, "how long to wait for a missing list source")
	fs.DurationVar(&o.OrphanUploadAge, "orphan-upload-age", o.OrphanUploadAge, "remove an upload no list names once nothing has written it for this long (what an API killed mid-upload leaves); negative: never")
	fs.DurationVar(&o.UploadSweepInterval, "upload-sweep-interval", o.UploadSweepInterval, "how often the store's uploads folder is swept for orphaned uploads")
	fs.DurationVar(&o.PodStartGrace, "pod-start-grace", o.PodStartGrace, "how long a worker pod may be unable to start (image pull, missing binary, no node fits) before its list or Dataset fails (raise it where nodes are added on demand)")
	fs.IntVar(&o.MaxConcurrent, "max-concurrent-reconciles", o.MaxConcurrent, "lists reconciled at once")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "metrics address (0 disables)")
	metricsSecure = fs.Bool("metrics-secure", c.Metrics.Secure, "serve metrics over HTTPS behind TokenReview/SubjectAccessReview (false: plain HTTP, anyone)")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "directory with tls.crt and tls.key for the metrics server (default: self-signed)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "health probe address")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader, for several replicas")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election Lease in --namespace, one per installation")
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
	if w.nodeSelector != "" {
		if o.Job.NodeSelector, err = operator.ParseNodeSelector(w.nodeSelector); err != nil {
			return "bad --worker-node-selector", err
		}
	}
	if w.tolerations != "" {
		if o.Job.Tolerations, err = operator.ParseTolerations(w.tolerations); err != nil {
			return "bad --worker-tolerations", err
		}
	}
	return "", nil
}

// formatGrants writes namespaces.storePrefixes as the flag's value, which
// blobstore.ParseGrants checks.
func formatGrants(m map[string]string) string {
	var out []string
	for ns, prefix := range m {
		out = append(out, ns+"="+prefix)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// tolerations are the configuration's tolerations as the pod's.
func tolerations(ts []cfgv1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds})
	}
	return out
}
