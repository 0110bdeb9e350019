package restapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestLoadEV drives GET /v5/ev on a warm cache with hack/apiload and
// reports requests/s and latency. The API under load is a second server
// (startAPI: the suite's engine, DNS over the suite's mail world, SMTP off)
// without a useful rate limit; one request first puts good.test in its DNS
// cache, so the run measures the API and the offline stages, not DNS.
// Skipped unless EMAILDATA_LOAD=1:
//
//	EMAILDATA_LOAD=1 KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 \
//	    go test -count=1 -run TestLoadEV -v ./internal/restapi/
//
// EMAILDATA_LOAD_DURATION (default 10s), EMAILDATA_LOAD_CONNS (default 32),
// EMAILDATA_LOAD_EV_MIN_RPS (default 20000; 0 only reports) and
// EMAILDATA_LOAD_EV_MAX_P99 (default 5ms; 0 only reports) tune it. The
// load tool and the server share the machine's cores;
// EMAILDATA_LOAD_APILOAD_PROCS sets the load tool's GOMAXPROCS (default:
// all cores).
func TestLoadEV(t *testing.T) {
	loadOnly(t)
	dur := envDuration(t, "EMAILDATA_LOAD_DURATION", 10*time.Second)
	// 16 connections keep the 2 cores busy without measuring queueing.
	conns := envInt(t, "EMAILDATA_LOAD_CONNS", 16)
	minRPS := envInt(t, "EMAILDATA_LOAD_EV_MIN_RPS", 20000)
	maxP99 := envDuration(t, "EMAILDATA_LOAD_EV_MAX_P99", 5*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := startAPI(ctx, restapi.Config{RateLimit: 1e9, Burst: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	target := "http://" + addr + "/v5/ev?" + url.Values{"api_key": {keyAcme}, "email": {"john@good.test"}}.Encode()

	// Warm the cache: the first request resolves good.test.
	resp, err := http.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const want = `{"safe_to_send":{"status":"valid","status_code":20,"address":"john@good.test","domain_type":"biz"}}`
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
		t.Fatalf("warm-up: %d %s", resp.StatusCode, body)
	}
	dnsBefore := world.Stats().DNSQueries

	bin := buildAPILoad(t)
	self0, kids0 := cputime.Self(), cputime.Running()
	load0 := cputime.LoadAverage()
	cmd := exec.Command(bin, "-url", target, "-c", strconv.Itoa(conns), "-n", "0", "-d", dur.String())
	if procs := envInt(t, "EMAILDATA_LOAD_APILOAD_PROCS", 0); procs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	}
	out, err := cmd.CombinedOutput()
	t.Logf("apiload output:\n%s", out)
	if err != nil {
		t.Fatalf("apiload: %v", err)
	}
	self1, kids1 := cputime.Self(), cputime.Running()
	dnsDuring := world.Stats().DNSQueries - dnsBefore

	rps, requests, codes := parseAPILoad(t, string(out))
	p99 := parseP99(t, string(out))
	loadCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	perReq := func(d time.Duration) string {
		return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3/float64(max(requests, 1)))
	}
	t.Logf("machine: %d CPUs, %s, load average before the run %s", runtime.NumCPU(), runtime.Version(), load0)
	t.Logf("CPU during the run (%s wall, %s of CPU available):", dur, time.Duration(runtime.NumCPU())*dur)
	t.Logf("  test process (API servers, manager, clients): %s = %s per request", (self1 - self0).Round(time.Millisecond), perReq(self1-self0))
	t.Logf("  apiload (load generator):                     %s = %s per request", loadCPU.Round(time.Millisecond), perReq(loadCPU))
	t.Logf("  kube-apiserver + etcd (envtest):              %s", (kids1 - kids0).Round(time.Millisecond))
	t.Logf("DNS queries to the mail world during the run: %d", dnsDuring)

	if codes != fmt.Sprintf("200=%d", requests) {
		t.Errorf("status codes %q: want every request answered 200", codes)
	}
	if dnsDuring != 0 {
		t.Errorf("%d DNS queries during the run: the domain should come from the cache", dnsDuring)
	}
	if minRPS > 0 && rps < float64(minRPS) {
		t.Errorf("%.0f requests/s, want at least %d (EMAILDATA_LOAD_EV_MIN_RPS)", rps, minRPS)
	}
	if maxP99 > 0 && p99 > maxP99 {
		t.Errorf("p99 latency %v, want under %v (EMAILDATA_LOAD_EV_MAX_P99)", p99, maxP99)
	}
}

var p99Field = regexp.MustCompile(`(?m)^latency:.*\bp99=(\S+)`)

func parseP99(t *testing.T, out string) time.Duration {
	t.Helper()
	m := p99Field.FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no p99 in the apiload output")
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("p99 %q: %v", m[1], err)
	}
	return d
}

// BenchmarkEVHandler measures the GET /v5/ev handler chain in process
// (request ID, recovery, routing, metrics, key check, verification with a
// warm DNS cache, JSON answer) without the network or net/http's
// connection handling: CPU and allocations per request of the API's own
// code.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 go test -run '^$' -bench EVHandler -benchmem ./internal/restapi/
func BenchmarkEVHandler(b *testing.B) {
	keys := apikey.NewStore()
	if err := restapi.UpsertKeySecret(keys, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: "key-ev-bench"},
		Data:       map[string][]byte{"key": []byte(keyAcme), "services": []byte("email_validation")},
	}); err != nil {
		b.Fatal(err)
	}
	engine := &verify.Engine{
		Lists:     emaillists.Default,
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: world.DNSAddr(), Timeout: time.Second}),
		ExtraTLDs: map[string]bool{"test": true},
	}
	h := restapi.New(restapi.Config{Namespace: nsSystem, RateLimit: 1e9, Burst: 1e9, Verifier: engine}, keys, nil, nil, nil, nil,
		slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))).Handler()
	for _, email := range []string{"john@good.test", "john.smith@gmail.com"} {
		b.Run(email, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v5/ev?"+url.Values{"api_key": {keyAcme}, "email": {email}}.Encode(), nil)
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, req) // warm the DNS cache
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps the status code only.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
