package localstack_test

// The 1,000-lists load run: skipped unless EMAILDATA_LOAD=1, so `make test`
// stays fast. Figures and the command are in docs/benchmarks.md:
//
//	EMAILDATA_LOAD=1 KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 \
//	    go test -count=1 -run TestLoadThousandLists -v ./internal/kits/localstack/

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/localstack"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/wiring"
)

// countingTransport counts the test's own requests, so they can be told
// from the stack's in the process-wide client metrics.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// metricSum sums a counter of the process's controller-runtime registry
// over the series whose labels include match.
func metricSum(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, match) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(match)
}

// peakRSS is this process's high-water resident set (VmHWM).
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestLoadThousandLists applies EMAILDATA_LOAD_LISTS (default 1,000)
// EmailLists with their ConfigMaps at once to the local stack (in-process
// executor, offline verification), as `kubectl apply -f dir/` would, and
// reports the time until all reach Results (target: 60 s), reconciles per
// second and per list, API requests per list, the process's peak memory,
// and the reconciles while idle afterwards (a hot loop would show there).
func TestLoadThousandLists(t *testing.T) {
	if os.Getenv("EMAILDATA_LOAD") != "1" {
		t.Skip("load benchmark; set EMAILDATA_LOAD=1 to run it")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	n := 1000
	if v := os.Getenv("EMAILDATA_LOAD_LISTS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	logf.SetLogger(logr.Discard())
	ctx := context.Background()
	vc := wiring.DefaultVerifyConfig()
	vc.DNSServer, vc.SMTP = "off", false
	s, err := localstack.Start(ctx, localstack.Options{
		Dir: t.TempDir(), CRDDir: "../../../config/crd/bases", AssetsDir: assets,
		MetricsAddr: "0", ProbeAddr: "0", APIListen: "127.0.0.1:0", Verify: vc,
		Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	}()
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var mine atomic.Int64
	rc.QPS, rc.Burst = 500, 1000
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &mine} }
	c, err := client.NewWithWatch(rc, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "load"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// Memory, sampled while the lists run.
	stopMem := make(chan struct{})
	var heapPeak atomic.Uint64
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > heapPeak.Load() {
				heapPeak.Store(ms.HeapInuse)
			}
			select {
			case <-stopMem:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	w, err := c.Watch(ctx, &listsv1.EmailListList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	reconciles0 := metricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": "emaillist"})
	requests0, mine0 := metricSum(t, "rest_client_requests_total", nil), mine.Load()
	self0, plane0 := cputime.Self(), cputime.Running()
	start := time.Now()

	// Apply everything at once from 32 clients, ConfigMap then list.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("list-%04d", i)
			body := fmt.Sprintf("id,name,email\n1,Ann,ann%d@example.com\n2,Bob,bob%d@gmial.com\n3,Cy,info@example.org\n4,Dee,not-an-email\n", i, i)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"list.csv": body}}
			l := builders.MakeEmailList(ns, name).ConfigMap(name, "list.csv").Header().EmailColumn(3).Obj()
			for _, o := range []client.Object{cm, l} {
				if err := c.Create(ctx, o); err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	applied := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	done := map[string]bool{}
	timeout := time.After(5 * time.Minute)
	for len(done) < n {
		select {
		case ev := <-w.ResultChan():
			l, ok := ev.Object.(*listsv1.EmailList)
			if !ok {
				continue
			}
			if l.Status.Phase == listsv1.PhaseFailed {
				t.Fatalf("%s failed: %v", l.Name, l.Status.Conditions)
			}
			if l.Status.Phase == listsv1.PhaseResults {
				done[l.Name] = true
			}
		case <-timeout:
			t.Fatalf("%d of %d lists reached Results within 5 minutes", len(done), n)
		}
	}
	all := time.Since(start)
	reconciles := metricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": "emaillist"}) - reconciles0
	requests := metricSum(t, "rest_client_requests_total", nil) - requests0 - float64(mine.Load()-mine0)
	self, plane := cputime.Self()-self0, cputime.Running()-plane0
	close(stopMem)

	// The last status writes cause one more look at each list; let those
	// settle (no reconcile for 2s), then nothing may reconcile while idle.
	count := func() float64 {
		return metricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": "emaillist"})
	}
	settleStart, last, quiet := time.Now(), count(), 0
	for quiet < 2 && time.Since(settleStart) < 30*time.Second {
		time.Sleep(time.Second)
		if c := count(); c == last {
			quiet++
		} else {
			last, quiet = c, 0
		}
	}
	total := last - reconciles0
	time.Sleep(10 * time.Second)
	idle := count() - last

	t.Logf("RESULT lists=%d applied_in=%.1fs all_results_in=%.1fs reconciles=%.0f (%.1f/list, %.0f/s) reconciles_with_settling=%.0f (%.1f/list) api_requests_by_stack=%.0f (%.1f/list) idle_reconciles_10s=%.0f peak_rss=%dMiB peak_heap_inuse=%dMiB cpu_stack_and_test=%.1fs cpu_apiserver_etcd=%.1fs loadavg=%s",
		n, applied.Seconds(), all.Seconds(), reconciles, reconciles/float64(n), reconciles/all.Seconds(),
		total, total/float64(n), requests, requests/float64(n), idle, peakRSS()>>20, heapPeak.Load()>>20, self.Seconds(), plane.Seconds(), cputime.LoadAverage())
	if all > 60*time.Second {
		t.Errorf("%d lists took %s to reach Results; the target is 60s", n, all.Round(time.Second))
	}
	if idle > 5 {
		t.Errorf("%.0f reconciles in 10 idle seconds: a hot loop", idle)
	}
	if rss := peakRSS(); rss > 512<<20 {
		t.Errorf("peak RSS %d MiB exceeds the manager's 512 MiB limit (config/manager)", rss>>20)
	}
}
