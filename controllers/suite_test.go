package controllers_test

import (
	"context"
	"flag"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/jobplane"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/wiring"
)

// Namespaces of the two managers the suite runs, one per executor. Each
// manager's own namespace is its operator (and REST API) namespace; the Job
// manager's Jobs run in nsWorkers; the local manager also watches two tenant
// namespaces, team-a and team-b, to which the administrator granted prefixes
// of the store.
const (
	nsJob     = "job-exec"
	nsWorkers = "job-workers"
	nsLocal   = "local-exec"
	nsTeamA   = "team-a"
	nsTeamB   = "team-b"
	nsSystem  = "emaildata-system"
	testLimit = 64 << 10 // zip expansion limit in tests

	workerImage = "emaildata:test"
	// historyKeySecret holds the workers' HISTORY_KEY, in nsWorkers (as
	// the manager names it in JobConfig once it has read it).
	historyKeySecret = "emaildata-history-key"
	workerSA         = "emaildata-worker"
	workerPrio       = "emaildata-test-workers"
	jobTTLSeconds    = 15
)

// emptyImage is an image the test node knows without a worker binary;
// lateImage gets its binary only when a test puts it there.
const (
	emptyImage = "emaildata:empty"
	lateImage  = "emaildata:late"
)

// Store prefixes the administrator granted the tenant namespaces.
var testGrants = blobstore.Grants{nsTeamA: "imports/team-a/", nsTeamB: "imports/team-b/"}

var (
	cfg      *rest.Config
	k8s      client.Client
	store    *blobstore.Store
	storeDir string
	registry *listservice.Registry
	// peopleStore is the reference store both managers load Datasets into;
	// bbolt locks its file, so it is opened once and shared.
	peopleStore people.Store
	peopleURL   string
	// jobPeopleURL is the PostgreSQL people store of the Job manager, whose
	// worker processes open it themselves; empty without PostgreSQL.
	jobPeopleURL string
	// plane runs the real Job controller and scheduler, and the test node
	// whose processes are the Job manager's workers.
	plane *jobplane.Plane
	// baseOptions configure the suite's managers; tests start more from it.
	baseOptions operator.Options
	// kubeconfig is an admin kubeconfig, for tests that run kubectl.
	kubeconfig string
	// workerBin is the worker binary; lateImageDir the directory of
	// lateImage.
	workerBin, lateImageDir string
)

// TestMain starts a real kube-apiserver and etcd (envtest), the real
// kube-controller-manager and kube-scheduler with a test node that runs pods
// as processes of the worker binary (jobplane), and two managers: one with
// the Job executor and one with the in-process local executor. Both use one
// file:// store, which the worker processes open too.
func TestMain(m *testing.M) {
	flag.Parse()
	if !flagGiven("test.parallel") {
		// The parallel tests (each with a manager and namespaces, or a
		// list, of its own) mostly wait: for the Job controller's backoff,
		// a TTL, a deadline, the source grace, the test node's processes.
		// All of them at once, not GOMAXPROCS (2 on the CI machine): at
		// four, the longest wait (the active deadline's 20 s) could start
		// last, behind the others.
		_ = flag.Set("test.parallel", "16")
	}
	os.Exit(runSuite(m))
}

// flagGiven reports whether the flag was set on the command line.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func runSuite(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set; run the tests with `make test` (it builds the envtest binaries)")
		return 1
	}
	tmp, err := os.MkdirTemp("", "emaildata-controllers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir := filepath.Join(tmp, "bin")
	// The worker's link (seconds of CPU, in a fresh directory each run)
	// goes on while the control plane starts; no pod runs before it ends.
	built := make(chan struct{})
	var buildErr error
	go func() {
		defer close(built)
		build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/worker")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the worker: %v\n%s", err, out)
		}
	}()
	workerBin = filepath.Join(binDir, "worker")
	keepTmp := false // kept when a test failed: the job plane's logs are there
	defer func() {
		<-built // not removed from under the link
		if !keepTmp {
			os.RemoveAll(tmp)
		}
	}()
	emptyDir := filepath.Join(tmp, "images", "empty")
	lateImageDir = filepath.Join(tmp, "images", "late")
	for _, d := range []string{emptyDir, lateImageDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plane, err = jobplane.Start(ctx, jobplane.Options{
		Env: env, AssetsDir: assets, Dir: filepath.Join(tmp, "plane"),
		Images: map[string]string{workerImage: binDir, emptyImage: emptyDir, lateImage: lateImageDir},
		// A container that cannot start is tried again soon.
		StartBackoff: time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the job plane:", err)
		return 1
	}
	defer func() { _ = plane.Stop() }()
	if <-built; buildErr != nil {
		fmt.Fprintln(os.Stderr, buildErr)
		return 1
	}
	if kubeconfig, err = writeKubeconfig(env); err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		return 1
	}
	defer os.Remove(kubeconfig)

	k8s, err = client.New(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := createFixtures(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	storeDir = filepath.Join(tmp, "store")
	storeURL := "file://" + storeDir
	if store, err = blobstore.Open(ctx, storeURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	peopleURL = "bolt://" + filepath.Join(tmp, "people.db")
	if peopleStore, err = people.Open(ctx, peopleURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer peopleStore.Close()
	dropSchema, err := postgresPeople(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer dropSchema()

	registry = wiring.Registry(nil)
	// A stand-in for the report-capable services, so the two-step flow is
	// exercised before the data store exists (rows @hold.test block until
	// their shard is stopped).
	registry.Register("email_intelligence", heldService{})

	baseOptions = operator.Options{
		Namespace: nsSystem,
		Store:     store,
		BlobURL:   storeURL,
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
	localOpts := baseOptions
	localOpts.Executor = operator.ExecutorLocal
	localOpts.WatchNamespaces = []string{nsLocal, nsTeamA, nsTeamB}
	localOpts.Namespace = nsLocal
	localOpts.StoreGrants = testGrants
	// The tests' S3 server listens on loopback.
	localOpts.SourceAllowCIDRs = "127.0.0.0/8"

	// The suite's Job manager hands its workers the history key's Secret,
	// as a manager whose workers open a history does once it has read it
	// (operator.historyKey; their Verify names none here, so it is set by
	// hand); the Job managers of single tests hand none.
	jobOpts := jobOptions(nsJob, nsWorkers)
	jobOpts.Job.HistoryKeySecret = historyKeySecret
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
	code := m.Run()
	if code != 0 {
		keepTmp = true
		fmt.Fprintf(os.Stderr, "job plane logs (kube-controller-manager, kube-scheduler, pods) are kept in %s\n", plane.Dir)
	}
	return code
}

// jobOptions configure a Job-executor manager watching ns whose Jobs run
// in workers: the worker image maps to the test node's worker binary, and
// pods carry the placement an operator would give them.
func jobOptions(ns, workers string) operator.Options {
	o := baseOptions
	o.Executor = operator.ExecutorJob
	o.WatchNamespaces = []string{ns}
	o.Namespace = ns // its operator namespace: Datasets and API lists live there
	// The worker processes cannot open the bolt file this process holds.
	o.PeopleURL = jobPeopleURL
	o.Job = controllers.JobConfig{
		Namespace:               workers,
		Image:                   workerImage,
		ServiceAccountName:      workerSA,
		TTLSecondsAfterFinished: jobTTLSeconds,
		// The memory limit a cluster would give them, which the test node
		// enforces (see TestJobPathOOMKilledFailsList).
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(operator.DefaultWorkerMemory)}},
		NodeSelector:      map[string]string{"node.emaildata.io/testnode": "true"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}},
		PriorityClassName: workerPrio,
	}
	return o
}

// createFixtures makes the namespaces, and what worker pods need in the
// workers' namespace: the service account, the priority class and the
// history key Secret.
func createFixtures(ctx context.Context) error {
	for _, ns := range []string{nsJob, nsWorkers, nsLocal, nsTeamA, nsTeamB, nsSystem} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// The installation's callback signing key, in each manager's operator
	// namespace (docs/callbacks.md).
	for _, ns := range []string{nsJob, nsLocal} {
		if err := k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: installsecret.Config{}.Name(installsecret.CallbackSigning)},
			Data:       map[string][]byte{installsecret.Field: []byte(testSigningKey)},
		}); err != nil {
			return err
		}
	}
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsWorkers, Name: workerSA},
		AutomountServiceAccountToken: ptrTo(false)}); err != nil {
		return err
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsWorkers, Name: historyKeySecret},
		StringData: map[string]string{installsecret.Field: "controllers-test-history-key"}}); err != nil {
		return err
	}
	return k8s.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: workerPrio}, Value: 1000})
}

// postgresPeople points jobPeopleURL at a fresh schema of the test
// database, and returns a function dropping it. Without PostgreSQL the
// Dataset Job tests skip (fail under CI=true).
func postgresPeople(ctx context.Context) (func(), error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	// Generous: a refused connection fails at once, and a server slowed by
	// a busy machine (make test runs packages side by side) still answers.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err == nil {
		err = conn.Ping(cctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			return nil, fmt.Errorf("PostgreSQL unreachable (CI=true): %w", err)
		}
		fmt.Fprintln(os.Stderr, "PostgreSQL unreachable, the Dataset Job tests will skip:", err)
		return func() {}, nil
	}
	schema := fmt.Sprintf("ctrltest_%d", time.Now().UnixNano())
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	jobPeopleURL = u.String()
	return func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	}, nil
}

// writeKubeconfig writes an admin kubeconfig for kubectl to a temp file.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	admin, err := env.AddUser(envtest.User{Name: "test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "emaildata-kubeconfig-")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.Write(kc)
	return f.Name(), err
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.WarnLevel
}
