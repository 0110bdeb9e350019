package pipeline

import (
	"context"
	"time"

	"github.com/emaildata/emaildata/internal/lists/listservice"
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
// The lookups are made one at a time, as the scan meets each new domain
// (the scan hands rows over one by one and the distributor places each at
// once): their cost is bounded by MXLookupTimeout each and MXLookupBudget
// in all, and reported in Plan.MXRouting. Partial: no look-ahead, so no
// lookups run in parallel; a list of many uncached domains on a slow
// resolver spends its budget and then falls back to domain keys.

// Defaults of Config.MXLookupTimeout, MXLookupBudget and MXMaxDomains.
const (
	DefaultMXLookupTimeout = 5 * time.Second
	DefaultMXLookupBudget  = 60 * time.Second
	DefaultMXMaxDomains    = 200_000
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
	ms       listservice.MXSharder
	timeout  time.Duration
	budget   time.Duration
	maxDoms  int
	keys     map[string]string // domain → key
	hosts    map[string]struct{}
	spent    time.Duration
	stats    MXRouting
	overflow bool // maxDoms reached: later new domains keep their own key
}

func newMXRouter(ctx context.Context, ms listservice.MXSharder, cfg Config) *mxRouter {
	r := &mxRouter{ctx: ctx, ms: ms, timeout: cfg.MXLookupTimeout, budget: cfg.MXLookupBudget, maxDoms: cfg.MXMaxDomains,
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
	start := time.Now()
	host, ok := r.ms.PrimaryMX(ctx, domain)
	cancel()
	r.spent += time.Since(start)
	if !ok || host == "" {
		r.stats.Failed++
		return domain
	}
	r.stats.Resolved++
	r.hosts[host] = struct{}{}
	return "mx:" + host
}

// report is the routing's cost so far.
func (r *mxRouter) report() *MXRouting {
	s := r.stats
	s.Hosts, s.Seconds, s.Overflow = len(r.hosts), r.spent.Seconds(), r.overflow
	return &s
}
