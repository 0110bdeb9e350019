package controllers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/callback"
	"github.com/emaildata/emaildata/internal/catalog"
	"github.com/emaildata/emaildata/internal/listfile"
	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/listservice/listservicetest"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/people"
	"github.com/emaildata/emaildata/internal/pipeline"
)

// Namespaces of the two managers the suite runs: one per executor.
const (
	nsJob     = "job-exec"
	nsLocal   = "local-exec"
	nsSystem  = "emaildata-system"
	testLimit = 64 << 10 // zip expansion limit in tests
)

var (
	cfg      *rest.Config
	k8s      client.Client
	store    *blobstore.Store
	registry *listservice.Registry
	// peopleStore is the reference store both managers load Datasets into;
	// bbolt locks its file, so it is opened once and shared.
	peopleStore people.Store
	peopleURL   string
)

// TestMain starts a real kube-apiserver and etcd (envtest) and two
// managers: one with the Job executor, whose Jobs the tests drive as the
// Job controller would, and one with the in-process local executor.
func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set; run the tests with `make test` (it builds the envtest binaries)")
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	k8s, err = client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{nsJob, nsLocal, nsSystem} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}

	store, err = blobstore.Open(ctx, "mem://")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	peopleDir, err := os.MkdirTemp("", "emaildata-people-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(peopleDir)
	peopleURL = "bolt://" + filepath.Join(peopleDir, "people.db")
	if peopleStore, err = people.Open(ctx, peopleURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer peopleStore.Close()

	registry = catalog.Registry(nil)
	// A stand-in for the report-capable services, so the two-step flow is
	// exercised before the data store exists.
	registry.Register("email_intelligence", listservicetest.DomainService{})

	base := operator.Options{
		Namespace: nsSystem,
		Store:     store,
		Registry:  registry,
		People:    peopleStore,
		PeopleURL: peopleURL,
		Pipeline: pipeline.Config{
			Limits:     listfile.Limits{MaxExpandedBytes: testLimit, MaxRecordBytes: 4096},
			ShardBytes: 256,
			MaxShards:  8,
		},
		CallbackAllowCIDRs: "127.0.0.0/8",
		CallbackBackoff:    callback.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, Attempts: 3},
		SourceGrace:        5 * time.Second,
		PollInterval:       200 * time.Millisecond,
		MetricsAddr:        "0",
		ProbeAddr:          "0",
		SkipNameValidation: true,
	}
	jobOpts := base
	jobOpts.Executor = operator.ExecutorJob
	jobOpts.Job.Image = "emaildata:test"
	jobOpts.Job.BlobURL = "mem://"
	jobOpts.WatchNamespaces = []string{nsJob}
	localOpts := base
	localOpts.Executor = operator.ExecutorLocal
	localOpts.WatchNamespaces = []string{nsLocal}

	for _, o := range []operator.Options{jobOpts, localOpts} {
		mgr, err := operator.New(ctx, cfg, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			return 1
		}
		go func() {
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "manager stopped:", err)
			}
		}()
	}
	return m.Run()
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.WarnLevel
}
