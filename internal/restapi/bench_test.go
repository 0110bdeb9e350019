package restapi_test

// Load benchmarks of the API, run against the envtest suite of TestMain.
// They are skipped unless EMAILDATA_LOAD=1, so `make test` stays fast:
//
//	EMAILDATA_LOAD=1 KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 \
//	    go test -run 'TestLoadStatusGET|TestLargeUploadMemory' -v ./internal/restapi/
//
// Results and the exact commands are recorded in docs/benchmarks.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestLoadStatusGET drives GET /v5/list/{list_id} with hack/apiload and
// reports requests/s. The API under load is a second server without a
// useful rate limit, whose requests to the kube-apiserver are counted: a
// status read must come from the informer cache, so the count stays 0.
//
// EMAILDATA_LOAD_DURATION (default 10s), EMAILDATA_LOAD_CONNS (default 32)
// and EMAILDATA_LOAD_MIN_RPS (default 5000; 0 only reports) tune it.
func TestLoadStatusGET(t *testing.T) {
	loadOnly(t)
	dur := envDuration(t, "EMAILDATA_LOAD_DURATION", 10*time.Second)
	conns := envInt(t, "EMAILDATA_LOAD_CONNS", 32)
	minRPS := envInt(t, "EMAILDATA_LOAD_MIN_RPS", 5000)

	// One finished list, submitted through the suite's API.
	id := listID(t, submit(t, keyAcme, q("email_column", "3", "header", "true", "delimiter", ","), "people.csv", []byte(peopleCSV)))
	waitStatus(t, keyAcme, id, "Results")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var apiCalls atomic.Int64
	rc := rest.CopyConfig(cfg)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, &apiCalls} })
	addr := runAPI(t, ctx, rc, restapi.RunOptions{Config: restapi.Config{RateLimit: 1e9, Burst: 1e9}, Store: store})
	target := fmt.Sprintf("http://%s/v5/list/%d", addr, id)
	// The list must already be in the new server's cache.
	if code, err := httpGet(target, keyAcme); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", target, code, err)
	}

	bin := buildAPILoad(t)
	before := apiCalls.Load()
	self0, kids0 := cputime.Self(), cputime.Running()
	load0 := cputime.LoadAverage()
	cmd := exec.Command(bin, "-url", target, "-H", "api_key: "+keyAcme,
		"-c", strconv.Itoa(conns), "-n", "0", "-d", dur.String())
	out, err := cmd.CombinedOutput()
	t.Logf("apiload output:\n%s", out)
	if err != nil {
		t.Fatalf("apiload: %v", err)
	}
	self1, kids1 := cputime.Self(), cputime.Running()
	during := apiCalls.Load() - before

	rps, requests, codes := parseAPILoad(t, string(out))
	loadCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	perReq := func(d time.Duration) string {
		return fmt.Sprintf("%.0f µs", float64(d.Microseconds())/float64(max(requests, 1)))
	}
	t.Logf("machine: %d CPUs, %s, load average before the run %s", runtime.NumCPU(), runtime.Version(), load0)
	t.Logf("CPU during the run (%s wall, %s of CPU available):", dur, time.Duration(runtime.NumCPU())*dur)
	t.Logf("  test process (API servers, manager, clients): %s = %s per request", (self1 - self0).Round(time.Millisecond), perReq(self1-self0))
	t.Logf("  apiload (load generator):                     %s = %s per request", loadCPU.Round(time.Millisecond), perReq(loadCPU))
	t.Logf("  kube-apiserver + etcd (envtest):              %s", (kids1 - kids0).Round(time.Millisecond))
	t.Logf("requests (watches aside) to the kube-apiserver from the API under load during the run: %d", during)

	if during != 0 {
		t.Errorf("the API under load sent %d requests to the kube-apiserver: status reads are not served from the cache", during)
	}
	if codes != fmt.Sprintf("200=%d", requests) {
		t.Errorf("status codes %q: want every request answered 200", codes)
	}
	if minRPS > 0 && rps < float64(minRPS) {
		t.Errorf("%.0f requests/s, want at least %d (EMAILDATA_LOAD_MIN_RPS)", rps, minRPS)
	}
}

// TestLargeUploadMemory streams a generated CSV (500 MB by default;
// EMAILDATA_LOAD_UPLOAD_MB) to an API server with its own file:// store,
// as a raw text/csv body and as a multipart/form-data part, and samples the
// process RSS meanwhile: an upload must stream, growing the RSS by less
// than 64 MiB.
//
// The test process holds everything: the API server, the client and the
// body generator, the manager and the envtest clients, so the figure is an
// upper bound for the API server. The list an upload creates names a blob
// the manager cannot see (the manager's store is the suite's mem://), so
// the manager only waits for the source (Pending, WaitingForSource) and
// never scans 500 MB; the list is deleted at the end, and so is the stored
// file. (The manager may log a "not found" reconcile error for it.)
func TestLargeUploadMemory(t *testing.T) {
	loadOnly(t)
	size := int64(envInt(t, "EMAILDATA_LOAD_UPLOAD_MB", 500)) * 1e6

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	fileStore, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fileStore.Close()
	addr := runAPI(t, ctx, cfg, restapi.RunOptions{
		Config: restapi.Config{MaxUploadBytes: 1 << 30, RateLimit: 1000},
		Store:  fileStore,
	})
	target := "http://" + addr + "/v5/list?name=big.csv&delimiter=%2C&header=true&email_column=4"

	t.Run("text/csv", func(t *testing.T) {
		measureUpload(t, target, dir, size, "text/csv", size, func(w io.Writer) error { return generateCSV(w, size) })
	})
	t.Run("multipart", func(t *testing.T) {
		// Build the envelope once with an empty part to learn its length.
		var env bytes.Buffer
		mw := multipart.NewWriter(&env)
		if _, err := mw.CreateFormFile("file", "big.csv"); err != nil {
			t.Fatal(err)
		}
		head := append([]byte(nil), env.Bytes()...)
		_ = mw.Close()
		tail := env.Bytes()[len(head):]
		measureUpload(t, target, dir, size, mw.FormDataContentType(), int64(len(head))+size+int64(len(tail)), func(w io.Writer) error {
			if _, err := w.Write(head); err != nil {
				return err
			}
			if err := generateCSV(w, size); err != nil {
				return err
			}
			_, err := w.Write(tail)
			return err
		})
	})
}

// measureUpload POSTs a body of length bytes, written on the fly by gen,
// and checks the RSS growth and that size bytes reached the store in dir.
func measureUpload(t *testing.T, target, dir string, size int64, contentType string, length int64, gen func(io.Writer) error) {
	const limit = 64 << 20
	// Baseline: after a GC, the highest of a few samples (the manager and
	// informers run in this process too).
	runtime.GC()
	debug.FreeOSMemory()
	var base int64
	for range 5 {
		base = max(base, rss(t, "VmRSS"))
		time.Sleep(100 * time.Millisecond)
	}
	hwmReset := resetPeakRSS()

	var peak atomic.Int64
	peak.Store(base)
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if v := rss(t, "VmRSS"); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(gen(pw)) }()
	req, err := http.NewRequest(http.MethodPost, target, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("api_key", keyAcme)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Minute}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	close(stopSampling)
	sampler.Wait()
	hwm := rss(t, "VmHWM")
	if !hwmReset {
		t.Log("could not reset VmHWM; only the 100 ms samples count")
		hwm = peak.Load()
	}

	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	var acc struct {
		ListID    int64 `json:"list_id"`
		SizeBytes int64 `json:"size_bytes"`
	}
	if err := json.Unmarshal(body, &acc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l := &listsv1.EmailList{}
		l.Namespace, l.Name = nsSystem, fmt.Sprintf("list-%d", acc.ListID)
		_ = k8s.Delete(context.Background(), l)
		_ = os.RemoveAll(filepath.Join(dir, "uploads"))
	})
	if acc.SizeBytes != size {
		t.Errorf("size_bytes %d, want %d", acc.SizeBytes, size)
	}
	if n := storedSize(t, dir); n != size {
		t.Errorf("the file store holds %d bytes, want %d", n, size)
	}

	growth := peak.Load() - base
	mediaType, _, _ := strings.Cut(contentType, ";")
	t.Logf("uploaded %d bytes (%s body of %d bytes) in %s: %.0f MB/s", size, mediaType, length, elapsed.Round(time.Millisecond), float64(size)/1e6/elapsed.Seconds())
	t.Logf("RSS: baseline %.1f MiB, peak (100 ms samples) %.1f MiB, growth %.1f MiB; VmHWM after the upload %.1f MiB (growth %.1f MiB)",
		mib(base), mib(peak.Load()), mib(growth), mib(hwm), mib(hwm-base))
	if growth >= limit || hwm-base >= limit {
		t.Errorf("RSS grew by %.1f MiB (VmHWM %.1f MiB) during the upload, want under %.0f MiB", mib(growth), mib(hwm-base), mib(limit))
	}
}

func loadOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("EMAILDATA_LOAD") != "1" {
		t.Skip("load benchmark; set EMAILDATA_LOAD=1 to run it")
	}
}

// runAPI runs an API server on a loopback port until ctx ends, like
// startAPI but with the given client config and options, and waits until
// it knows keyAcme.
func runAPI(t *testing.T, ctx context.Context, rc *rest.Config, o restapi.RunOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	errc := make(chan error, 1)
	o.Listener, o.KeyNamespace, o.ShutdownTimeout = ln, nsSystem, 20*time.Second
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Ready = func(string) { close(ready) }
	go func() { errc <- restapi.Run(ctx, rc, o) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("API: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("API did not start")
	}
	addr := ln.Addr().String()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, err := httpGet("http://"+addr+"/v5/list/999999999", keyAcme); err == nil && code != http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API did not load the keys")
		}
	}
	return addr
}

// buildAPILoad builds hack/apiload into a temp dir.
func buildAPILoad(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "apiload")
	cmd := exec.Command("go", "build", "-o", bin, "./hack/apiload")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/apiload: %v\n%s", err, out)
	}
	return bin
}

var (
	rpsLine      = regexp.MustCompile(`(?m)^requests/s:\s+([0-9.]+)$`)
	requestsLine = regexp.MustCompile(`(?m)^requests:\s+([0-9]+) in`)
	codesLine    = regexp.MustCompile(`(?m)^status codes:\s*(.*)$`)
)

func parseAPILoad(t *testing.T, out string) (rps float64, requests int64, codes string) {
	t.Helper()
	m1, m2, m3 := rpsLine.FindStringSubmatch(out), requestsLine.FindStringSubmatch(out), codesLine.FindStringSubmatch(out)
	if m1 == nil || m2 == nil || m3 == nil {
		t.Fatalf("cannot parse the apiload output")
	}
	rps, _ = strconv.ParseFloat(m1[1], 64)
	requests, _ = strconv.ParseInt(m2[1], 10, 64)
	return rps, requests, strings.TrimSpace(m3[1])
}

// countingRT counts requests to the kube-apiserver, watches aside (the
// informers re-open theirs every 5–10 minutes).
type countingRT struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") != "true" {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// rss reads a size field (VmRSS, VmHWM) of /proc/self/status, in bytes.
func rss(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux ≥ 4.0); false
// when it cannot.
func resetPeakRSS() bool { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// generateCSV writes exactly size bytes of a CSV list to w, row by row
// through one small buffer, never holding the list.
func generateCSV(w io.Writer, size int64) error {
	buf := make([]byte, 0, 256<<10)
	buf = append(buf, "id,first,last,email,city\n"...)
	for id := int64(1); size > 0; id++ {
		buf = strconv.AppendInt(buf, id, 10)
		buf = append(buf, ",John,Doe,john.doe"...)
		buf = strconv.AppendInt(buf, id, 10)
		buf = append(buf, "@example.com,Springfield\n"...)
		if len(buf) < 240<<10 && int64(len(buf)) < size {
			continue
		}
		chunk := buf[:min(int64(len(buf)), size)]
		chunk[len(chunk)-1] = '\n'
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		size -= int64(len(chunk))
		buf = buf[:0]
	}
	return nil
}

// storedSize sums the sizes of the files in the store directory.
func storedSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// TestLimiterSurvivesKeyUpdate is a regression test, kept here with the
// load tests: the per-key limiter belongs to the key Secret, so an update
// or an informer resync of the Secret (a new *apikey.Key each time) neither
// resets the key's rate limit nor adds a limiter. It needs no cluster: the
// requests are refused (429) or fail on the list ID (400) before any read.
func TestLimiterSurvivesKeyUpdate(t *testing.T) {
	keys := apikey.NewStore()
	const key = "limiter-test-key-000001"
	sec := func(rateLimit string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: "key-limiter"},
			Data:       map[string][]byte{"key": []byte(key), "services": []byte("email_validation"), "rateLimit": []byte(rateLimit)},
		}
	}
	if err := restapi.UpsertKeySecret(keys, sec("1")); err != nil { // 1/s, burst 2
		t.Fatal(err)
	}
	h := restapi.New(restapi.Config{Namespace: nsSystem}, keys, nil, nil, nil, nil, nil).Handler()
	get := func() int {
		req := httptest.NewRequest(http.MethodGet, "/v5/list/not-a-number", nil)
		req.Header.Set("api_key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i, want := range []int{http.StatusBadRequest, http.StatusBadRequest, http.StatusTooManyRequests} {
		if got := get(); got != want {
			t.Fatalf("request %d: %d, want %d", i+1, got, want)
		}
	}
	if err := restapi.UpsertKeySecret(keys, sec("1")); err != nil { // a resync: same data, new *Key
		t.Fatal(err)
	}
	if got := get(); got != http.StatusTooManyRequests {
		t.Errorf("after a resync of the Secret: %d, want 429 (the limit was reset)", got)
	}
	if err := restapi.UpsertKeySecret(keys, sec("1000")); err != nil { // a new limit applies from the next request
		t.Fatal(err)
	}
	_ = get() // may still be 429: tokens accrued at 1/s until this request
	time.Sleep(20 * time.Millisecond)
	if got := get(); got != http.StatusBadRequest {
		t.Errorf("after raising the Secret's rateLimit: %d, want 400", got)
	}
}
