package wiring

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// BenchmarkHistoryScopeTwoTenants measures what the tenant scope of the
// verification history costs (issue 30): tenant A verifies a list, then
// tenant B the same list, then A again, through one engine (one process,
// as the API or a manager serving both), against the synthetic mail
// world. In the shared scope B is answered from A's verdicts; in the
// tenant scope B probes everything A probed. Reported per scope: the SMTP
// connections and RCPTs of each run, and B's over A's first.
//
//	go test -run '^$' -bench BenchmarkHistoryScopeTwoTenants -benchtime 1x ./internal/wiring/
func BenchmarkHistoryScopeTwoTenants(b *testing.B) {
	const seed, domains, rows = 30, 300, 5000
	doms, addrs := mailworld.Generate(seed, domains, rows)
	b.Setenv(evhistory.SecretEnv, "benchmark-history-key-0123456789")
	for _, scope := range []evhistory.Scope{evhistory.ScopeTenant, evhistory.ScopeShared} {
		b.Run(string(scope), func(b *testing.B) {
			for i := range b.N {
				// A fresh world each time: its greylisting remembers pairs.
				w, err := mailworld.Start(context.Background(), doms, mailworld.Options{})
				if err != nil {
					b.Fatal(err)
				}
				runs := twoTenants(b, w, addrs, scope, filepath.Join(b.TempDir(), strconv.Itoa(i)+".db"))
				w.Close()
				for _, r := range runs {
					b.ReportMetric(float64(r.conns), "conns-"+r.name)
					b.ReportMetric(float64(r.rcpts), "rcpts-"+r.name)
					b.ReportMetric(float64(r.fromHistory), "history-hits-"+r.name)
				}
				b.ReportMetric(float64(runs[0].conns+runs[1].conns), "conns-A+B")
			}
		})
	}
}

type tenantRun struct {
	name                      string
	conns, rcpts, fromHistory int
	wall                      time.Duration
}

// twoTenants runs A, B and A again over addrs on a fresh engine and
// history of scope.
func twoTenants(b *testing.B, w *mailworld.World, addrs []string, scope evhistory.Scope, historyFile string) []tenantRun {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // closes the history
	c := DefaultVerifyConfig()
	c.DNSServer, c.Probe.Port, c.SMTPAllowCIDRs, c.ExtraTLDs = w.DNSAddr(), w.SMTPPort(), "127.0.0.0/8", "test"
	// The world's greylisting window is 2 s; its tarpits need not hold a
	// run for the default 30 s.
	c.Probe.GreylistRetry, c.Probe.ConnectTimeout, c.Probe.GreetingTimeout, c.Probe.CommandTimeout = mailworld.GenerateGreylist+500*time.Millisecond, time.Second, 2*time.Second, 5*time.Second
	c.HistoryURL, c.HistoryScope = "bolt://"+historyFile, scope
	e, err := NewEngine(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	var out []tenantRun
	for _, run := range []struct{ name, tenant string }{{"A", "api/a"}, {"B", "api/b"}, {"A-again", "api/a"}} {
		before, t0 := w.Stats(), time.Now()
		res := make([]verify.Result, len(addrs))
		if err := e.VerifyBatch(ctx, addrs, res, verify.Options{SMTP: true, Tenant: run.tenant}); err != nil {
			b.Fatal(err)
		}
		after := w.Stats()
		r := tenantRun{name: run.name, conns: after.Connections - before.Connections, rcpts: after.RCPT - before.RCPT, wall: time.Since(t0)}
		for _, x := range res {
			if x.FromHistory {
				r.fromHistory++
			}
		}
		b.Logf("%s scope, %s: %d connections, %d RCPTs, %d rows from the history, %.1f s", scope, r.name, r.conns, r.rcpts, r.fromHistory, r.wall.Seconds())
		out = append(out, r)
	}
	return out
}
