// Package localstack runs the whole operator on one machine without a
// cluster: a kube-apiserver and etcd (the envtest binaries), the CRDs, and
// the manager with a file:// store and the in-process executor, or the Job
// executor with a Job control plane (see jobs.go).
package localstack

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/kits/jobplane"
	"github.com/emaildata/emaildata/internal/kits/s3server"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/lists/peoplelist"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

// Options configure the stack.
type Options struct {
	// Dir holds the kubeconfig, etcd's data and the blob store.
	Dir string
	// CRDDir holds the CRD manifests.
	CRDDir string
	// AssetsDir holds kube-apiserver, etcd and kubectl.
	AssetsDir string
	// MetricsAddr and ProbeAddr of the manager; "0" disables.
	MetricsAddr, ProbeAddr string
	// APIListen is the REST API's address, e.g. 127.0.0.1:8090.
	APIListen string
	// APIMetricsListen is the address of the API's GET /metrics; "0" or
	// empty disables it.
	APIMetricsListen string
	// Log receives the API's logs.
	Log *slog.Logger
	// Verify configures verification (the local stack runs offline by
	// default: no DNS, no SMTP).
	Verify wiring.VerifyConfig
	// Executor is operator.ExecutorLocal (default: shards run in-process)
	// or operator.ExecutorJob: lists run as Indexed Jobs, which the real
	// kube-controller-manager and kube-scheduler (from AssetsDir) and a
	// test node running pods as processes of WorkerDir/worker carry out.
	Executor string
	// WorkerDir holds the worker binary, for the job executor; a relative
	// directory is resolved against the working directory when Start runs.
	WorkerDir string
	// Store is StoreFile (default) or StoreS3.
	Store string
	// S3Port is the S3 API's port for StoreS3 (0: a free one).
	S3Port int
	// ShardBytes and MaxShards split lists into shards, as
	// pipeline.shardBytes and pipeline.maxShards do (0: the defaults).
	ShardBytes int64
	MaxShards  int
	// ShardBy is pipeline.shardBy (pipeline.ShardByRows or ShardByDomain
	// or ShardByMX; "": the default, by MX host).
	ShardBy string
	// Limits bound hostile list files, for the API's check of an upload
	// and the manager's preparation alike (zero: listfile.DefaultLimits).
	Limits listfile.Limits
	// CallbackAllowCIDRs are the private ranges callbacks may reach, for the
	// API's check of callback_url and the manager's delivery alike; empty
	// is DefaultCallbackAllowCIDRs (loopback, so a receiver on this machine
	// works), "none" allows no private range, as a cluster's default.
	CallbackAllowCIDRs string
}

// DefaultCallbackAllowCIDRs lets the local stack's callbacks reach
// loopback receivers. A cluster's manager and API refuse loopback, link-
// local and private addresses unless manager.callbackAllowCIDRs opens them.
const DefaultCallbackAllowCIDRs = "127.0.0.0/8,::1/128"

// callbackCIDRs is o's callback allow list in the form of the manager's flag.
func (o Options) callbackCIDRs() string {
	switch o.CallbackAllowCIDRs {
	case "":
		return DefaultCallbackAllowCIDRs
	case "none":
		return ""
	}
	return o.CallbackAllowCIDRs
}

// Stack is a running local control plane with the manager.
type Stack struct {
	// Kubeconfig is the path of an admin kubeconfig for kubectl.
	Kubeconfig string
	// StoreDir is the directory behind the file:// store ("" for s3).
	StoreDir string
	// S3Endpoint is the S3-compatible server of an s3 store.
	S3Endpoint string
	// BlobURL is the store's URL.
	BlobURL string
	// APIURL is the REST API's base URL.
	APIURL string
	// APIKey is a local key enabled for every service.
	APIKey string
	// ValidationKey is a local key enabled for email_validation alone: a
	// client that sends no service= with its lists (as the public
	// service's documentation shows them) needs a key with one list service.
	ValidationKey string
	// CallbackAllowCIDRs are the private ranges callbacks may reach.
	CallbackAllowCIDRs string
	// History says where the verification history lives and what keys
	// it ("" when there is none), for make run to say at start.
	History string
	// MetricsURL is the manager's metrics (HTTPS, self-signed, behind
	// authn/authz; empty when disabled); MetricsTokenFile holds a bearer
	// token that may read it. APIMetricsURL is the API's (plain HTTP).
	MetricsURL, MetricsTokenFile, APIMetricsURL string

	// Jobs is the Job control plane of the job executor (nil otherwise).
	Jobs *jobplane.Plane

	env     *envtest.Environment
	dir     string
	cancel  context.CancelFunc
	mgrDone chan error
	apiDone chan error
	done    chan error
	people  people.Store
	history *evhistory.History

	s3         *s3server.Server
	s3Identity s3server.Identity
}

// Namespace the operator runs in.
const Namespace = listid.DefaultNamespace

// Start brings the stack up. Stop it with Stop.
func Start(ctx context.Context, o Options) (*Stack, error) {
	s, cfg, err := startControlPlaneIn(ctx, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.abort()
		}
	}()
	c, err := s.adminClient(cfg)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	switch o.Store {
	case "", StoreFile:
	case StoreS3:
		if err := s.startS3(ctx, o); err != nil {
			return nil, err
		}
		if err := s.writeStoreSecret(ctx, c); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown store %q (want %s or %s)", o.Store, StoreFile, StoreS3)
	}
	if s.people, err = localPeople(ctx, filepath.Join(s.dir, "people.db")); err != nil {
		return nil, err
	}
	if err := s.historyKey(ctx, c, &o); err != nil {
		return nil, err
	}
	if err := s.openHistory(ctx, &o.Verify); err != nil {
		return nil, err
	}
	// The manager makes the installation secrets when it is elected; made
	// here first, the API never answers a first upload with "no list ID
	// key yet". They live in etcd, which keeps its data between runs, so
	// tenants' callback keys stay the same.
	if _, err := operator.EnsureInstallationSecrets(ctx, c, c, Namespace, installsecret.Config{}, nil); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.CallbackAllowCIDRs = o.callbackCIDRs()
	if err := s.startManager(ctx, mctx, cfg, c, o); err != nil {
		return nil, err
	}
	if s.APIKey, err = ensureLocalKey(ctx, c, filepath.Join(s.dir, "api-key"), "local-api-key", services.Known); err != nil {
		return nil, err
	}
	if s.ValidationKey, err = ensureLocalKey(ctx, c, filepath.Join(s.dir, "api-key-validation"), "local-validation-key",
		[]string{services.EmailValidation}); err != nil {
		return nil, err
	}
	if o.MetricsAddr != "" && o.MetricsAddr != "0" {
		s.MetricsURL = "https://" + o.MetricsAddr + "/metrics"
		if s.MetricsTokenFile, err = writeMetricsToken(ctx, c, s.dir); err != nil {
			return nil, err
		}
	}
	if err := s.startAPI(mctx, cfg, o); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// abort undoes a Start that failed half-way, in the reverse order of Start.
func (s *Stack) abort() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.Jobs != nil {
		_ = s.Jobs.Stop()
	}
	if s.people != nil {
		_ = s.people.Close()
	}
	if s.history != nil {
		_ = s.history.Close()
	}
	if s.s3 != nil {
		_ = s.s3.Stop()
	}
	_ = s.env.Stop()
	forgetControlPlane(s.dir)
}

// startControlPlaneIn makes the stack's directories and starts its control
// plane, whose etcd keeps its data there between runs.
func startControlPlaneIn(ctx context.Context, o Options) (*Stack, *rest.Config, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, nil, err
	}
	storeDir := filepath.Join(dir, "store")
	etcdDir := filepath.Join(dir, "etcd")
	for _, d := range []string{storeDir, etcdDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	if err := stopLeftovers(dir, o.logf); err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{o.CRDDir},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: o.AssetsDir,
	}
	// Keep etcd's data between runs, so lists and IDs survive a restart.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	cfg, err := startControlPlane(ctx, env)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("start control plane: %w", err)
	}
	if err := recordControlPlane(dir); err != nil {
		o.logf("could not record the control plane's processes in %s: %v", dir, err)
	}
	return &Stack{env: env, dir: dir, StoreDir: storeDir, BlobURL: "file://" + storeDir}, cfg, nil
}

// adminClient writes an admin kubeconfig for kubectl and returns a client.
func (s *Stack) adminClient(cfg *rest.Config) (client.Client, error) {
	admin, err := s.env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: kubescheme.New()})
}

// startManager starts the Job control plane (job executor only: it lives
// as long as ctx) and the manager, until mctx ends.
func (s *Stack) startManager(ctx, mctx context.Context, cfg *rest.Config, c client.Client, o Options) error {
	mopts := s.managerOptions(o)
	if o.Executor == operator.ExecutorJob {
		var err error
		if s.Jobs, err = startJobs(ctx, s.env, c, o, s.dir, &mopts); err != nil {
			return err
		}
	}
	mgr, err := operator.New(mctx, cfg, mopts)
	if err != nil {
		return err
	}
	s.mgrDone, s.apiDone, s.done = make(chan error, 1), make(chan error, 1), make(chan error, 2)
	go func() {
		err := mgr.Start(mctx)
		s.mgrDone <- err
		s.done <- fmt.Errorf("manager: %w", err)
	}()
	return nil
}

// managerOptions configure the local manager (the local executor; the job
// executor's settings are added by startJobs).
func (s *Stack) managerOptions(o Options) operator.Options {
	return operator.Options{
		People:       s.people,
		PostalFinder: peoplelist.NewPostalIndex(slices.Values(people.GenerateSlice(localPeopleSeed, localDemoPeople))),
		Namespace:    Namespace,
		BlobURL:      s.BlobURL,
		Executor:     operator.ExecutorLocal,
		// What an administrator might grant: lists in default may read
		// imports/default/ of the store through source.blobURL.
		StoreGrants: blobstore.Grants{"default": "imports/default/"},
		Verify:      o.Verify,
		MetricsAddr: o.MetricsAddr,
		ProbeAddr:   o.ProbeAddr,
		// Locally, a list waits a little for a ConfigMap applied after it.
		SourceGrace:  30 * time.Second,
		PollInterval: time.Second,
		// Callbacks to a receiver on this machine are delivered.
		CallbackAllowCIDRs: s.CallbackAllowCIDRs,
		Pipeline:           pipelineConfig(o),
	}
}

// pipelineConfig is the manager's default pipeline with o's shard sizes.
func pipelineConfig(o Options) pipeline.Config {
	c := pipeline.DefaultConfig()
	if o.ShardBytes > 0 {
		c.ShardBytes = o.ShardBytes
	}
	if o.MaxShards > 0 {
		c.MaxShards = o.MaxShards
	}
	c.ShardBy = cmp.Or(o.ShardBy, pipeline.ShardByMX)
	c.Limits = o.limits()
	return c
}

// limits are o's Limits, the defaults when unset: the one setting the
// API and the manager both apply.
func (o Options) limits() listfile.Limits {
	if o.Limits == (listfile.Limits{}) {
		return listfile.DefaultLimits()
	}
	return o.Limits
}

// startAPI starts the REST API until mctx ends and waits until it serves.
func (s *Stack) startAPI(mctx context.Context, cfg *rest.Config, o Options) error {
	ln, err := net.Listen("tcp", o.APIListen)
	if err != nil {
		return fmt.Errorf("REST API: %w", err)
	}
	s.APIURL = "http://" + ln.Addr().String()
	policy, err := callback.ParsePolicy(s.CallbackAllowCIDRs)
	if err != nil {
		return fmt.Errorf("callback allow list: %w", err)
	}
	engine, err := wiring.NewEngine(mctx, o.Verify)
	if err != nil {
		return err
	}
	// make run keeps fraud history and feedback in memory, and says so.
	scorer, err := wiring.NewFraud(mctx, wiring.FraudConfig{HistoryURL: wiring.HistoryMemory, Log: o.Log}, s.people)
	if err != nil {
		return err
	}
	apiReady := make(chan struct{})
	go func() {
		err := restapi.Run(mctx, cfg, restapi.RunOptions{
			Config: restapi.Config{CallbackPolicy: policy, Verifier: engine, EVSMTP: o.Verify.SMTP, Fraud: scorer, People: s.people,
				HistoryHealth: wiring.HistoryHealth(engine), Limits: o.limits()},
			Listener:        ln,
			KeyNamespace:    Namespace,
			BlobURL:         s.BlobURL,
			Log:             o.Log,
			ShutdownTimeout: 20 * time.Second,
			Ready:           func(string) { close(apiReady) },
			MetricsListen:   o.APIMetricsListen,
			MetricsReady:    func(addr string) { s.APIMetricsURL = "http://" + addr + "/metrics" },
		})
		s.apiDone <- err
		s.done <- fmt.Errorf("REST API: %w", err)
	}()
	select {
	case <-apiReady:
		return nil
	case err := <-s.done:
		return err
	case <-time.After(60 * time.Second):
		return errors.New("REST API did not start within 60s")
	}
}

// startControlPlane starts etcd and kube-apiserver. Interrupted (ctx),
// it stops what it is starting and returns as soon as envtest gives up,
// rather than when the control plane is up.
func startControlPlane(ctx context.Context, env *envtest.Environment) (*rest.Config, error) {
	type result struct {
		cfg *rest.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := env.Start()
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			// envtest leaves what it started running when a later step
			// fails (the CRDs' install, say): stop it, or etcd and the API
			// server outlive the stack unrecorded, and the next run finds
			// the etcd data in use.
			_ = env.Stop()
		}
		return r.cfg, r.err
	case <-ctx.Done():
	}
	for {
		killControlPlaneChildren()
		select {
		case <-done:
			_ = env.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log.Info(fmt.Sprintf(format, args...))
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// ensureLocalKey creates (once) the API key Secret secretName of tenant
// local, enabled for svcs, and keeps the key in keyFile so it stays the
// same between runs.
func ensureLocalKey(ctx context.Context, c client.Client, keyFile, secretName string, svcs []string) (string, error) {
	key := ""
	if b, err := os.ReadFile(keyFile); err == nil {
		key = strings.TrimSpace(string(b))
	}
	if len(key) < apikey.MinKeyLength {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		key = "local-" + hex.EncodeToString(b[:])
		if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: secretName}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, sec, func() error {
		sec.Labels = map[string]string{apikey.Label: "true"}
		sec.Data = map[string][]byte{
			"key":      []byte(key),
			"services": []byte(strings.Join(svcs, ",")),
			"tenant":   []byte("local"),
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("create local API key %s: %w", secretName, err)
	}
	return key, nil
}

// Done reports the manager or the API stopping on its own.
func (s *Stack) Done() <-chan error { return s.done }

// Stop stops the manager and the API (which drains in-flight requests),
// then the control plane.
func (s *Stack) Stop() error {
	s.cancel()
	var errs []error
	for name, ch := range map[string]chan error{"manager": s.mgrDone, "REST API": s.apiDone} {
		select {
		case err := <-ch:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, fmt.Errorf("%s did not stop within 30s", name))
		}
	}
	if s.people != nil {
		_ = s.people.Close()
	}
	if s.history != nil {
		_ = s.history.Close()
	}
	if s.Jobs != nil {
		if err := s.Jobs.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("job plane: %w", err))
		}
	}
	if s.s3 != nil {
		if err := s.s3.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("S3-compatible server: %w", err))
		}
	}
	if err := s.env.Stop(); err != nil {
		errs = append(errs, err)
	}
	forgetControlPlane(s.dir)
	return errors.Join(errs...)
}

// openHistory opens the verification history once for the manager's and
// the API's engines (a bolt file has one opener): the one
// verification.history.url names, else a bolt file in the state directory
// unless a fleet.url backend keeps it (then the engines open it, with the same key). Worker
// processes of --executor=job keep none unless a URL names one.
func (s *Stack) openHistory(ctx context.Context, vc *wiring.VerifyConfig) error {
	url := vc.HistoryURL
	switch {
	case url == "off":
		s.History = ""
		return nil
	case vc.History != nil:
		return nil
	case url == "" && vc.Fleet.URL != "":
		s.History = fmt.Sprintf("the fleet.url backend, %s scope, keyed with %s", vc.HistoryScope, s.History)
		return nil
	case url == "":
		url = "bolt://" + filepath.Join(s.dir, "history.db")
	}
	key, err := evhistory.LoadSecret(vc.HistoryKeyFile)
	if err != nil {
		return err
	}
	h, err := evhistory.Open(ctx, url, evhistory.Options{TTLs: vc.HistoryTTLs, Scope: vc.HistoryScope, Secret: key,
		KeyCheckEvery: vc.HistoryKeyCheck, Log: vc.Log})
	if err != nil {
		return fmt.Errorf("verification history: %w", err)
	}
	s.history, vc.History = h, h
	s.History = fmt.Sprintf("%s, %s scope, keyed with %s", url, h.Scope(), s.History)
	return nil
}

// LocalHistorySecret is the installation secret holding make run's
// history key, which the worker pods of --executor=job take theirs from
// (the manager checks that it holds the key it was given).
var LocalHistorySecret = installsecret.Config{}.Name(installsecret.HistoryKey)

// historyKey gives make run a key for the verification history when none
// is configured ($HISTORY_KEY, verification.history.keyFile): a random one made once
// and kept in the state directory (so the history survives restarts), the
// installation secret of it for worker pods, and s.History saying which it
// is. In a cluster the manager makes that Secret and the manager and the
// API read it by name.
func (s *Stack) historyKey(ctx context.Context, c client.Client, o *Options) error {
	vc := &o.Verify
	if vc.Log == nil {
		vc.Log = o.Log
	}
	switch {
	case vc.HistoryKeyFile != "":
		s.History = "the key in " + vc.HistoryKeyFile
	case os.Getenv(evhistory.SecretEnv) != "":
		s.History = "$" + evhistory.SecretEnv
	default:
		file := filepath.Join(s.dir, "history-key")
		if err := localSecretFile(file); err != nil {
			return fmt.Errorf("history key: %w", err)
		}
		vc.HistoryKeyFile = file
		s.History = "make run's local key in " + file + " (a cluster keeps it in the installation secret " + LocalHistorySecret + ")"
	}
	key, err := evhistory.LoadSecret(vc.HistoryKeyFile)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: LocalHistorySecret}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, sec, func() error {
		sec.Data = map[string][]byte{installsecret.Field: key}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history key Secret: %w", err)
	}
	return nil
}

// localSecretFile writes 32 random bytes, hex, to file unless it holds a
// key already.
func localSecretFile(file string) error {
	if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(hex.EncodeToString(b[:])+"\n"), 0o600)
}

// The local stack loads localDemoPeople synthetic people from this seed.
// localPeopleVersion changes when the generator draws new fields, so that
// a store loaded by an earlier version is loaded again (Upsert replaces
// each person whole; the same seed gives the same people).
const (
	localDemoPeople    = 20_000
	localPeopleSeed    = 1
	localPeopleVersion = "3" // 2: life stage, financial and rfm fields; 3: other addresses
)

// localPeople opens the local reference store, loading synthetic people
// (no real personal data) the first time, and again when they were loaded
// by an earlier generator (people.version next to the store says which).
func localPeople(ctx context.Context, path string) (people.Store, error) {
	versionFile := path + ".version"
	have, _ := os.ReadFile(versionFile)
	st, err := people.Open(ctx, "bolt://"+path)
	if err != nil {
		return nil, fmt.Errorf("people store: %w", err)
	}
	if strings.TrimSpace(string(have)) != localPeopleVersion {
		if err := st.Upsert(ctx, people.GenerateSlice(localPeopleSeed, localDemoPeople)); err != nil {
			st.Close()
			return nil, fmt.Errorf("load synthetic people: %w", err)
		}
		if err := os.WriteFile(versionFile, []byte(localPeopleVersion+"\n"), 0o600); err != nil {
			st.Close()
			return nil, fmt.Errorf("people store: %w", err)
		}
	}
	return st, nil
}
