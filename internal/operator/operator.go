// Package operator assembles the controller manager: the scheme, caches,
// controllers, executor and health endpoints. cmd/manager and the local
// stack both run it.
package operator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/peoplelist"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/wiring"
)

// DefaultLeaderElectionID names the leader election Lease of the
// installation config/default and the chart's release "emaildata" make.
var DefaultLeaderElectionID = cfgv1.Default().Manager.LeaderElectionID

// Executor kinds.
const (
	ExecutorJob   = "job"
	ExecutorLocal = "local"
)

// Options configure the manager.
type Options struct {
	// Namespace the operator runs in; it holds the list ID counter, and is
	// the only namespace whose Datasets are honoured.
	Namespace string
	// APINamespace is where the REST API creates lists, the only namespace
	// where source.uploadKey is honoured (Namespace when empty).
	APINamespace string
	// StoreGrants lets namespaces read a prefix of the store through
	// source.blobURL, as an administrator declared (--namespace-store-prefixes).
	StoreGrants blobstore.Grants
	// SourceAllowCIDRs opens private ranges to the S3 endpoints that lists
	// read with their own credentials (SSRF guard), comma separated.
	SourceAllowCIDRs string
	// KeepParts keeps the shards' intermediate objects after the merge.
	KeepParts bool
	// ListIDConfigMap is the counter's name.
	ListIDConfigMap string
	// BlobURL names the store; Store, when set, is used instead.
	BlobURL string
	Store   *blobstore.Store
	// Registry of list services; built from Verify when nil.
	Registry *listservice.Registry
	// Verify configures the verification engine of email_validation lists;
	// Job workers get the same settings by reference (WorkerConfig).
	Verify wiring.VerifyConfig
	// WorkerConfig is the configuration file list workers read by
	// reference, a ConfigMap (wiring.WorkerConfig: the manager's, without
	// secrets). When empty, the Job path writes Verify, the input limits,
	// BlobURL and PeopleURL into one (wiring.WorkerConfigOf): Jobs never
	// get settings as arguments.
	WorkerConfig []byte
	// PeopleURL names the reference people store for email_intelligence and
	// email_append (passed on to workers); People, when set, is used instead
	// (with PostalFinder for email_append).
	PeopleURL    string
	People       people.Store
	PostalFinder peoplelist.PostalFinder
	// Executor is "job" (default) or "local".
	Executor string
	// LocalConcurrency caps in-process shards for the local executor.
	LocalConcurrency int
	Job              controllers.JobConfig
	Pipeline         pipeline.Config
	// CallbackAllowCIDRs opens private ranges to callbacks, comma separated.
	CallbackAllowCIDRs string
	CallbackBackoff    callback.Backoff
	// Secrets names the installation secrets in Namespace (the list ID key,
	// the callback signing key, the verification and fraud history keys):
	// the elected manager makes the missing ones at start, except those
	// the installer provides (Secrets.External). The verification
	// history's key is read (and made when missing) before the manager
	// starts when Verify opens a history (historyKey); worker Jobs take it
	// from that Secret.
	Secrets installsecret.Config
	// SecretsRecheck is how often a missing external installation secret
	// is looked for again (default 30s).
	SecretsRecheck time.Duration
	SourceGrace    time.Duration
	PollInterval   time.Duration
	MaxConcurrent  int

	// OrphanUploadAge is how long an upload nothing writes and no list
	// names stays in the store before the manager removes it (what an API
	// killed mid-upload leaves); controllers.DefaultOrphanUploadAge when
	// zero, never removed when negative. UploadSweepInterval is how often
	// the uploads folder is looked at (DefaultUploadSweepInterval).
	OrphanUploadAge     time.Duration
	UploadSweepInterval time.Duration

	// PodStartGrace is how long a worker pod may be unable to start (an
	// image that cannot be pulled, a missing binary, no node that fits)
	// before its list or Dataset fails (default 2m).
	PodStartGrace time.Duration

	// Clock tells the reconcilers, the Job executor and loader and the
	// upload sweeper the time: their grace periods, backoffs and status
	// timestamps (wiring.ProcessClock when nil). Tests give a fake one to
	// pass a grace period without waiting it out; requeues and the
	// shards' progress throttle (Pipeline.Clock) keep the wall clock.
	Clock clock.PassiveClock

	// WatchNamespaces limits the manager to these namespaces (all when
	// empty): it then reconciles EmailLists, Purchases and Datasets, and
	// reads ConfigMaps and list Secrets, there and in Namespace and
	// APINamespace only (which it always watches), so that its RBAC can be
	// Roles in those namespaces instead of ClusterRoles (the chart's
	// watchNamespaces; docs/install.md).
	WatchNamespaces []string

	// LeaderElectionID names the leader election Lease in Namespace
	// (default DefaultLeaderElectionID); one per installation.
	LeaderElectionID string

	// SkipNameValidation allows several managers in one process (tests).
	SkipNameValidation bool

	MetricsAddr string
	// MetricsInsecure serves metrics over plain HTTP without authn/authz
	// (default: HTTPS behind TokenReview and SubjectAccessReview).
	MetricsInsecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics server
	// (default: a self-signed certificate).
	MetricsCertDir string
	ProbeAddr      string
	LeaderElection bool
	// ReleaseLeaseOnStop gives the leader election Lease up when Start
	// returns, so that the next manager need not wait for it to expire
	// (15 s). Only for a caller that does nothing of the manager's after
	// Start returns: tests that stop a manager and start another.
	ReleaseLeaseOnStop bool
}

// Defaults fills unset options.
func (o *Options) Defaults() {
	if o.Namespace == "" {
		o.Namespace = listid.DefaultNamespace
	}
	if o.APINamespace == "" {
		o.APINamespace = o.Namespace
	}
	if o.ListIDConfigMap == "" {
		o.ListIDConfigMap = listid.DefaultConfigMap
	}
	if o.Executor == "" {
		o.Executor = ExecutorJob
	}
	if o.LocalConcurrency == 0 {
		o.LocalConcurrency = 4
	}
	if o.Pipeline.ShardBytes == 0 {
		o.Pipeline = pipeline.DefaultConfig()
	}
	if o.Pipeline.Clock == nil {
		o.Pipeline.Clock = wiring.ProcessClock()
	}
	if o.Clock == nil {
		o.Clock = wiring.ProcessClock()
	}
	if o.SecretsRecheck <= 0 {
		o.SecretsRecheck = 30 * time.Second
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.CallbackBackoff.Attempts == 0 {
		o.CallbackBackoff = callback.Backoff{Base: 5 * time.Second, Max: 5 * time.Minute, Attempts: 8}
	}
	if o.SourceGrace == 0 {
		o.SourceGrace = 2 * time.Minute
	}
	if o.OrphanUploadAge == 0 {
		o.OrphanUploadAge = controllers.DefaultOrphanUploadAge
	}
	if o.UploadSweepInterval <= 0 {
		o.UploadSweepInterval = controllers.DefaultUploadSweepInterval
	}
	if o.PodStartGrace == 0 {
		o.PodStartGrace = controllers.DefaultPodStartGrace
	}
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 4
	}
	if o.Job.BackoffLimitPerIndex == 0 {
		o.Job.BackoffLimitPerIndex = 2
	}
	if o.Job.TTLSecondsAfterFinished == 0 {
		o.Job.TTLSecondsAfterFinished = 3600
	}
	if o.Job.Parallelism == 0 {
		o.Job.Parallelism = 8
	}
	// Zero is unset; a negative deadline stays: no deadline.
	if o.Job.ActiveDeadline == 0 {
		o.Job.ActiveDeadline = controllers.DefaultWorkerActiveDeadline
	}
	if o.Job.BlobURL == "" {
		o.Job.BlobURL = o.BlobURL
	}
	if o.Job.Namespace == "" {
		o.Job.Namespace = o.Namespace
	}
}

// New builds a manager with the controllers wired in.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	o.Defaults()
	scheme := kubescheme.New()
	mgr, err := newManager(cfg, o, scheme)
	if err != nil {
		return nil, err
	}
	// Before the engine: it opens the history with this key.
	if err := historyKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), &o); err != nil {
		return nil, err
	}
	store, ps, reg, engine, err := openEngines(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := configureWorkers(mgr, &o, store); err != nil {
		return nil, err
	}
	policy, sourceClient, err := httpPolicies(o)
	if err != nil {
		return nil, err
	}
	exec, loader, err := executors(ctx, mgr, o, scheme, store, reg, ps)
	if err != nil {
		return nil, err
	}
	if err := controllers.IndexFields(ctx, mgr); err != nil {
		return nil, err
	}
	lists := &controllers.EmailListReconciler{
		Clock:     o.Clock,
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    scheme,
		Recorder:  mgr.GetEventRecorder("emaildata-manager"),
		Store:     store,
		Registry:  reg,
		Executor:  exec,
		IDs: &listid.Allocator{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(),
			Namespace: o.Namespace, Name: o.ListIDConfigMap, Obscure: true, KeySecret: o.Secrets.Name(installsecret.ListIDKey)},
		Pipeline:      o.Pipeline.SharedBy(o.MaxConcurrent),
		SourceGrace:   o.SourceGrace,
		PodStartGrace: o.PodStartGrace,
		PollInterval:  o.PollInterval,
		Callbacks: controllers.CallbackConfig{Client: policy.Client(callback.DefaultTimeout), Backoff: o.CallbackBackoff,
			SigningNamespace: o.Namespace, SigningSecret: o.Secrets.Name(installsecret.CallbackSigning)},
		Access: controllers.SourceAccess{
			APINamespace: o.APINamespace, Grants: o.StoreGrants,
			HTTPClient: sourceClient, MaxBytes: o.Pipeline.Limits.MaxExpandedBytes,
		},
		KeepParts:   o.KeepParts,
		FleetHealth: wiring.FleetHealth(engine),
	}
	if err := lists.SetupWithManager(mgr, o.MaxConcurrent); err != nil {
		return nil, fmt.Errorf("set up emaillist controller: %w", err)
	}
	if err := setupOthers(mgr, o, scheme, store, loader); err != nil {
		return nil, err
	}
	if err := mgr.Add(&installationSecrets{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), namespace: o.Namespace,
		cfg: o.Secrets, interval: o.SecretsRecheck}); err != nil {
		return nil, fmt.Errorf("set up the installation secrets: %w", err)
	}
	if o.OrphanUploadAge > 0 {
		if err := mgr.Add(&controllers.UploadSweeper{Reader: mgr.GetAPIReader(), Namespace: o.APINamespace, Store: store,
			MaxAge: o.OrphanUploadAge, Interval: o.UploadSweepInterval, Clock: o.Clock}); err != nil {
			return nil, fmt.Errorf("set up the upload sweeper: %w", err)
		}
	}
	logf.FromContext(ctx).Info("manager configured", "executor", o.Executor, "namespace", o.Namespace,
		"apiNamespace", o.APINamespace, "watchNamespaces", watched(o), "storeGrants", o.StoreGrants.String())
	return mgr, nil
}

// newManager creates the manager with its caches, metrics and leader election.
func newManager(cfg *rest.Config, o Options, scheme *runtime.Scheme) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElection,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: ptr.To(o.SkipNameValidation)},
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: o.ReleaseLeaseOnStop,
		Cache: cache.Options{DefaultNamespaces: namespaces(watched(o)), ByObject: map[client.Object]cache.ByObject{
			// Only our worker Jobs, not every Job in the cluster, and only
			// where they run: list Jobs in the workers' namespace, Dataset
			// Jobs beside their Dataset, in the operator's. The manager's
			// Role there allows no more (no Job access anywhere else).
			&batchv1.Job{}: {Label: workerSelector, Namespaces: namespaces(uniq(o.Job.Namespace, o.Namespace))},
			// And only their pods (read to see one that cannot start).
			&corev1.Pod{}: {Label: workerSelector, Namespaces: namespaces(uniq(o.Job.Namespace, o.Namespace))},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// openEngines opens the blob store, the people store where it is used
// in-process, and the list service registry (with its verification engine,
// nil for a given registry).
func openEngines(ctx context.Context, o Options) (*blobstore.Store, people.Store, *listservice.Registry, *verify.Engine, error) {
	var err error
	store := o.Store
	if store == nil {
		if store, err = blobstore.Open(ctx, o.BlobURL); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	// The people store is opened in-process only where it is used: by the
	// list services of the built-in registry, and by the local Dataset
	// loader (Job workers open it themselves from PeopleURL).
	ps := o.People
	if ps == nil && o.PeopleURL != "" && (o.Registry == nil || o.Executor == ExecutorLocal) {
		if ps, err = people.Open(ctx, o.PeopleURL); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	reg := o.Registry
	var engine *verify.Engine
	if reg == nil {
		engine, err = wiring.NewEngine(ctx, o.Verify)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		vc := o.Verify
		if o.Executor == ExecutorLocal { // shards run in this process
			vc = vc.SharedBy(o.LocalConcurrency)
		}
		reg = wiring.RegistryFor(engine, vc)
		// On the Job path these services run in workers, which open
		// PeopleURL themselves: without one, lists asking for them fail at
		// preparation ("not available") instead of in every shard.
		if ps != nil && (o.Executor != ExecutorJob || o.PeopleURL != "") {
			wiring.RegisterPeople(reg, ps, o.PostalFinder)
		}
	}
	return store, ps, reg, engine, nil
}

// configureWorkers gives the Job workers their configuration by
// reference and, on the Job path, publishes the list extensions to the
// store.
func configureWorkers(mgr ctrl.Manager, o *Options, store *blobstore.Store) error {
	if o.Executor == ExecutorJob && o.Verify.ListsDir != "" {
		// Job pods cannot mount the operator namespace's ConfigMap: publish
		// the extensions to the store, where workers read them.
		o.Verify.ListsBlobKey = wiring.ListsBlobKey
		dir := o.Verify.ListsDir
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			wiring.RunListsPublisher(ctx, store, dir, wiring.ListsBlobKey, 30*time.Second, func(err error) {
				logf.FromContext(ctx).Error(err, "publish list extensions")
			})
			return nil
		})); err != nil {
			return err
		}
	}
	setSMTPBudget(o)
	if o.Executor != ExecutorJob {
		return nil
	}
	// By reference: the workers read the manager's configuration from a
	// ConfigMap (the limits included), their per-list values from their
	// environment, and URLs with a password from --worker-env-secret's
	// Secret (WorkerConfig leaves them out). Given values rather than a
	// file (the local stack, tests), the manager writes them into one.
	if len(o.WorkerConfig) == 0 {
		wc, err := wiring.WorkerConfigOf(o.Verify, o.Pipeline.Limits, o.BlobURL, o.PeopleURL)
		if err != nil {
			return fmt.Errorf("worker configuration: %w", err)
		}
		o.WorkerConfig = wc
	}
	o.Job.WorkerConfig, o.Job.FleetRequired = o.WorkerConfig, o.Verify.Fleet.Required
	var omitted []string
	for _, u := range []struct{ name, url string }{{"fleet.url", o.Verify.Fleet.URL}, {"verification.history.url", o.Verify.HistoryURL},
		{"store.url", o.BlobURL}, {"people.url", o.PeopleURL}} {
		if cfgv1.HasPassword(u.url) {
			omitted = append(omitted, u.name)
		}
	}
	if len(omitted) > 0 {
		mgr.GetLogger().Info("left out of the workers' configuration because their URLs hold a password: workers read them from executor.jobs.envFromSecret's Secret", "fields", omitted)
	}
	return nil
}

// setSMTPBudget sets the Job pods' share of each mail host's budget.
// Without a fleet backend holding them, pods divide it. With one, every
// pod takes its connection slots and rates from it and gets the whole
// budget; --fleet-required makes a pod that did not get the URL (it
// travels in --worker-env-secret when it holds a password) fail rather
// than spend the budget alone.
func setSMTPBudget(o *Options) {
	if !o.Verify.SMTP || o.Verify.DNSServer == "off" {
		return
	}
	shared := o.Verify.Fleet.URL != ""
	o.Job.SMTPBudget = controllers.SMTPBudget{Conns: max(1, o.Verify.Probe.MaxConnsPerHost), Rate: o.Verify.Probe.RatePerHost, Shared: shared}
	if o.Job.SMTPBudget.Rate <= 0 {
		o.Job.SMTPBudget.Rate = 5
	}
	o.Verify.Fleet.Required = o.Verify.Fleet.Required || shared
}

// httpPolicies parses the callback allow list and builds the client that
// reads lists' own S3 sources.
func httpPolicies(o Options) (callback.Policy, *http.Client, error) {
	policy, err := callback.ParsePolicy(o.CallbackAllowCIDRs)
	if err != nil {
		return callback.Policy{}, nil, fmt.Errorf("callback allow list: %w", err)
	}
	sourcePolicy, err := callback.ParsePolicy(o.SourceAllowCIDRs)
	if err != nil {
		return callback.Policy{}, nil, fmt.Errorf("source allow list: %w", err)
	}
	// Reading a user's bucket can take long: only connecting and the
	// response headers are timed; the copy is bounded by size and context.
	sourceClient := *sourcePolicy.Client(30 * time.Second)
	sourceClient.Timeout = 0
	return policy, &sourceClient, nil
}

// executors picks the shard executor and the Dataset loader.
func executors(ctx context.Context, mgr ctrl.Manager, o Options, scheme *runtime.Scheme, store *blobstore.Store,
	reg *listservice.Registry, ps people.Store) (controllers.Executor, controllers.DatasetLoader, error) {
	switch o.Executor {
	case ExecutorJob:
		if o.Job.Image == "" {
			return nil, nil, fmt.Errorf("the job executor needs a worker image")
		}
		exec := &controllers.JobExecutor{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Events: mgr.GetAPIReader(), Config: o.Job, Clock: o.Clock}
		loader := &controllers.DatasetJobLoader{Client: mgr.GetClient(), Events: mgr.GetAPIReader(), Scheme: scheme, Config: o.Job, PeopleURL: o.PeopleURL, Clock: o.Clock}
		return exec, loader, nil
	case ExecutorLocal:
		exec := controllers.NewLocalExecutor(ctx, store, reg, o.Pipeline.Limits, o.LocalConcurrency)
		exec.Clock = wiring.ProcessClock()
		loader := controllers.NewLocalDatasetLoader(ctx, store, ps)
		return exec, loader, nil
	default:
		return nil, nil, fmt.Errorf("unknown executor %q (want job or local)", o.Executor)
	}
}

// setupOthers wires the Dataset and Purchase controllers and the probes.
func setupOthers(mgr ctrl.Manager, o Options, scheme *runtime.Scheme, store *blobstore.Store, loader controllers.DatasetLoader) error {
	datasets := &controllers.DatasetReconciler{
		Clock:         o.Clock,
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Scheme:        scheme,
		Recorder:      mgr.GetEventRecorder("emaildata-manager"),
		Store:         store,
		Loader:        loader,
		Namespace:     o.Namespace,
		SourceGrace:   o.SourceGrace,
		PodStartGrace: o.PodStartGrace,
		PollInterval:  o.PollInterval,
	}
	if err := datasets.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up dataset controller: %w", err)
	}
	purchases := &controllers.PurchaseReconciler{Client: mgr.GetClient(), Store: store, Recorder: mgr.GetEventRecorder("emaildata-manager"), Clock: o.Clock}
	if err := purchases.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up purchase controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// workerSelector selects the worker Jobs and their pods.
var workerSelector = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "worker"})

// uniq drops empty and repeated names.
func uniq(names ...string) []string {
	var out []string
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// watched are the namespaces whose lists, Purchases and Datasets the
// manager reconciles: nil for all, else WatchNamespaces plus its own and
// the API's (where Datasets and API lists live).
func watched(o Options) []string {
	if len(o.WatchNamespaces) == 0 {
		return nil
	}
	return uniq(append(slices.Clone(o.WatchNamespaces), o.Namespace, o.APINamespace)...)
}

func namespaces(names []string) map[string]cache.Config {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]cache.Config, len(names))
	for _, n := range names {
		m[n] = cache.Config{}
	}
	return m
}
