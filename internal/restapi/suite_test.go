package restapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice/listservicetest"
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

const (
	nsSystem  = "emaildata-system"
	maxUpload = 256 << 10
)

// Keys of the test tenants. Each is at least 16 characters.
const (
	keyAcme     = "acme-validation-key-0001"    // email_validation only
	keyGlobex   = "globex-validation-key-0002"  // email_validation only, another tenant
	keyMulti    = "acme-multi-service-key-0003" // validation + intelligence, tenant acme
	keyFraud    = "fraud-only-key-000000004"    // no list service
	keyDemo     = "demographics-key-00000007"   // bulk demographics only
	keyLimited  = "rate-limited-key-00000005"   // 1 request/s
	keyReporter = "report-key-0000000000006"    // email_intelligence only, tenant initech
	keyAll      = "all-services-key-00000008"   // every service, like make run's key, tenant sdk
	keyAppend   = "email-append-key-00000009"   // email_append only, tenant acme
)

var (
	peopleStore people.Store
	peopleData  []people.Record
	world       *mailworld.World
	cfg         *rest.Config
	k8s         client.Client
	store       *blobstore.Store
	baseURL     string
	// metricsURLs maps an API address startAPI returned to its metrics
	// server's base URL.
	metricsURLs sync.Map
)

// TestMain runs the suite. Its parallel tests wait on the wall clock (a
// body's stall, a grace, the key informer), not on the CPU: several at a
// time, not GOMAXPROCS.
func TestMain(m *testing.M) {
	realtime.WaitingParallel(8)
	os.Exit(runSuite(m))
}

// runSuite starts envtest, the manager with the local executor, and the
// API on a loopback port, all sharing one in-memory store.
func runSuite(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.WarnLevel)))
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
		return 1
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	var err error
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if k8s, err = client.New(cfg, client.Options{Scheme: kubescheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsSystem}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for name, spec := range map[string][3]string{
		"acme":     {keyAcme, "email_validation", "acme"},
		"globex":   {keyGlobex, "email_validation", "globex"},
		"multi":    {keyMulti, "email_validation,email_intelligence", "acme"},
		"fraud":    {keyFraud, "fraud", "acme"},
		"demo":     {keyDemo, "demographics", "acme"},
		"limited":  {keyLimited, "email_validation", "limited"},
		"reporter": {keyReporter, "email_intelligence", "initech"},
		"all":      {keyAll, strings.Join(services.Known, ","), "sdk"},
		"append":   {keyAppend, "email_append", "acme"},
	} {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: "key-" + name, Labels: map[string]string{apikey.Label: "true"}},
			StringData: map[string]string{"key": spec[0], "services": spec[1], "tenant": spec[2]},
		}
		if name == "limited" {
			sec.StringData["rateLimit"] = "1"
		}
		if err := k8s.Create(ctx, sec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}

	// The installation's callback signing key (docs/callbacks.md).
	if err := k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: installsecret.Config{}.Name(installsecret.CallbackSigning)},
		Data:       map[string][]byte{installsecret.Field: []byte("restapi-suite-signing-key-0123456789")},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// The list ID key, as the elected manager makes it at start; made here
	// first so that no test's upload meets "no list ID key yet".
	if _, err := operator.EnsureInstallationSecrets(ctx, k8s, k8s, nsSystem, installsecret.Config{}, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	store, err = blobstore.Open(ctx, "mem://")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	world, err = mailworld.Start(ctx, append([]mailworld.Domain{
		{Name: "good.test", DefaultBehaviour: mailworld.Exists},
		{Name: "gone.test", NXDomain: true},
	}, histWorldDomains()...), mailworld.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer world.Close()
	histDir, err := os.MkdirTemp("", "emaildata-history-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(histDir)
	if err := startHistories(ctx, histDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	peopleDir, err := os.MkdirTemp("", "emaildata-people-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(peopleDir)
	if peopleStore, err = people.Open(ctx, "bolt://"+peopleDir+"/people.db"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer peopleStore.Close()
	peopleData = people.GenerateSlice(7, 500)
	if err := peopleStore.Upsert(ctx, peopleData); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	reg := wiring.Registry(nil)
	reg.Register("email_intelligence", listservicetest.DomainService{})
	// email_append over the suite's people (the console's match rates).
	reg.Register(peoplelist.NameEmailAppend, peoplelist.NewEmailAppend(peopleStore))
	// email_validation: offline as before, but the history test domains
	// (history_test.go) go through their SMTP engines with a history.
	ev := evlist.New(routedBatch(wiring.OfflineEngine()))
	ev.Counters = histCounters
	reg.Register(evlist.Name, ev)
	mgr, err := operator.New(ctx, cfg, operator.Options{
		Namespace: nsSystem, Store: store, Registry: reg, Executor: operator.ExecutorLocal,
		Pipeline:     pipeline.Config{Limits: listfile.Limits{MaxExpandedBytes: 1 << 20}, ShardBytes: 1 << 10, MaxShards: 4},
		PollInterval: 100 * time.Millisecond, MetricsAddr: "0", ProbeAddr: "0",
		CallbackAllowCIDRs: "127.0.0.0/8",
		CallbackBackoff:    callback.Backoff{Base: 50 * time.Millisecond, Max: 100 * time.Millisecond, Attempts: 2},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = mgr.Start(ctx) }()

	addr, err := startAPI(ctx, restapi.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	baseURL = "http://" + addr
	// The API of the history tests (history_test.go): SMTP and a history
	// for their domains.
	if addr, err = startAPI(ctx, restapi.Config{Verifier: routedVerifier{base: baseEngine()}, EVSMTP: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	histURL = "http://" + addr
	if err := loadOpenAPI(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// baseEngine is the suite's verifier: DNS against the mail world, no SMTP.
func baseEngine() *verify.Engine {
	return &verify.Engine{
		Lists:     emaillists.Default,
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: world.DNSAddr(), Timeout: time.Second}),
		ExtraTLDs: map[string]bool{"test": true},
	}
}

// startAPI runs an API server on a loopback port until ctx ends.
func startAPI(ctx context.Context, c restapi.Config) (string, error) {
	return startAPIStore(ctx, c, store)
}

// startAPIStore is startAPI with the API's uploads going to st; opts
// change its run options last.
func startAPIStore(ctx context.Context, c restapi.Config, st *blobstore.Store, opts ...func(*restapi.RunOptions)) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	c.MaxUploadBytes = maxUpload
	if c.Limits == (listfile.Limits{}) {
		c.Limits = listfile.Limits{MaxExpandedBytes: 1 << 20}
	}
	if c.RateLimit == 0 {
		c.RateLimit = 1000
	}
	// The suite's tests refuse keys by the hundred, all from 127.0.0.1:
	// budgets past them unless a test sets its own (throttle_test.go).
	if c.Throttle.AuthFailureBurst == 0 {
		c.Throttle.AuthFailureBurst = 1 << 20
	}
	if c.Throttle.ForbiddenBurst == 0 {
		c.Throttle.ForbiddenBurst = 1 << 20
	}
	c.PurchaseWait = 10 * time.Second
	if c.Verifier == nil {
		c.Verifier = baseEngine()
	}
	c.People = peopleStore
	if c.Fraud == nil { // an in-memory history, unless the test brings its own
		scorer, err := wiring.NewFraud(ctx, wiring.FraudConfig{HistoryURL: wiring.HistoryMemory, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, peopleStore)
		if err != nil {
			return "", err
		}
		c.Fraud = scorer
	}
	ready := make(chan struct{})
	errc := make(chan error, 1)
	ro := restapi.RunOptions{
		Config: c, Listener: ln, MetricsListener: mln, KeyNamespace: nsSystem, Store: st,
		ShutdownTimeout: 20 * time.Second,
		Log:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Ready:           func(string) { close(ready) },
	}
	for _, o := range opts {
		o(&ro)
	}
	go func() { errc <- restapi.Run(ctx, cfg, ro) }()
	select {
	case <-ready:
	case err := <-errc:
		return "", err
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("API did not start")
	}
	// Wait until every test key is in the informer-fed key store.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := httpGet("http://"+ln.Addr().String()+"/v5/list/1", keyReporter)
		if err == nil && resp != 401 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	metricsURLs.Store(ln.Addr().String(), "http://"+mln.Addr().String())
	return ln.Addr().String(), nil
}

// metricsURL is the metrics base URL of the API at base (a baseURL).
func metricsURL(t *testing.T, base string) string {
	t.Helper()
	u, ok := metricsURLs.Load(strings.TrimPrefix(base, "http://"))
	if !ok {
		t.Fatalf("no metrics server for %s", base)
	}
	return u.(string)
}
