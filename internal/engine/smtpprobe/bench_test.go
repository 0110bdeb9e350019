package smtpprobe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// benchJob is one domain's addresses.
type benchJob struct {
	domain string
	mx     []mxdns.MXHost
	addrs  []string
}

// BenchmarkProbeBatch probes a generated world (200 domains, 10k rows) with
// one ProbeBatch per domain, 64 batches at a time, under several per-host
// limits. Each SMTP reply is delayed by 1ms (a stand-in for network round
// trips) and the world's greylisting clock runs 10x fast (the 2s window
// lasts 200ms). It reports rows/s (SMTP-probed rows per wall second), CPU
// time per row (whole process: prober and mail servers), the sessions
// opened, the peak concurrency on one host, and mismatches with the world's
// ground truth. Run with -benchtime=1x: one iteration takes seconds.
func BenchmarkProbeBatch(b *testing.B) {
	const (
		latency     = time.Millisecond
		concurrency = 64
	)
	doms, rows := mailworld.Generate(20260101, 200, 10_000)
	t0 := time.Now()
	fast := func() time.Time { return t0.Add(10 * time.Since(t0)) }
	e := loopbackWorld(b, mailworld.Options{Latency: latency, Now: fast}, doms...)

	byDomain := map[string][]string{}
	for _, a := range rows {
		d := strings.ToLower(a[strings.LastIndexByte(a, '@')+1:])
		byDomain[d] = append(byDomain[d], a)
	}
	var jobs []benchJob
	nrows := 0
	for d, as := range byDomain {
		res, err := e.r.Lookup(context.Background(), d)
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != mxdns.OK {
			continue // no SMTP: NXDOMAIN, null MX, no address
		}
		jobs = append(jobs, benchJob{d, res.MX, as})
		nrows += len(as)
	}
	slices.SortFunc(jobs, func(x, y benchJob) int { return cmp.Compare(len(y.addrs), len(x.addrs)) })
	b.Logf("%d rows, %d SMTP rows over %d domains; largest domain %s with %d rows", len(rows), nrows, len(jobs), jobs[0].domain, len(jobs[0].addrs))

	for _, lim := range []struct {
		conns int
		rate  float64
	}{{1, 5}, {4, 5}, {1, 50}, {4, 50}, {4, 1000}, {16, 1000}} {
		b.Run(fmt.Sprintf("conns=%d/rate=%g", lim.conns, lim.rate), func(b *testing.B) {
			var wall, cpu time.Duration
			for range b.N {
				e.w.ResetStats()
				p := New(Config{
					Port: e.w.SMTPPort(), HELOName: "verify.example.test", MailFrom: "verify@example.test",
					ConnectTimeout: time.Second, CommandTimeout: 500 * time.Millisecond,
					MaxConnsPerHost: lim.conns, RatePerHost: lim.rate,
					GreylistRetry: 250 * time.Millisecond, MaxGreylistRetries: 3,
					Dialer: loopbackDialer(b),
				})
				results := make([][]Result, len(jobs))
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				cpu0 := cputime.Self()
				start := time.Now()
				ch := make(chan int)
				var wg sync.WaitGroup
				for range concurrency {
					wg.Go(func() {
						for j := range ch {
							results[j] = make([]Result, len(jobs[j].addrs))
							if err := p.ProbeBatch(ctx, jobs[j].domain, jobs[j].mx, jobs[j].addrs, results[j]); err != nil {
								b.Error(err)
							}
						}
					})
				}
				for j := range jobs {
					ch <- j
				}
				close(ch)
				wg.Wait()
				wall += time.Since(start)
				cpu += cputime.Self() - cpu0
				cancel()

				if b.N > 1 {
					continue
				}
				st := e.w.Stats()
				miss := map[string]int{}
				outcomes := map[Outcome]int{}
				for j, job := range jobs {
					for i, a := range job.addrs {
						r := results[j][i]
						outcomes[r.Outcome]++
						if truth := e.w.UnderlyingTruth(a); truth != truthOf(r.Outcome) {
							miss[truth+"->"+r.Outcome.String()]++
						}
					}
				}
				var hot []string
				for _, hs := range st.Hosts {
					if hs.Total > 20 {
						hot = append(hot, fmt.Sprintf("%s:%d/%d", hs.Host, hs.Total, hs.MaxConcurrent))
					}
				}
				sort.Strings(hot)
				b.Logf("outcomes %v; mismatches vs ground truth %v", outcomes, miss)
				b.Logf("sessions %d, RCPT %d, RSET %d, DATA %d, per-host peak %d, prober %+v", st.Connections, st.RCPT, st.RSET, st.DATA, st.MaxConcurrent, p.Stats())
				b.Logf("busiest hosts (connections/peak): %s", strings.Join(hot, " "))
				b.ReportMetric(float64(st.Connections), "sessions/op")
				b.ReportMetric(float64(st.MaxConcurrent), "peak-conns/host")
				n := 0
				for _, c := range miss {
					n += c
				}
				b.ReportMetric(float64(n), "mismatch/op")
			}
			rowsDone := float64(nrows * b.N)
			b.ReportMetric(rowsDone/wall.Seconds(), "rows/s")
			b.ReportMetric(float64(cpu.Microseconds())/rowsDone, "cpu-µs/row")
			b.ReportMetric(float64(wall.Microseconds())/rowsDone, "wall-µs/row")
		})
	}
}
