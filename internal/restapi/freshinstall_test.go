package restapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/restapi"
	"github.com/emaildata/emaildata/internal/wiring"
)

// syncBuffer is a log sink read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFreshInstallHistoryKeys: a fresh installation whose manager and API
// keep a verification history and a durable fraud history (issue 30, item
// 8; nothing made by hand, nothing in a manifest). The API starts first:
// it waits, saying so, for the history keys, which it never makes. The
// manager starts with a history: it makes the verification history's key
// before its engine opens the history (no deadlock on a key it makes
// itself), and, once running, the fraud history's. The API then reads
// both by name, keys its history as the manager does (the store's key
// check agrees) and as a worker pod would with $HISTORY_KEY from the same
// Secret, answers a second GET /v5/ev from its history without a probe,
// and keeps fraud feedback; no key is ever logged.
func TestFreshInstallHistoryKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv(evhistory.SecretEnv, "")
	const ns = "fresh-install"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	historyURL, fraudURL := redistest.URL(t, "freshhist"), redistest.URL(t, "freshfraud") // fail under CI=true without Redis

	// The API: its engine and fraud scorer as cmd/api builds them.
	var apiLog syncBuffer
	o := restapi.RunOptions{KeyNamespace: ns, SecretsRecheck: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&apiLog, nil))}
	vc := wiring.DefaultAPIVerifyConfig()
	vc.DNSServer, vc.Probe.Port, vc.SMTPAllowCIDRs, vc.ExtraTLDs = world.DNSAddr(), world.SMTPPort(), "127.0.0.0/8", "test"
	vc.HistoryURL, vc.Fleet.URL = historyURL, ""
	fc := wiring.FraudConfig{HistoryURL: fraudURL, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	loaded := make(chan error, 1)
	go func() { loaded <- restapi.LoadInstallationKeys(ctx, cfg, o, &vc, &fc) }()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(apiLog.String(), "waiting for an installation secret the manager makes") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the API does not say it waits; log:\n%s", apiLog.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-loaded:
		t.Fatalf("the API went on (%v) before the manager made its keys", err)
	default:
	}
	var secrets corev1.SecretList
	if err := k8s.List(ctx, &secrets, client.InNamespace(ns)); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("the API made Secrets (%v): %d", err, len(secrets.Items))
	}

	// The manager, with a history of its own.
	mst, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	mvc := wiring.DefaultVerifyConfig()
	mvc.DNSServer, mvc.HistoryURL, mvc.Fleet.URL = "off", historyURL, ""
	mgr, err := operator.New(ctx, cfg, operator.Options{Namespace: ns, WatchNamespaces: []string{ns}, Store: mst, Verify: mvc,
		Executor: operator.ExecutorLocal, MetricsAddr: "0", ProbeAddr: "0", SkipNameValidation: true})
	if err != nil {
		t.Fatalf("the manager does not start with a history and no key yet: %v", err)
	}
	mctx, stopManager := context.WithCancel(ctx)
	defer stopManager()
	go func() { _ = mgr.Start(mctx) }()
	select {
	case err := <-loaded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the API did not get its keys once the manager ran; log:\n%s", apiLog.String())
	}
	keys := map[installsecret.Kind][]byte{}
	for _, k := range []installsecret.Kind{installsecret.HistoryKey, installsecret.FraudHistoryKey} {
		var sec corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: installsecret.Config{}.Name(k)}, &sec); err != nil {
			t.Fatal(err)
		}
		spec, _ := installsecret.Lookup(k)
		if keys[k], err = spec.Key(sec.Data); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(apiLog.String(), string(keys[k])) {
			t.Errorf("the API logged the %s", k)
		}
	}
	if !bytes.Equal(vc.HistoryKey, keys[installsecret.HistoryKey]) || fc.HistoryKey != string(keys[installsecret.FraudHistoryKey]) {
		t.Fatal("the API read other keys than the Secrets hold")
	}

	engine, err := wiring.NewEngine(ctx, vc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, detail := wiring.HistoryHealth(engine)(); !ok {
		t.Errorf("the API's history: %s; want it keyed as the manager's", detail)
	}
	// A worker pod: $HISTORY_KEY from the Secret (its secretKeyRef).
	t.Setenv(evhistory.SecretEnv, string(keys[installsecret.HistoryKey]))
	wvc := vc
	wvc.HistoryKey = nil
	worker, err := wiring.NewEngine(ctx, wvc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, detail := wiring.HistoryHealth(worker)(); !ok {
		t.Errorf("a worker's history: %s; want it keyed as the manager's", detail)
	}

	createFraudKeys(t)
	scorer, err := wiring.NewFraud(ctx, fc, peopleStore)
	if err != nil {
		t.Fatalf("fraud history with the key read from its Secret: %v", err)
	}
	addr, err := startAPI(ctx, restapi.Config{Verifier: engine, EVSMTP: true, HistoryHealth: wiring.HistoryHealth(engine), Fraud: scorer})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	box := "rosa@" + tenantDomain // a mailbox of the mail world (good.test is a catch-all)
	if code, probes := evCheck(t, base, keyAcme, box); code != 50 || probes == 0 {
		t.Fatalf("first check: code %d, %d RCPTs; want 50 from a probe", code, probes)
	}
	if code, probes := evCheck(t, base, keyAcme, box); code != 50 || probes != 0 {
		t.Errorf("second check: code %d, %d RCPTs; want the verdict from the history", code, probes)
	}
	c := tenantClient{t, base, fraudTenants[0]}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r := c.feedback("email\tfraud_type\nfresh.t30@good.test\tbot\n")
		if r.code == http.StatusOK {
			break
		}
		if r.code != http.StatusUnauthorized || time.Now().After(deadline) {
			t.Fatalf("feedback with the fraud history keyed from its Secret: %d %s", r.code, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
