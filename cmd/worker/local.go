package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/wiring"
)

// localRun is `worker run`: a local file through the same pipeline the
// cluster runs, through an in-memory store.
type localRun struct {
	in, out, service, delim, peopleURL string
	historyTenant                      string
	shardBy                            string
	header, stats, escapeFormulas      bool
	emailCol, parallel                 int
	shardBytes, dedupMemory            int64
	progress                           time.Duration
	lim                                *listfile.Limits
	vc                                 wiring.VerifyConfig
	stderr                             io.Writer
}

func (r *localRun) flags(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(r.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: worker run --in list.csv --out result.csv [flags]\n\n"+
			"Verifies (or enriches) a local list with the same pipeline the cluster runs, writing\n"+
			"rows as shards finish. Verification uses the system resolver and SMTP on port 25\n"+
			"unless the --config file says otherwise (verification.dns.server: \"off\": syntax, corrections\n"+
			"and lists only; docs/configuration.md). Its working store goes under $TMPDIR.\n\nflags:\n")
		fs.PrintDefaults()
	}
	conf, err := configFlag(fs, args)
	if err != nil {
		return err
	}
	printConfig := fs.Bool("print-config", false, "print the effective configuration (the --config file, its defaults and the flags given; secrets redacted) and exit")
	fs.StringVar(&r.in, "in", "", "input list file (.csv, .txt or .zip)")
	fs.StringVar(&r.out, "out", "", "result file to write")
	fs.StringVar(&r.service, "service", services.EmailValidation, "list service")
	fs.StringVar(&r.delim, "delimiter", listfile.DelimiterName(listfile.DefaultDelimiter), strings.Join(listfile.DelimiterNames(), ", "))
	fs.BoolVar(&r.header, "header", false, "the first row is a header")
	fs.BoolVar(&r.escapeFormulas, "escape-formulas", false, "escape spreadsheet formulas in the input's own cells too, as the service's columns always are (EmailList spec.format.escapeFormulas)")
	fs.IntVar(&r.emailCol, "email-column", int(listfile.DefaultColumn), "1-based email column")
	fs.IntVar(&r.parallel, "parallel", 4, "shards run at once")
	pipeline.BindShardBy(fs, &r.shardBy, pipeline.ShardByRows)
	fs.BoolVar(&r.stats, "stats", false, "print DNS and SMTP counters and where the time went")
	fs.DurationVar(&r.progress, "progress", 10*time.Second, "progress report interval on stderr (0: none)")
	// The pipeline's sizes and input limits, and the people store, are
	// the file's (pipeline.*, people.url): one home for each setting.
	r.shardBytes, r.dedupMemory = conf.Pipeline.ShardBytes.Value(), conf.Pipeline.DedupMemory.Value()
	lim := wiring.LimitsFrom(conf)
	r.lim = &lim
	r.peopleURL = conf.People.URL
	// The engine's settings (verification.*, fleet) are the file's too;
	// so is the history tenant. The working store goes under $TMPDIR.
	r.vc = wiring.VerifyFrom(conf)
	r.historyTenant = conf.Verification.History.Tenant
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *printConfig {
		if wiring.PrintConfig(os.Stdout, conf, fs) != 0 {
			return usageError{errors.New("the configuration could not be printed")}
		}
		return flag.ErrHelp // done, successfully
	}
	if err := fleetSeatsEnv(&r.vc); err != nil {
		return usageError{err}
	}
	if r.in == "" || r.out == "" {
		return usageError{errors.New("--in and --out are required")}
	}
	if err := pipeline.CheckShardBy(r.shardBy); err != nil {
		return usageError{err}
	}
	if r.parallel < 1 {
		return usageError{errors.New("--parallel must be at least 1")}
	}
	return nil
}

// fleetSeatsEnv reads the seats of processes sharing each host's budget
// while the fleet backend is unreachable ($EMAILDATA_FLEET_SEATS; the
// seat is $JOB_COMPLETION_INDEX), as a Job's pods do: runs on several
// machines set them per process.
func fleetSeatsEnv(vc *wiring.VerifyConfig) error {
	v := os.Getenv(wiring.EnvFleetSeats)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("$%s: %w", wiring.EnvFleetSeats, err)
	}
	vc.Fleet.Seats = n
	return nil
}

// runLocal processes a local file: `worker run`.
func runLocal(ctx context.Context, args []string, stderr io.Writer) error {
	r := &localRun{stderr: stderr}
	if err := r.flags(args); err != nil {
		return err
	}
	d, err := listfile.ParseDelimiter(r.delim)
	if err != nil {
		return usageError{fmt.Errorf("--delimiter %q: want comma, pipe or tab", r.delim)}
	}
	r.announce()
	if err := tuneGC(); err != nil {
		return usageError{err}
	}
	if path := os.Getenv(envCPUProfile); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r.vc.NotAllowed = func(ip string) {
		fmt.Fprintf(stderr, "note: MX host address %s is not public: not probed (its mailboxes stay unconfirmed; verification.smtp.allowCIDRs opens ranges)\n", ip)
	}
	reg, engine, err := registryEngine(ctx, r.vc.SharedBy(r.parallel), r.peopleURL, nil)
	if err != nil {
		return err
	}
	svc, err := reg.Lookup(r.service)
	if err != nil {
		return usageError{err}
	}
	store, cleanup, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	t0, cpu0 := time.Now(), cputime.Self()
	keys := blobstore.ListKeys{UID: "local"}
	cfg := pipeline.DefaultConfig()
	cfg.Limits = *r.lim
	if r.shardBytes > 0 {
		cfg.ShardBytes = r.shardBytes
	}
	cfg.DedupMemory = r.dedupMemory
	cfg.ShardBy = r.shardBy
	plan, err := pipeline.Prepare(ctx, store, keys, pipeline.Request{
		Source:  pipeline.Source{Key: "upload", Name: filepath.Base(r.in)},
		Dialect: listfile.Dialect{Delimiter: d, Header: r.header, EmailColumn: listfile.Column(r.emailCol)},
		Service: r.service, HistoryTenant: r.historyTenant,

		EscapeFormulas: r.escapeFormulas,
	}, svc, cfg)
	if err != nil {
		return err
	}
	done := r.startShards(ctx, store, keys, plan, reg, cfg.Limits)
	stopProgress := r.reportProgress(ctx, store, keys, plan, engine, t0)
	res, err := r.write(ctx, store, keys, plan, done)
	stopProgress()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d rows in %d shards -> %s (%d bytes) in %.1f s\n", res.Rows, len(plan.Shards), r.out, res.Bytes, time.Since(t0).Seconds())
	if r.stats {
		printStats(stderr, engine, res.Rows, time.Since(t0), cputime.Self()-cpu0)
	}
	return nil
}

// The garbage collector's settings for `worker run`. Its live heap is
// bounded by design (rows in flight, the duplicate search's memory), so
// collecting at 3x the live heap instead of 2x is a bounded cost in memory
// (peak RSS 190 -> 225-260 MB at 8M rows) and saves GC work (a few % of
// the CPU, docs/benchmarks.md); the soft limit makes the collector work
// harder rather than let the heap pass it. Shard pods (`worker shard`)
// keep Go's defaults: their limit is the pod's. GOGC and GOMEMLIMIT
// change them (they were the flags --gc-percent and --memory-limit).
const (
	defaultRunGCPercent   = 200
	defaultRunMemoryLimit = 384 << 20
)

// envCPUProfile names a file for a CPU profile of the run (go tool
// pprof); it was the flag --cpuprofile, a tool of developers, not a
// setting of the run.
const envCPUProfile = "EMAILDATA_CPUPROFILE"

// tuneGC applies GOGC and GOMEMLIMIT when set, else the defaults above.
// It sets them itself (the runtime read them at start already) so that a
// run in a process that ran another sees its own settings.
func tuneGC() error {
	gc := defaultRunGCPercent
	if v := os.Getenv("GOGC"); v == "off" {
		gc = -1
	} else if v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("$GOGC %q: want a percentage or off", v)
		}
		gc = n
	}
	debug.SetGCPercent(gc)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultRunMemoryLimit)
	}
	return nil
}

// announce says on stderr which stages will run, and which will not.
func (r *localRun) announce() {
	switch {
	case r.vc.DNSServer == "off" || r.vc.DNSServer == "":
		fmt.Fprintln(r.stderr, "note: verification.dns.server off: no DNS and no SMTP checks; verdicts come from syntax, corrections and lists only")
	case !r.vc.SMTP:
		fmt.Fprintf(r.stderr, "note: verification.smtp.enabled false: domains are checked with DNS (%s), mailboxes are not checked\n", dnsName(r.vc.DNSServer))
	default:
		via := "directly"
		if len(r.vc.Proxies) > 0 {
			via = fmt.Sprintf("through %d SOCKS5 proxies", len(r.vc.Proxies))
		}
		fmt.Fprintf(r.stderr, "verifying with DNS (%s) and SMTP on port %d %s; greylisted addresses are retried after %v, so a list takes at least that long when a server greylists\n",
			dnsName(r.vc.DNSServer), r.vc.Probe.Port, via, r.vc.Probe.GreylistRetry)
	}
}

func dnsName(s string) string {
	if s == "system" {
		return "system resolver " + mxdns.DefaultServer()
	}
	return s
}

// openStore opens a file store in a new directory under $TMPDIR, with
// the input in it as "upload" (hard-linked when it can be, else copied):
// the run's working data lives on disk, not in memory, whatever the
// list's size. cleanup closes the store and removes the directory.
func (r *localRun) openStore(ctx context.Context) (*blobstore.Store, func(), error) {
	dir, err := os.MkdirTemp("", "worker-run-")
	if err != nil {
		return nil, nil, err
	}
	store, err := blobstore.Open(ctx, "file://"+filepath.ToSlash(dir))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := func() {
		store.Close()
		os.RemoveAll(dir)
	}
	src := r.in
	if p, err := filepath.EvalSymlinks(r.in); err == nil {
		src = p // link(2) would link a symlink itself, relative target and all
	}
	if err := os.Link(src, filepath.Join(dir, "upload")); err != nil {
		err = upload(ctx, store, r.in)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return store, cleanup, nil
}

func upload(ctx context.Context, store *blobstore.Store, in string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := store.NewWriter(ctx, "upload", nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", in, err)
	}
	return nil
}

// startShards runs the shards, r.parallel at once, sharing the engine (and
// so its per-host limits); done[i] receives shard i's error.
func (r *localRun) startShards(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *pipeline.Plan, reg *listservice.Registry, lim listfile.Limits) []chan error {
	done := make([]chan error, len(plan.Shards))
	sem := make(chan struct{}, r.parallel)
	for i := range plan.Shards {
		done[i] = make(chan error, 1)
		go func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				done[i] <- ctx.Err()
				return
			}
			_, err := pipeline.RunShard(ctx, store, keys, i, reg, lim)
			<-sem
			done[i] <- err
		}()
	}
	return done
}

// write writes the result file as the shards finish, in order, so that a
// run stopped midway leaves the rows done before.
func (r *localRun) write(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *pipeline.Plan, done []chan error) (*pipeline.Outcome, error) {
	f, err := os.Create(r.out)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	// No digest: nothing records it here (sha256sum does, if wanted), and
	// without it the parts go from the store's files to this one in the
	// kernel (bw passes ReadFrom through once flushed).
	res, err := pipeline.WriteResultUndigested(ctx, store, keys, plan, filepath.Base(r.out), bw, func(i int) error {
		// Part i-1 is in the result: free its disk space. Not when sharded
		// by domain, where every part is read from the first row on.
		if i > 0 && !plan.ByDomain() {
			_ = store.Delete(ctx, keys.Part(i-1))
		}
		return <-done[i]
	})
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Interrupted: keep the rows of the shards that finished.
		fmt.Fprintf(r.stderr, "interrupted: %s holds the rows of the shards finished so far\n", r.out)
	default:
		os.Remove(r.out) // a failed list leaves no result that looks complete
	}
	return res, err
}

// reportProgress prints rows done and the engine's stage counters every
// r.progress; the returned function stops it.
func (r *localRun) reportProgress(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *pipeline.Plan, e *verify.Engine, t0 time.Time) func() {
	if r.progress <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(r.progress)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, _ := pipeline.Progress(ctx, store, keys, plan)
			c := wiring.EngineCounters(e)
			el := time.Since(t0).Seconds()
			fmt.Fprintf(r.stderr, "progress: %d/%d rows (%.0f%%) in %.0f s, %.0f rows/s; SMTP %.0f sessions, %.0f RCPT, %.0f deferred, %.0f retried, %.0f stalled hosts\n",
				rows, plan.Records, 100*float64(rows)/float64(max(plan.Records, 1)), el, float64(rows)/el,
				c["smtp_sessions"], c["smtp_rcpt"], c["smtp_deferred"], c["smtp_retries"], c["smtp_stalled_hosts"])
		}
	}()
	return func() { close(stop); <-finished }
}

// printStats reports the stage counters and where the time went.
func printStats(w io.Writer, e *verify.Engine, rows int64, wall, cpu time.Duration) {
	c := wiring.EngineCounters(e)
	fmt.Fprintf(w, "stats: %d rows, wall %.1f s, CPU %.2f s (%.3f ms a row)\n", rows, wall.Seconds(), cpu.Seconds(), cpu.Seconds()*1000/float64(max(rows, 1)))
	if _, ok := c["dns_lookups"]; ok {
		fmt.Fprintf(w, "  dns:  %.0f lookups, %.0f cache hits, %.0f queries, %.0f copies sent again, %.0f timeouts\n",
			c["dns_lookups"], c["dns_cache_hits"], c["dns_queries"], c["dns_retransmits"], c["dns_timeouts"])
	}
	if _, ok := c["history_hits"]; ok {
		fmt.Fprintf(w, "  history: %.0f verdicts reused, %.0f looked up and probed, %.0f kept, %.0f errors\n",
			c["history_hits"], c["history_misses"], c["history_recorded"], c["history_errors"])
		if n := c[evhistory.CounterKeyMismatches]; n > 0 {
			fmt.Fprintf(w, "  history: NOT USED: its store is kept under another key or scope (%.0f key checks; see the log): every address was probed\n", n)
		}
		if n := c[evhistory.CounterKeyLost]; n > 0 {
			fmt.Fprintf(w, "  history: its store lost its data during the run (key fingerprint published again %.0f times)\n", n)
		}
	}
	if _, ok := c["fleet_fallbacks"]; ok {
		fmt.Fprintf(w, "  fleet: %.0f lease waits (%.1f s waited, summed over connections), %.0f fallbacks to the divided budget (%.1f s), %.0f backend errors\n",
			c["fleet_lease_waits"], c["fleet_lease_wait_seconds"], c["fleet_fallbacks"], c["fleet_fallback_seconds"], c["fleet_backend_errors"])
	}
	if _, ok := c["smtp_sessions"]; !ok {
		return
	}
	fmt.Fprintf(w, "  smtp: %.0f connections, %.0f sessions, %.0f transactions, %.0f RCPT (%.0f catch-all probes), %.0f deferred (4xx), %.0f retried, %.0f per-session limits met, %.0f refusals (421 ...) waited out\n",
		c["smtp_dials"], c["smtp_sessions"], c["smtp_mail"], c["smtp_rcpt"], c["smtp_catchall_probes"], c["smtp_deferred"], c["smtp_retries"], c["smtp_session_limits"], c["smtp_refusals"])
	fmt.Fprintf(w, "        %.0f host failures, %.0f stalled hosts (tarpits, timeouts), %.0f skipped as stalled or unreachable, %.0f proxy failovers\n",
		c["smtp_host_failures"], c["smtp_stalled_hosts"], c["smtp_hosts_skipped"], c["smtp_proxy_failovers"])
	if p, ok := e.SMTP.(*smtpprobe.Prober); ok {
		for i, h := range p.BusiestHosts(3) {
			what := "busiest host"
			if i == 0 {
				what = "paced by host"
			}
			fmt.Fprintf(w, "        %s %s (%d sessions, %d RCPT)\n", what, h.Pace(), h.Sessions, h.RCPT)
		}
		fmt.Fprintf(w, "        hosts: %.1f s of spans against %.1f s of floors their limits impose (summed)\n", c["smtp_host_span_seconds"], c["smtp_host_floor_seconds"])
	}
	fmt.Fprintf(w, "  time: working (CPU) %.1f s; connections open %.1f s (of which waiting on silent hosts %.1f s); addresses waiting out greylisting %.1f s, queued for a connection %.1f s (summed over addresses, overlapping)\n",
		cpu.Seconds(), c["smtp_session_seconds"], c["smtp_stalled_seconds"], c["smtp_deferred_seconds"], c["smtp_queued_seconds"])
}
