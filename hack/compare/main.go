// Command compare runs our verification engine and AfterShip's
// email-verifier (github.com/AfterShip/email-verifier) side by side over the
// same loopback mail world (internal/kits/mailworld) and the same address list,
// and reports throughput, CPU, load on the mail servers and accuracy
// against the world's ground truth per category.
//
//	cd hack/compare && go run . -domains 1000 -rows 20000 -concurrency 100
//
// With -world real the world is internal/kits/realmta's instead: real Postfix,
// postgrey, Exim and NSD from Debian (hack/install-mail-servers.sh), with
// the servers' log counts in the report:
//
//	go run . -world real -domains 400 -rows 4000 -concurrency 100
//
// -tools ours-mix is issue 22's mixed load: -lists lists at once, each by
// its own worker run process (or -procs), plus -api-procs processes
// answering /v5/ev-style single addresses, all on one world and sharing
// -fleet-url (mix.go):
//
//	go run . -tools ours-mix -lists 3 -api-procs 2 -api-rows 2000 -fleet-url 'redis://127.0.0.1:6397/0?prefix=m1:'
//
// -tools ours-jobs is the same list on the real Job path: the local stack
// (hack/localstack --executor=job) as a child process, the list uploaded
// through its REST API and run as -job-shards shards by Job pods (jobs.go); it
// needs KUBEBUILDER_ASSETS, as make run does:
//
//	go run . -tools ours-list,ours-jobs -job-shards 8 -fleet-url 'redis://127.0.0.1:6379/0?prefix=l1:' \
//	    -jobs-fleet-url 'redis://127.0.0.1:6379/0?prefix=j1:'
//
// Our engine's settings are a Configuration (config.go): -config FILE and
// -set key.path=value change them for every run of ours (worker run
// processes, the local stack and its Job pods), e.g. a longer DNS timeout:
//
//	go run . -tools ours-list -set verification.dns.timeout=10s
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
	"strings"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

var httpAttempts atomic.Int64

type denyTransport struct{}

func (denyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	httpAttempts.Add(1)
	return nil, errors.New("compare: HTTP disabled (tried " + r.URL.Host + ")")
}

func main() {
	var (
		g           gen
		child       = flag.Bool("world-child", false, "internal: serve the mail world (child process)")
		concurrency = flag.Int("concurrency", 100, "AfterShip workers; our verification.smtp.maxSessions and verification.dns.workers; our single-address workers")
		port        = flag.Int("port", 25, "SMTP port of the world's MX hosts (AfterShip only dials 25)")
		tools       = flag.String("tools", "aftership,ours-list", "runs, in order: aftership, ours-list (worker run), ours-jobs (the list on the local stack's Job path, -job-shards shards, see jobs.go; ours-jobs:rows, ours-jobs:domain and ours-jobs:mx set its -shard-by, each with its own fleet key prefix), ours-single (GET /v5/ev's path), ours-mix (-lists lists at once plus -api-procs API processes, see mix.go); empty: only the world and its floors")
		greyRetry   = flag.Duration("greylist-retry", 0, "our retry delay after a 451 (0: the world's -greylist, or production's 60s)")
		singleTO    = flag.Duration("single-timeout", 10*time.Second, "deadline per address for ours-single (GET /v5/ev default 10s)")
		workerBin   = flag.String("worker", "", "the worker binary for ours-list (default: built from ../../cmd/worker)")
		workerArgs  = flag.String("worker-args", "", "more flags for worker run, space separated (its own: e.g. --parallel 8; engine settings go in -config or -set; a CPU profile: EMAILDATA_CPUPROFILE=/tmp/w.prof in the environment)")
		confFile    = flag.String("config", "", "a Configuration (docs/configuration.md) whose engine settings our runs use (worker run processes, the local stack and its Job pods), over the tool's; the world's DNS server, SMTP port and loopback range stay the tool's")
		sets        []string
		outCSV      = flag.String("csv", "", "write per-row answers to this file")
		proxies     = flag.Int("proxies", 0, "our runs reach the world through this many SOCKS5 relays (verification.proxies.urls), each dialing from its own loopback address: egress identities a host with a reputation delay (-reputation) tells apart (0: none, straight from 127.0.0.1)")
		procs       = flag.Int("procs", 1, "ours-list: run the list as this many worker run processes at once, each on a contiguous part (what a list's Job pods do)")
		split       = flag.String("split", "rows", "ours-list with -procs: rows (contiguous parts, as a list's Job shards are), domain (by a hash of the domain: each domain's rows in one process) or mx (by a hash of the domain's primary MX host, as --shard-by mx)")
		noHistory   = flag.Bool("no-history", false, "ours-list: no verification history even with -fleet-url (a second run on the same -fleet-url and -loopback-base then reuses only what was learnt about the hosts)")
		fleetURL    = flag.String("fleet-url", "", "ours-list and ours-mix: the workers' (and API processes') fleet.url (use a fresh ?prefix= per run unless the run is meant to reuse the last one's learnt state and history)")
		mix         mixSettings
		jobs        jobsSettings
		api         apiChild
		apiChildRun = flag.Bool("api-child", false, "internal: one API process of ours-mix (child process)")
	)
	flag.IntVar(&mix.lists, "lists", 3, "ours-mix: lists run at once (the rows not given to the API processes, dealt out in turn), each by -procs worker run processes")
	flag.IntVar(&mix.apiProcs, "api-procs", 2, "ours-mix: API processes answering GET /v5/ev-style single addresses at the same time")
	flag.IntVar(&mix.apiRows, "api-rows", 2000, "ours-mix: rows verified by the API processes (spread evenly over the list), shared among them")
	flag.IntVar(&mix.apiConc, "api-concurrency", 10, "ours-mix: requests in flight per API process")
	flag.StringVar(&api.in, "api-in", "", "internal: the API child's addresses")
	flag.StringVar(&api.out, "api-out", "", "internal: the API child's answers")
	flag.StringVar(&api.dns, "api-dns", "", "internal: the API child's DNS server")
	flag.IntVar(&api.seat, "api-seat", 0, "internal: the API child's fleet seat")
	flag.IntVar(&api.seats, "api-seats", 1, "internal: the fleet seats of the mix")
	flag.IntVar(&jobs.shards, "job-shards", 8, "ours-jobs: the list's shards, so Job pods (pipeline.maxShards; the stack's default parallelism runs 8 at once)")
	flag.StringVar(&jobs.fleetURL, "jobs-fleet-url", "", "ours-jobs: the stack's fleet.url, passed on to its pods (default: -fleet-url; give another ?prefix= when ours-list runs in the same invocation, or the Job run would reuse its history)")
	flag.StringVar(&jobs.bin, "stack-bin", "", "ours-jobs: directory holding the localstack and worker binaries (default: built from ../../hack/localstack and ../../cmd/worker)")
	flag.StringVar(&jobs.shardBy, "shard-by", "", "ours-jobs: pipeline.shardBy (rows, domain or mx; empty: the default, mx)")
	flag.BoolVar(&jobs.keep, "keep-stack", false, "ours-jobs: keep the local stack's state directory (its log, the pods' logs)")
	flag.DurationVar(&jobs.timeout, "stack-timeout", 15*time.Minute, "ours-jobs: longest wait for the stack to start and the list to reach Results")
	flag.Func("set", "a Configuration key for our runs, key.path=value, over -config (repeat it): e.g. -set verification.dns.timeout=10s", func(v string) error {
		sets = append(sets, v)
		return nil
	})
	g.bind(flag.CommandLine)
	flag.Parse()
	conf, err := userConfig(*confFile, sets)
	if err != nil {
		log.Fatal(err)
	}
	if jobs.fleetURL == "" {
		jobs.fleetURL = *fleetURL
	}
	if *child {
		runWorldChild(g, *port)
		return
	}
	log.SetFlags(log.Ltime)
	if *apiChildRun {
		s := settings{concurrency: *concurrency, port: *port, greylistRetry: *greyRetry, singleTimeout: *singleTO, fleetURL: *fleetURL, conf: conf}
		if err := runAPIChild(api, s); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *proxies > 0 {
		urls, stop, err := startProxies(*proxies)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
		if conf == nil {
			conf = map[string]any{}
		}
		if err := setPath(conf, "verification.proxies.urls", toAny(urls)); err != nil {
			log.Fatal(err)
		}
	}
	installResolver()
	http.DefaultTransport = denyTransport{}
	http.DefaultClient = &http.Client{Transport: denyTransport{}}

	var doms []mailworld.Domain
	var rows []string
	if g.real() {
		_, rows = g.generateReal()
	} else {
		doms, rows = g.generate()
	}
	retry := *greyRetry
	if retry == 0 {
		retry = time.Minute
		if (g.profile == "realistic" || g.real()) && g.greylist > 0 {
			retry = g.greylist
		}
	}
	s := settings{concurrency: *concurrency, port: *port, greylistRetry: retry, singleTimeout: *singleTO, worker: *workerBin, workerArgs: strings.Fields(*workerArgs), procs: *procs, fleetURL: *fleetURL, split: *split, conf: conf, noHistory: *noHistory}
	var truth, under, shapes []string
	var runs []*runResult
	for _, tool := range strings.Split(*tools, ",") {
		tool = strings.TrimSpace(tool)
		if tool == "" {
			continue
		}
		w, err := startWorld(g, *port)
		if err != nil {
			log.Fatal(err)
		}
		if w.hello.Port != 25 {
			log.Printf("warning: world SMTP port %d; AfterShip only dials 25", w.hello.Port)
		}
		if truth == nil {
			truth, under, shapes = w.hello.Truth, w.hello.Underlying, w.hello.Shape
		} else if strings.Join(truth, ",") != strings.Join(w.hello.Truth, ",") {
			log.Fatal("the worlds of two runs differ")
		}
		setResolverTarget(w.hello.DNS)
		runtime.GC()
		debug.FreeOSMemory()
		dials0 := resolverDials.Load()
		log.Printf("%s: %d rows, world DNS %s, SMTP port %d", tool, len(rows), w.hello.DNS, w.hello.Port)
		r := &runResult{name: tool}
		listWall := 0.0 // ours-jobs: the wall measured by the tool
		cpu0, t0 := cputime.Self().Seconds(), time.Now()
		kind, variant, _ := strings.Cut(tool, ":")
		switch kind {
		case "aftership":
			r.pred, r.raw = runAfterShip(rows, s)
			r.cpu = cputime.Self().Seconds() - cpu0
		case "ours-list":
			r.pred, r.raw, r.cpu, r.note, err = runOursList(w.hello.DNS, rows, s)
			if err != nil {
				w.stop()
				log.Fatal(err)
			}
		case "ours-jobs":
			// Its wall is the list's, creation to Results, not the stack's start.
			js, err := jobs.variant(variant)
			if err == nil {
				r.pred, r.raw, r.cpu, listWall, r.note, err = runOursJobs(w.hello.DNS, rows, s, js)
			}
			if err != nil {
				w.stop()
				log.Fatal(err)
			}
		case "ours-mix":
			r.pred, r.raw, r.cpu, r.note, err = runOursMix(w.hello.DNS, rows, w.hello.Truth, w.hello.Underlying, s, mix)
			if err != nil {
				w.stop()
				log.Fatal(err)
			}
		case "ours-single":
			var st smtpprobe.Stats
			r.pred, r.raw, st = runOursSingle(w.hello.DNS, rows, s)
			r.cpu = cputime.Self().Seconds() - cpu0
			r.note = fmt.Sprintf("prober: %d dials, %d sessions, %d catch-all probes, %d deferred (4xx)", st.Dials, st.Sessions, st.CatchAllProbes, st.Deferred)
		default:
			w.stop()
			log.Fatalf("unknown tool %q", tool)
		}
		r.wall = time.Since(t0).Seconds()
		if listWall > 0 {
			r.wall = listWall
		}
		r.dnsDial = resolverDials.Load() - dials0
		if tool == "aftership" {
			r.note = fmt.Sprintf("%d resolver dials", r.dnsDial)
		}
		rep, err := w.report()
		setResolverTarget("")
		w.stop()
		if err != nil {
			log.Fatal(err)
		}
		r.world = rep
		log.Printf("%s: %.1f s, %.0f rows/s, CPU %.2f s (world %.2f s)", tool, r.wall, float64(len(rows))/r.wall, r.cpu, rep.CPUSecs)
		runs = append(runs, r)
		time.Sleep(time.Second) // let the previous world's sockets go
	}
	if n := httpAttempts.Load(); n != 0 {
		log.Printf("warning: %d HTTP attempts were blocked", n)
	}

	var lim limitsFloor
	if g.real() {
		fmt.Printf("\nworld: real (Postfix, postgrey, Exim, NSD; internal/kits/realmta), seed %d, %d domains, %d rows, postgrey delay %v, anvil rate limit %d/min; concurrency %d; our greylist retry %v; %s/%s, %d CPUs\n",
			g.seed, g.domains, len(rows), g.greylist, g.anvilRate, *concurrency, retry, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	} else {
		fmt.Printf("\nworld: %s, seed %d, %d domains, %d rows, greylisting %v, tarpits %v, Postfix error limits %v, pushback %v, reputation %v, %d egress identities, round trips up to %v, greetings up to %v late; concurrency %d; our greylist retry %v; %s/%s, %d CPUs\n",
			g.profile, g.seed, g.domains, len(rows), g.greylist, g.tarpits, g.postfix, g.pushback, g.reputation, max(1, *proxies), g.latencyMax, g.greetMax, *concurrency, retry, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
		computeSessionFloor(doms, rows, *concurrency).print(os.Stdout, *concurrency)
		lim = computeLimitsFloor(doms, rows, max(1, *proxies))
		lim.print(os.Stdout)
	}
	if len(runs) == 0 {
		return
	}
	printReport(os.Stdout, runs, rows, truth, under, retry)
	if !g.real() {
		printAgainstLimits(os.Stdout, runs, lim)
		printExcess(os.Stdout, runs, lim)
	}
	shapeOf := syntheticShapes(doms)
	if g.real() {
		shapeOf = func(i int, _ string) string { return shapes[i] }
		printByShape(os.Stdout, runs, truth, under, shapes)
	}
	printErrors(os.Stdout, runs, rows, truth, under, shapeOf)

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
		for i, a := range rows {
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

// toAny is a YAML document's list of strings.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
