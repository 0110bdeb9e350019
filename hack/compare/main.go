// Command compare runs our verification engine and AfterShip's
// email-verifier (github.com/AfterShip/email-verifier) side by side over the
// same loopback mail world (internal/mailworld) and the same address list,
// and reports throughput, CPU, load on the mail servers and accuracy
// against the world's ground truth per category.
//
//	cd hack/compare && go run . -domains 300 -rows 10000 -seed 1 -concurrency 32
//
// AfterShip dials port 25 (hard-coded), so the world's MX hosts listen on
// port 25 of their 127.x.y.z addresses: run as root (or with
// CAP_NET_BIND_SERVICE). Its DNS lookups go through net.DefaultResolver,
// which this program replaces with one that only talks to the world's DNS
// server. Nothing leaves the loopback interface; HTTP is disabled.
//
// It lives in its own module (so the main go.mod does not need AfterShip)
// but may import the main module's internal packages: the internal rule is
// about import paths, and github.com/emaildata/emaildata/hack/compare is
// under github.com/emaildata/emaildata.
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/mailworld"
	"github.com/emaildata/emaildata/internal/smtpprobe"
)

var httpAttempts atomic.Int64

type denyTransport struct{}

func (denyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	httpAttempts.Add(1)
	return nil, errors.New("compare: HTTP disabled (tried " + r.URL.Host + ")")
}

func main() {
	var (
		child       = flag.Bool("world-child", false, "internal: serve the mail world (child process)")
		seed        = flag.Int64("seed", 1, "world and list seed")
		domains     = flag.Int("domains", 300, "domains in the world")
		rows        = flag.Int("rows", 10000, "addresses in the list")
		concurrency = flag.Int("concurrency", 32, "AfterShip workers, our DomainWorkers, our single-address workers")
		port        = flag.Int("port", 25, "SMTP port of the world's MX hosts (AfterShip only dials 25)")
		tools       = flag.String("tools", "aftership,ours-batch", "runs, in order: aftership, ours-batch, ours-single")
		greyRetry   = flag.Duration("greylist-retry", 3*time.Second, "our GreylistRetry (production: 60s against real windows of minutes; the world's window is 2s)")
		greyRetries = flag.Int("greylist-retries", 0, "our MaxGreylistRetries (0: default 3; negative: none)")
		singleTO    = flag.Duration("single-timeout", 10*time.Second, "deadline per address for ours-single (GET /v5/ev default 10s)")
		outCSV      = flag.String("csv", "", "write per-address answers to this file")
	)
	flag.IntVar(&batchRows, "batch", batchRows, "rows per VerifyBatch call in ours-batch (the list worker uses 10,000)")
	flag.Parse()
	if *child {
		runWorldChild(*seed, *domains, *rows, *port)
		return
	}
	log.SetFlags(log.Ltime)
	installResolver()
	http.DefaultTransport = denyTransport{}
	http.DefaultClient = &http.Client{Transport: denyTransport{}}

	doms, addrs := mailworld.Generate(*seed, *domains, *rows)
	s := settings{concurrency: *concurrency, port: *port, greylistRetry: *greyRetry, greyRetries: *greyRetries, singleTimeout: *singleTO}
	var truth, under []string
	var runs []*runResult
	for _, tool := range strings.Split(*tools, ",") {
		tool = strings.TrimSpace(tool)
		w, err := startWorld(*seed, *domains, *rows, *port)
		if err != nil {
			log.Fatal(err)
		}
		if w.hello.Port != 25 {
			log.Printf("warning: world SMTP port %d; AfterShip only dials 25", w.hello.Port)
		}
		if truth == nil {
			truth, under = w.hello.Truth, w.hello.Underlying
		} else if strings.Join(truth, ",") != strings.Join(w.hello.Truth, ",") {
			log.Fatal("the worlds of two runs differ")
		}
		setResolverTarget(w.hello.DNS)
		runtime.GC()
		debug.FreeOSMemory()
		dials0 := resolverDials.Load()
		log.Printf("%s: %d rows, world DNS %s, SMTP port %d", tool, len(addrs), w.hello.DNS, w.hello.Port)
		r := &runResult{name: tool}
		cpu0, t0 := cpuSecs(), time.Now()
		var st smtpprobe.Stats
		var chunks []time.Duration
		switch tool {
		case "aftership":
			r.pred, r.raw = runAfterShip(addrs, s)
		case "ours-batch":
			r.pred, r.raw, st, chunks = runOursBatch(w.hello.DNS, addrs, s)
		case "ours-single":
			r.pred, r.raw, st = runOursSingle(w.hello.DNS, addrs, s)
		default:
			w.stop()
			log.Fatalf("unknown tool %q", tool)
		}
		r.wall, r.cpu = time.Since(t0).Seconds(), cpuSecs()-cpu0
		r.dnsDial = resolverDials.Load() - dials0
		if tool == "aftership" {
			r.note = fmt.Sprintf("%d resolver dials", r.dnsDial)
		} else {
			r.note = fmt.Sprintf("prober: %d dials, %d sessions, %d catch-all probes, %d deferred (4xx)", st.Dials, st.Sessions, st.CatchAllProbes, st.Deferred)
			if len(chunks) > 0 {
				sorted := slices.Clone(chunks)
				slices.Sort(sorted)
				r.note += fmt.Sprintf("; %d chunks of %d: min %.1f s, median %.1f s, max %.1f s", len(chunks), batchRows,
					sorted[0].Seconds(), sorted[len(sorted)/2].Seconds(), sorted[len(sorted)-1].Seconds())
			}
			if r.dnsDial != 0 {
				r.note += fmt.Sprintf(", %d stdlib resolver dials", r.dnsDial)
			}
		}
		rep, err := w.report()
		setResolverTarget("")
		w.stop()
		if err != nil {
			log.Fatal(err)
		}
		r.world = rep
		log.Printf("%s: %.1f s, %.0f rows/s, CPU %.2f s (world %.2f s)", tool, r.wall, float64(len(addrs))/r.wall, r.cpu, rep.CPUSecs)
		runs = append(runs, r)
		time.Sleep(time.Second) // let the previous world's sockets go
	}
	if n := httpAttempts.Load(); n != 0 {
		log.Printf("warning: %d HTTP attempts were blocked", n)
	}

	fmt.Printf("\nseed %d, %d domains, %d rows, concurrency %d, %s/%s, %d CPUs\n", *seed, *domains, len(addrs), *concurrency, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	printReport(os.Stdout, runs, truth, under)
	printErrors(os.Stdout, runs, addrs, truth, under, doms)

	if *outCSV != "" {
		f, err := os.Create(*outCSV)
		if err != nil {
			log.Fatal(err)
		}
		cw := csv.NewWriter(f)
		hdr := []string{"address", "truth", "underlying"}
		for _, r := range runs {
			hdr = append(hdr, r.name, r.name+"_raw")
		}
		_ = cw.Write(hdr)
		for i, a := range addrs {
			row := []string{a, truth[i], under[i]}
			for _, r := range runs {
				row = append(row, r.pred[i], r.raw[i])
			}
			_ = cw.Write(row)
		}
		cw.Flush()
		if err := errors.Join(cw.Error(), f.Close()); err != nil {
			log.Fatal(err)
		}
	}
}
