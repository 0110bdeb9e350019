//go:build unix

package verify_test

// BenchmarkVerifyBatchMailWorld runs the list service's verification path
// (VerifyBatch with DNS and SMTP) over a generated mail world on loopback.
// It is a benchmark, so `go test` never runs it; `-bench` does:
//
//	go test -run '^$' -bench VerifyBatchMailWorld -benchtime 1x -timeout 30m -v ./internal/engine/verify/
//
// (about 2.5 minutes; -v prints the whole log: per-run details and the
// accuracy per ground-truth category).
//
// Knobs (environment): EMAILDATA_WORLD_DOMAINS (default 2000) and
// EMAILDATA_WORLD_ROWS (default 100000) size the world (mailworld.Generate,
// seed EMAILDATA_WORLD_SEED, default 1); EMAILDATA_SCALING_ROWS (default
// 5000) is the number of rows, the first of the list, of the per-MX limit
// comparison; EMAILDATA_SHARDS (default 8) shards run concurrently, each
// handing its rows to VerifyBatch in EMAILDATA_BATCH-row batches (default
// 512, as internal/lists/pipeline does).
//
// Results and their reading are recorded in docs/benchmarks.md.

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// mwGreylistRetry is the prober's retry delay in the benchmark: with the
// default three retries, 3 × 750 ms outlasts the generated world's
// greylisting window (mailworld.GenerateGreylist, 2 s), so greylisted
// addresses get their real verdict.
const mwGreylistRetry = 750 * time.Millisecond

// BenchmarkVerifyBatchMailWorld: the per-MX limit comparison (1 connection
// and 2 new connections/s per host, then 4 and 20) on the first rows, then
// the whole list at 4 and 20; see the comment at the top of the file.
func BenchmarkVerifyBatchMailWorld(b *testing.B) {
	var (
		seed      = benchEnvInt(b, "EMAILDATA_WORLD_SEED", 1)
		ndomains  = benchEnvInt(b, "EMAILDATA_WORLD_DOMAINS", 2000)
		nrows     = benchEnvInt(b, "EMAILDATA_WORLD_ROWS", 100_000)
		scaleRows = min(nrows, benchEnvInt(b, "EMAILDATA_SCALING_ROWS", 5000))
		shards    = max(1, benchEnvInt(b, "EMAILDATA_SHARDS", 8))
		batchSize = max(1, benchEnvInt(b, "EMAILDATA_BATCH", 512))
	)
	doms, addrs := mailworld.Generate(int64(seed), ndomains, nrows)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	w, err := mailworld.Start(ctx, doms, mailworld.Options{IdleTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.Logf("world: seed %d, %d domains, %d rows, %d SMTP hosts, started in %v; greylisting window %v, prober retry %v",
		seed, ndomains, nrows, len(w.Stats().Hosts), time.Since(t0).Round(time.Millisecond), mailworld.GenerateGreylist, mwGreylistRetry)

	type limits struct {
		conns int
		rate  float64
	}
	type run struct {
		rows int
		limits
	}
	// The limit comparison on the first scaleRows rows, then every row at
	// the higher limits.
	runs := []run{{scaleRows, limits{1, 2}}, {scaleRows, limits{4, 20}}}
	if nrows != scaleRows {
		runs = append(runs, run{nrows, limits{4, 20}})
	}
	for _, r := range runs {
		name := fmt.Sprintf("rows=%d/conns=%d/rate=%g", r.rows, r.conns, r.rate)
		b.Run(name, func(b *testing.B) {
			var sum mwRunStats
			for range b.N {
				s := mwRun(b, w, addrs[:r.rows], shards, batchSize, r.conns, r.rate)
				sum.add(s)
			}
			n := float64(b.N)
			rows := float64(r.rows) * n
			b.ReportMetric(rows/sum.wall.Seconds(), "rows/s")
			b.ReportMetric(sum.cpu.Seconds()/rows*1000, "cpu-s/krow")
			b.ReportMetric(sum.cpu.Seconds()/sum.wall.Seconds(), "cores")
			b.ReportMetric(float64(sum.conns)/rows, "conns/row")
			b.ReportMetric(float64(sum.maxConc), "max-host-conc")
			b.ReportMetric(100*float64(sum.correct)/rows, "%correct")
		})
	}
}

// mwRunStats sums the figures of runs.
type mwRunStats struct {
	wall, cpu time.Duration
	conns     int // SMTP connections the world accepted
	maxConc   int // most connections the prober had open to one host
	correct   int
}

func (s *mwRunStats) add(o mwRunStats) {
	s.wall += o.wall
	s.cpu += o.cpu
	s.conns += o.conns
	s.maxConc = max(s.maxConc, o.maxConc)
	s.correct += o.correct
}

// mwRun verifies addrs with a fresh engine (cold DNS and catch-all caches)
// and a reset world: shards goroutines, each taking a contiguous part of
// the rows in batchSize-row VerifyBatch calls, like a list's shards.
func mwRun(b *testing.B, w *mailworld.World, addrs []string, shards, batchSize, conns int, rate float64) mwRunStats {
	b.StopTimer()
	waitIdle(b, w)
	w.ResetStats()
	dialer := &countingDialer{open: map[string]int{}}
	prober := smtpprobe.New(smtpprobe.Config{
		Port: w.SMTPPort(), HELOName: "verify.test", MailFrom: "probe@verify.test",
		ConnectTimeout: 300 * time.Millisecond, GreetingTimeout: 500 * time.Millisecond, CommandTimeout: 500 * time.Millisecond,
		GreylistRetry: mwGreylistRetry, MaxConnsPerHost: conns, RatePerHost: rate,
		Dialer: dialer.dial,
	})
	e := &verify.Engine{
		Lists:     emaillists.Default,
		Typos:     typo.Default(),
		DNS:       mxdns.New(mxdns.Config{Server: w.DNSAddr(), Timeout: time.Second}),
		SMTP:      prober,
		ExtraTLDs: map[string]bool{"test": true},
	}
	e.Verify(context.Background(), "x@example.invalid", verify.Options{}) // load the lists
	results := make([]verify.Result, len(addrs))
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		batches  = make([][]time.Duration, shards)
	)
	ctx := context.Background() // a shard's context has no deadline
	cpu0 := cputime.Self()
	start := time.Now()
	b.StartTimer()
	per := (len(addrs) + shards - 1) / shards
	for s := 0; s < shards; s++ {
		lo, hi := min(s*per, len(addrs)), min((s+1)*per, len(addrs))
		wg.Go(func() {
			for i := lo; i < hi; i += batchSize {
				j := min(i+batchSize, hi)
				t := time.Now()
				if err := e.VerifyBatch(ctx, addrs[i:j], results[i:j], verify.Options{SMTP: true}); err != nil {
					errMu.Lock()
					firstErr = cmp.Or(firstErr, err)
					errMu.Unlock()
				}
				batches[s] = append(batches[s], time.Since(t))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	wall := time.Since(start)
	cpu := cputime.Self() - cpu0
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	st := w.Stats()
	ps := prober.Stats()

	out := mwRunStats{wall: wall, cpu: cpu, conns: st.Connections, maxConc: dialer.peak()}
	b.Logf("%d rows, %d shards of %d-row batches, MaxConnsPerHost %d, RatePerHost %g: wall %v, process CPU %v (%.2f cores), %.0f rows/s, %.3f CPU-s per 1k rows",
		len(addrs), shards, batchSize, conns, rate, wall.Round(time.Millisecond), cpu.Round(time.Millisecond),
		cpu.Seconds()/wall.Seconds(), float64(len(addrs))/wall.Seconds(), cpu.Seconds()/float64(len(addrs))*1000)
	var all []time.Duration
	for _, l := range batches {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.Logf("batch wall time: %d batches, p50 %v, p90 %v, max %v",
			len(all), all[len(all)/2].Round(time.Millisecond), all[len(all)*9/10].Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
	}

	// Per-host limits: the world's view. The busiest host's connections at
	// RatePerHost (after a burst of MaxConnsPerHost) are a floor for the
	// wall time.
	hosts := make([]mailworld.HostStats, 0, len(st.Hosts))
	tarpitOver := 0
	for _, h := range st.Hosts {
		hosts = append(hosts, h)
		if h.MaxConcurrent <= conns {
			continue
		}
		if d, _ := w.Domain(h.Host[strings.IndexByte(h.Host, '.')+1:]); d.Tarpit {
			// The prober gives up on a silent host and closes first; the
			// host counts the connection until it reads the EOF, which
			// may be after the next connection arrived. The client-side
			// count below is the one that must hold.
			tarpitOver = max(tarpitOver, h.MaxConcurrent)
			continue
		}
		b.Errorf("host %s saw %d concurrent connections, MaxConnsPerHost is %d", h.Host, h.MaxConcurrent, conns)
	}
	slices.SortFunc(hosts, func(x, y mailworld.HostStats) int { return cmp.Compare(y.Total, x.Total) })
	var top []string
	for _, h := range hosts[:min(4, len(hosts))] {
		top = append(top, fmt.Sprintf("%s %d (peak %d)", h.Host, h.Total, h.MaxConcurrent))
	}
	floor := time.Duration(0)
	if len(hosts) > 0 {
		floor = time.Duration(float64(max(0, hosts[0].Total-conns)) / rate * float64(time.Second))
	}
	b.Logf("world: %d SMTP connections (%.2f per row), %d RCPT, %d rejected (421), %d DATA, %d DNS queries; peak per-host concurrency %d (limit %d), world-wide peak %d",
		st.Connections, float64(st.Connections)/float64(len(addrs)), st.RCPT, st.Rejected, st.DATA, st.DNSQueries, st.MaxConcurrent, conns, st.PeakConcurrent)
	clientPeak := dialer.peak()
	b.Logf("per-host concurrency: client side (open connections of the prober) peak %d, server side (mail world) peak %d; limit %d",
		clientPeak, st.MaxConcurrent, conns)
	if tarpitOver > 0 {
		b.Logf("server side, tarpit hosts only: peak %d (the prober closed first; the host had not yet read the EOF when the next connection came)", tarpitOver)
	}
	if clientPeak > conns {
		b.Errorf("the prober had %d connections open to one host, MaxConnsPerHost is %d", clientPeak, conns)
	}
	b.Logf("busiest hosts (connections): %s; rate floor for the busiest host: %v (%.0f%% of the wall time)",
		strings.Join(top, ", "), floor.Round(time.Millisecond), 100*floor.Seconds()/wall.Seconds())
	b.Logf("prober: %d dials, %d sessions, %d RCPT (%d catch-all probes, %d batches with a cached catch-all verdict), %d deferred (4xx), %d host failures",
		ps.Dials, ps.Sessions, ps.RCPT, ps.CatchAllProbes, ps.CatchAllCached, ps.Deferred, ps.HostFailures)
	if st.DATA != 0 {
		b.Errorf("DATA sent %d times; the verifier must never send DATA", st.DATA)
	}

	// Accuracy against the ground truth, per category.
	type cat struct {
		rows, ok int
		wrong    map[verify.Code]int
	}
	cats := map[string]*cat{}
	for i, a := range addrs {
		truth := w.GroundTruth(a)
		want := truthCodes[truth]
		if truth == mailworld.TruthGreylisted {
			// Retried past the window: the mailbox's own verdict.
			want = truthCodes[w.UnderlyingTruth(a)]
		}
		c := cats[truth]
		if c == nil {
			c = &cat{wrong: map[verify.Code]int{}}
			cats[truth] = c
		}
		c.rows++
		if results[i].Code == want {
			c.ok++
			out.correct++
		} else {
			c.wrong[results[i].Code]++
		}
	}
	names := make([]string, 0, len(cats))
	for k := range cats {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int { return cmp.Compare(cats[y].rows, cats[x].rows) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "accuracy: %d of %d rows (%.2f%%) as the ground truth says", out.correct, len(addrs), 100*float64(out.correct)/float64(len(addrs)))
	for _, k := range names {
		c := cats[k]
		fmt.Fprintf(&sb, "\n  %-12s %6d rows, %6.2f%% right", k, c.rows, 100*float64(c.ok)/float64(c.rows))
		if len(c.wrong) > 0 {
			var ws []string
			for code, n := range c.wrong {
				ws = append(ws, fmt.Sprintf("%d×%d", n, code))
			}
			slices.Sort(ws)
			fmt.Fprintf(&sb, " (wrong codes: %s)", strings.Join(ws, " "))
		}
	}
	b.Log(sb.String())
	return out
}

// countingDialer dials and counts the open connections per address, on the
// client side.
type countingDialer struct {
	d    net.Dialer
	mu   sync.Mutex
	open map[string]int
	max  int
}

func (c *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open[addr]++
	c.max = max(c.max, c.open[addr])
	c.mu.Unlock()
	return &countedConn{Conn: conn, done: func() {
		c.mu.Lock()
		c.open[addr]--
		c.mu.Unlock()
	}}, nil
}

func (c *countingDialer) peak() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// waitIdle waits for the world's connections of a previous run to close
// (a tarpit host notices the client's close only when it reads EOF).
func waitIdle(b *testing.B, w *mailworld.World) {
	b.Helper()
	realtime.Eventually(b, 15*time.Second, "the world's SMTP connections to close", func() bool { return w.Stats().Current == 0 })
}

func benchEnvInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
