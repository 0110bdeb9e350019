package pipeline

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// MX host shards (Config.ShardBy = ShardByMX, issue 34): as domain shards
// (distribute.go), but a row's shard key is its domain's primary MX host,
// looked up once per distinct domain through the service's resolver (the
// engine's DNS cache), so that every domain a provider hosts on one MX
// host goes to one shard: one process then holds all that host's work and
// opens its sessions once, instead of every shard opening its own. A
// domain whose lookup fails, times out or comes after the budget keeps
// its own domain as the key (the domain mode's hash).
//
// The distributor places each row as the scan hands it over, so the
// domains are looked up before that scan: for a plain (not zipped) input,
// prefetch reads the email column once more, collects the distinct
// domains and looks them up MXLookupConcurrency at a time. What it did
// not reach (a zipped input's domains, the domains past the budget) is
// looked up one at a time as the scan meets them, within what is left of
// the budget. The cost is bounded by MXLookupTimeout a lookup and
// MXLookupBudget in all (time on Config.Clock), and reported in
// Plan.MXRouting.

// Defaults of Config.MXLookupTimeout, MXLookupBudget and MXMaxDomains.
const (
	DefaultMXLookupTimeout = 5 * time.Second
	DefaultMXLookupBudget  = 60 * time.Second
	DefaultMXMaxDomains    = 200_000
	DefaultMXConcurrency   = 16
)

// MXRouting reports what routing by MX host cost a list's preparation.
type MXRouting struct {
	// Domains is the distinct domains met; Resolved those routed by their
	// MX host; Failed those whose lookup failed or timed out; Skipped
	// those not looked up (budget spent). Past MXMaxDomains distinct
	// domains, new ones are neither looked up nor counted (Overflow).
	Domains  int  `json:"domains"`
	Resolved int  `json:"resolved"`
	Failed   int  `json:"failed"`
	Skipped  int  `json:"skipped"`
	Overflow bool `json:"overflow,omitempty"`
	// Hosts is the distinct primary MX hosts among the resolved domains.
	Hosts int `json:"hosts"`
	// Seconds is the time spent looking up.
	Seconds float64 `json:"seconds"`
}

// mxRouter maps a row's domain to its shard key.
type mxRouter struct {
	ctx      context.Context
	clock    clock.Clock
	ms       listservice.MXSharder
	timeout  time.Duration
	budget   time.Duration
	maxDoms  int
	conc     int
	keys     map[string]string // domain → key
	hosts    map[string]struct{}
	spent    time.Duration
	stats    MXRouting
	overflow bool // maxDoms reached: later new domains keep their own key
}

func newMXRouter(ctx context.Context, ms listservice.MXSharder, cfg Config) *mxRouter {
	r := &mxRouter{ctx: ctx, clock: clock.Or(cfg.Clock), ms: ms, timeout: cfg.MXLookupTimeout, budget: cfg.MXLookupBudget, maxDoms: cfg.MXMaxDomains,
		keys: map[string]string{}, hosts: map[string]struct{}{}}
	if r.timeout <= 0 {
		r.timeout = DefaultMXLookupTimeout
	}
	if r.budget <= 0 {
		r.budget = DefaultMXLookupBudget
	}
	if r.maxDoms <= 0 {
		r.maxDoms = DefaultMXMaxDomains
	}
	if r.conc = cfg.MXLookupConcurrency; r.conc <= 0 {
		r.conc = DefaultMXConcurrency
	}
	return r
}

// key returns domain's shard key: "mx:" and its primary MX host, or the
// domain itself when that is unknown ("" stays "").
func (r *mxRouter) key(domain string) string {
	if domain == "" {
		return ""
	}
	if k, ok := r.keys[domain]; ok {
		return k
	}
	if len(r.keys) >= r.maxDoms {
		// Past the bound, new domains keep their own key, unremembered
		// and uncounted: the map's memory stays bounded.
		r.overflow = true
		return domain
	}
	k := r.lookup(domain)
	r.keys[domain] = k
	return k
}

func (r *mxRouter) lookup(domain string) string {
	r.stats.Domains++
	if r.spent >= r.budget {
		r.stats.Skipped++
		return domain
	}
	ctx, cancel := context.WithTimeout(r.ctx, min(r.timeout, r.budget-r.spent))
	start := r.clock.Now()
	host, ok := r.ms.PrimaryMX(ctx, domain)
	cancel()
	r.spent += r.clock.Since(start)
	return r.note(domain, host, ok)
}

// note counts a lookup's outcome and returns the domain's key.
func (r *mxRouter) note(domain, host string, ok bool) string {
	if !ok || host == "" {
		r.stats.Failed++
		return domain
	}
	r.stats.Resolved++
	r.hosts[host] = struct{}{}
	return "mx:" + host
}

// prefetch reads the email column of the plain input at key, collects up
// to maxDoms distinct domains and looks them up conc at a time within the
// budget; those it has not looked up when the budget ends are left to key.
func (r *mxRouter) prefetch(store *blobstore.Store, key string, d listfile.Dialect, lim listfile.Limits, col int, hs listservice.HostSharder) error {
	start := r.clock.Now()
	defer func() { r.spent += r.clock.Since(start) }()
	domains, err := distinctKeys(r.ctx, store, key, d, lim, col, hs, r.maxDoms)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.budget)
	defer cancel()
	type answer struct {
		host string
		ok   bool
	}
	answers := make([]answer, len(domains))
	done := make([]bool, len(domains))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(r.conc, len(domains)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				lctx, lcancel := context.WithTimeout(ctx, r.timeout)
				answers[i].host, answers[i].ok = r.ms.PrimaryMX(lctx, domains[i])
				lcancel()
				done[i] = ctx.Err() == nil || answers[i].ok
			}
		}()
	}
feed:
	for i := range domains {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	for i, dom := range domains {
		if done[i] {
			r.stats.Domains++
			r.keys[dom] = r.note(dom, answers[i].host, answers[i].ok)
		}
	}
	return nil
}

// distinctKeys is the distinct shard keys of the email column of the
// plain input at key, at most max of them, in order of first appearance.
func distinctKeys(ctx context.Context, store *blobstore.Store, key string, d listfile.Dialect, lim listfile.Limits, col int, hs listservice.HostSharder, max int) ([]string, error) {
	rc, err := store.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("open list file: %w", err)
	}
	defer rc.Close()
	rd := listfile.NewReader(rc, d, lim)
	seen := map[string]struct{}{}
	var out []string
	for first := true; len(out) < max; first = false {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, classify(err)
		}
		if first && d.Header {
			continue
		}
		k := hs.ShardKey(string(rec.FieldBytes(col)))
		if _, ok := seen[k]; !ok && k != "" {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out, nil
}

// report is the routing's cost so far.
func (r *mxRouter) report() *MXRouting {
	s := r.stats
	s.Hosts, s.Seconds, s.Overflow = len(r.hosts), r.spent.Seconds(), r.overflow
	return &s
}
