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
	ctrl "sigs.k8s.io/controller-runtime"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/logging"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	// The --config file holds every setting; the few flags are what
	// differs per process (docs/configuration.md).
	flag.String("config", "", "configuration file (kind Configuration, config.emaildata.io/v1alpha1; see docs/configuration.md)")
	printConfig := flag.Bool("print-config", false, "print the effective configuration (the --config file and its defaults; secrets redacted) and exit")
	conf, cerr := wiring.LoadConfig(wiring.ConfigPath(os.Args[1:]))
	if cerr != nil {
		fmt.Fprintln(os.Stderr, "configuration:", cerr)
		os.Exit(2)
	}
	f := bindAll(flag.CommandLine, conf)
	o, w, grants, metricsSecure, lo := &f.o, f.w, f.grants, f.metricsSecure, &f.lo
	flag.Parse()
	if *printConfig {
		os.Exit(wiring.PrintConfig(os.Stdout, conf, flag.CommandLine))
	}
	// Worker Jobs read the effective configuration (the flags given
	// included) by reference; an invalid one stops the manager here.
	if _, err := wiring.ApplyFlags(conf, flag.CommandLine); err != nil {
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
			log.Error(err, "bad namespaces.storePrefixes")
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

// bindAll binds the manager's flags on fs: only what differs per process
// or is conventional for controllers (bind addresses, leader election,
// logging; controller-runtime adds --kubeconfig). Every setting is the
// --config file's (docs/configuration.md; its migration table names each
// former flag's field).
func bindAll(fs *flag.FlagSet, conf *cfgv1.Configuration) *managerFlags {
	f := &managerFlags{}
	f.w = fromConfig(conf, &f.o)
	grants := formatGrants(conf.Namespaces.StorePrefixes)
	f.grants, f.metricsSecure = &grants, &conf.Metrics.Secure
	fs.StringVar(&f.o.MetricsAddr, "metrics-bind-address", ":8443", "metrics address (0 disables)")
	fs.StringVar(&f.o.ProbeAddr, "health-probe-bind-address", ":8081", "health probe address")
	fs.BoolVar(&f.o.LeaderElection, "leader-elect", false, "elect a leader, for several replicas")
	f.lo.BindFlags(fs, wiring.LoggingFrom(conf))
	return f
}

// workerFlags are the worker pod settings in the forms the operator's
// parsers take.
type workerFlags struct {
	cpu, memory, cpuLimit, extraArgs, pullPolicy string
	parallelism, backoff, ttl                    int
}

// fromConfig sets o from the configuration.
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

// apply parses the worker settings into o.Job; on error it also returns
// what to log.
func (w *workerFlags) apply(o *operator.Options) (string, error) {
	o.Job.Parallelism, o.Job.BackoffLimitPerIndex, o.Job.TTLSecondsAfterFinished = int32(w.parallelism), int32(w.backoff), int32(w.ttl)
	o.Job.ExtraArgs = strings.Fields(w.extraArgs)
	var err error
	if o.Job.ImagePullPolicy, err = operator.ParsePullPolicy(w.pullPolicy); err != nil {
		return "bad executor.jobs.imagePullPolicy", err
	}
	if o.Job.Resources, err = operator.WorkerResources(w.cpu, w.memory, w.cpuLimit); err != nil {
		return "bad worker resources", err
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
