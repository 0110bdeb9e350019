package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
)

// mxService is hostService with MX hosts: domain dN.test is hosted on
// mx(N%hosts).prov, failN.test fails its lookup, slowN.test answers only
// after the lookup's timeout. Every lookup takes delay, or until its
// context ends (a failure then). It counts lookups per domain.
type mxService struct {
	hostService
	hosts int
	delay time.Duration // each lookup's
	mu    sync.Mutex
	calls map[string]int
}

func (m *mxService) CanResolveMX() bool { return true }

func (m *mxService) PrimaryMX(ctx context.Context, domain string) (string, bool) {
	m.mu.Lock()
	m.calls[domain]++
	m.mu.Unlock()
	if m.delay > 0 {
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(m.delay):
		}
	}
	var n int
	switch {
	case strings.HasPrefix(domain, "fail"):
		return "", false
	case strings.HasPrefix(domain, "slow"):
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(5 * time.Second):
			return "late.prov", true
		}
	}
	if _, err := fmt.Sscanf(domain, "d%d.test", &n); err != nil {
		return "", false
	}
	return fmt.Sprintf("mx%d.prov", n%m.hosts), true
}

// mxList is a list of rows over domains d0..d{domains-1}.test, two
// failing and one slow domain.
func mxList(rows, domains int) []byte {
	var b bytes.Buffer
	b.WriteString("id,email\n")
	for i := range rows {
		dom := fmt.Sprintf("d%d.test", (i*7)%domains)
		switch i % 50 {
		case 1:
			dom = "fail1.test"
		case 2:
			dom = "FAIL2.test"
		case 3:
			dom = "slow1.test"
		}
		fmt.Fprintf(&b, "%d,user%d@%s\n", i, i, dom)
	}
	return b.Bytes()
}

// TestMXShards: routing by MX host gives the rows' results of routing by
// rows, keeps every host's domains in one shard, looks each domain up
// once, and measures its cost on the pipeline's clock (in a synctest
// bubble: exactly).
func TestMXShards(t *testing.T) {
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	data := mxList(2000, 300)
	for _, tc := range []struct {
		name                              string
		budget, delay                     time.Duration
		wantResolved, wantFailed, wantSkp int
		zipped                            bool
		seconds                           float64 // spent looking up (simulated time)
	}{
		// Every good domain resolves; fail1, fail2 and slow1 (timed out
		// at MXLookupTimeout, 50 ms) fail.
		{"budget enough", time.Minute, 0, 0, 3, 0, false, 0.05},
		// 285 lookups, 284 of 10 ms and the slow one's 50 ms, 16 at a
		// time: 19 rounds of 10 ms, not 2.9 s.
		{"concurrent", time.Minute, 10 * time.Millisecond, 0, 3, 0, false, 0.19},
		// The slow domain outlasts the whole budget: not looked up
		// again, it keeps its own key.
		{"budget spent", 30 * time.Millisecond, 0, -1, -1, 1, false, 0.03},
		// A zipped input is not read ahead: its domains are looked up one
		// at a time as the scan meets them.
		{"zipped", time.Minute, 0, 0, 3, 0, true, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				svc := &mxService{hostService: hostService{}, hosts: 5, delay: tc.delay, calls: map[string]int{}}
				cfg := testConfig()
				cfg.ShardBytes, cfg.MaxShards = int64(len(data)/8+1), 8
				cfg.MXLookupTimeout, cfg.MXLookupBudget = 50*time.Millisecond, tc.budget
				s := memStore(t)
				in, name := data, "l.csv"
				if tc.zipped {
					in, name = makeZip(t, zipFile{name: "l.csv", data: string(data)}), "l.zip"
				}
				rows := processWith(t, s, hostName, svc, "rows", name, in, d, cfg)
				cfg.ShardBy = ShardByMX
				mx := processWith(t, s, hostName, svc, "mx", name, in, d, cfg)
				if tc.zipped {
					if z1, z2 := readZip(t, rows.data), readZip(t, mx.data); len(z1) != 1 || !maps.Equal(z1, z2) {
						t.Fatalf("zipped results differ")
					}
				} else if !bytes.Equal(rows.data, mx.data) {
					t.Fatalf("results differ:\nrows:\n%q\nmx:\n%q", firstDiff(rows.data, mx.data), firstDiff(mx.data, rows.data))
				}
				rep := mx.plan.MXRouting
				if rep == nil || !mx.plan.ByDomain() {
					t.Fatalf("plan by domain %v, MX routing %+v", mx.plan.ByDomain(), rep)
				}
				domains := distinctDomains(svc, data)
				if rep.Domains != domains || rep.Resolved+rep.Failed+rep.Skipped != rep.Domains {
					t.Errorf("routing %+v: want %d domains, each resolved, failed or skipped", rep, domains)
				}
				if tc.wantResolved >= 0 && (rep.Resolved != domains-tc.wantFailed || rep.Failed != tc.wantFailed || rep.Hosts != 5) {
					t.Errorf("routing %+v: want %d resolved on 5 hosts, %d failed", rep, domains-tc.wantFailed, tc.wantFailed)
				}
				if tc.wantSkp > 0 && rep.Skipped < tc.wantSkp {
					t.Errorf("routing %+v: want domains skipped once the budget is spent", rep)
				}
				if rep.Seconds != tc.seconds {
					t.Errorf("lookups took %v s, want %v (budget %v, %v each)", rep.Seconds, tc.seconds, tc.budget, tc.delay)
				}
				for dom, n := range svc.calls {
					if n != 1 {
						t.Errorf("%s looked up %d times", dom, n)
					}
				}
				checkHostsApart(t, s, mx.plan, d, svc, tc.wantSkp == 0)
			})
		})
	}
}

// distinctDomains counts the distinct shard keys of data's rows.
func distinctDomains(svc *mxService, data []byte) int {
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		seen[svc.ShardKey(line[strings.IndexByte(line, ',')+1:])] = true
	}
	return len(seen)
}

// checkHostsApart fails if a domain has rows in two shards, or (with
// hosts) if an MX host's domains are in two shards.
func checkHostsApart(t *testing.T, s *blobstore.Store, plan *Plan, d listfile.Dialect, svc *mxService, hosts bool) {
	t.Helper()
	staged := get(t, s, plan.InputKey)
	where := map[string]int{}
	for i, sh := range plan.Shards {
		rd := listfile.NewRangeReader(bytes.NewReader(staged[sh.Start:sh.End]), plan.Dialect(), testConfig().Limits, sh.Start, 1)
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			dom := svc.ShardKey(rec.Field(d.EmailColumn.Index()))
			keys := []string{"domain " + dom}
			if n := 0; hosts && !strings.HasPrefix(dom, "fail") && !strings.HasPrefix(dom, "slow") {
				fmt.Sscanf(dom, "d%d.test", &n)
				keys = append(keys, fmt.Sprintf("host mx%d.prov", n%svc.hosts))
			}
			for _, k := range keys {
				if j, ok := where[k]; ok && j != i {
					t.Fatalf("%s in shards %d and %d", k, j, i)
				}
				where[k] = i
			}
		}
	}
}

// TestMXBudgetSimulatedTime: the lookups' cost is measured on the
// pipeline's clock, so in a synctest bubble it is exact: the budget ends
// the read-ahead at once (lookups in flight fail and are skipped later),
// the one-at-a-time lookups of a zipped input get what is left of it, and
// MXLookupTimeout cuts a lookup short.
func TestMXBudgetSimulatedTime(t *testing.T) {
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	for _, tc := range []struct {
		name                      string
		zipped                    bool
		domains, conc             int
		delay, timeout, budget    time.Duration
		resolved, failed, skipped int
		seconds                   float64
	}{
		// 2 at a time, 0.3 s each: d0–d5 by 0.9 s; d6 and d7 are cut at
		// 1 s; they and d8, d9 (never handed out) are skipped at the scan.
		{"read-ahead cut by the budget", false, 10, 2, 300 * time.Millisecond, 5 * time.Second, time.Second, 6, 0, 4, 1},
		// 4 at a time: three rounds of 0.3 s.
		{"read-ahead within the budget", false, 10, 4, 300 * time.Millisecond, 5 * time.Second, time.Minute, 10, 0, 0, 0.9},
		// One at a time: d0–d2 by 0.9 s, d3 gets the 0.1 s left and
		// fails, the rest are skipped.
		{"zipped: one at a time", true, 10, 2, 300 * time.Millisecond, 5 * time.Second, time.Second, 3, 1, 6, 1},
		// Each lookup is cut at its own timeout, 0.2 s.
		{"zipped: lookup timeout", true, 3, 2, 300 * time.Millisecond, 200 * time.Millisecond, time.Minute, 0, 3, 0, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var data strings.Builder
				data.WriteString("id,email\n")
				for i := range tc.domains {
					fmt.Fprintf(&data, "%d,user%d@d%d.test\n", i, i, i)
				}
				in, name := []byte(data.String()), "l.csv"
				if tc.zipped {
					in, name = makeZip(t, zipFile{name: "l.csv", data: data.String()}), "l.zip"
				}
				svc := &mxService{hosts: 5, delay: tc.delay, calls: map[string]int{}}
				cfg := testConfig()
				cfg.ShardBy, cfg.ShardBytes, cfg.MaxShards = ShardByMX, int64(data.Len()/2), 2
				cfg.MXLookupTimeout, cfg.MXLookupBudget, cfg.MXLookupConcurrency = tc.timeout, tc.budget, tc.conc
				res := processWith(t, memStore(t), hostName, svc, "mx", name, in, d, cfg)
				rep := res.plan.MXRouting
				if rep == nil {
					t.Fatal("no MX routing report")
				}
				want := MXRouting{Domains: tc.domains, Resolved: tc.resolved, Failed: tc.failed, Skipped: tc.skipped,
					Hosts: min(tc.resolved, svc.hosts), Seconds: tc.seconds}
				if *rep != want {
					t.Errorf("routing %+v, want %+v", *rep, want)
				}
			})
		})
	}
}
