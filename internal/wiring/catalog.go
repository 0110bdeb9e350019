// Package wiring assembles the list services this build offers, so the
// manager (which plans lists) and the worker (which runs them) agree.
package wiring

import (
	"context"
	"maps"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/peoplelist"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// Registry returns the list services of this build.
//
// email_append and email_intelligence need the reference people store;
// RegisterPeople adds them. Without it, lists asking for them fail with a
// clear "not available" message instead of producing empty results.
//
// A nil engine means an offline one: syntax, corrections and lists.
func Registry(e *verify.Engine) *listservice.Registry { return RegistryFor(e, VerifyConfig{}) }

// OfflineRowsInFlight caps a shard's rows in flight when the engine has no
// DNS (and so no SMTP) stage.
const OfflineRowsInFlight = 8_000

// SharedBy returns c for a process that runs shards at once: they share
// RowsInFlight, so the process's rows in flight, and its memory, do not
// grow with the shards it runs.
func (c VerifyConfig) SharedBy(shards int) VerifyConfig {
	if shards > 1 && c.RowsInFlight > 0 {
		c.RowsInFlight = max(c.RowsInFlight/shards, 1)
	}
	return c
}

// RegistryFor is Registry with the list settings of c (rows in flight).
func RegistryFor(e *verify.Engine, c VerifyConfig) *listservice.Registry {
	if e == nil {
		e = OfflineEngine()
	}
	reg := listservice.NewRegistry()
	ev := evlist.New(evlist.EngineChecker(e))
	ev.InFlight = c.RowsInFlight
	if e.DNS != nil {
		// Grouping a host's rows pays off at its sessions; offline, no
		// host is asked.
		ev.GroupRows = c.GroupRows
	}
	if e.DNS == nil && (ev.InFlight <= 0 || ev.InFlight > OfflineRowsInFlight) {
		// Offline verification never waits on a server: a few batches
		// keep every core busy, and a bigger window only holds memory
		// (about 0.7 KB a row) and costs garbage collection.
		ev.InFlight = OfflineRowsInFlight
	}
	ev.Counters = func() map[string]float64 { return EngineCounters(e) }
	if e.DNS != nil {
		ev.MX = PrimaryMX(e.DNS)
	}
	if p, ok := e.SMTP.(*smtpprobe.Prober); ok {
		ev.Pace = func() (listservice.Pace, bool) {
			h, ok := p.PacingHost()
			return listservice.Pace{Host: h.Addr, SpanSeconds: h.Span.Seconds(), FloorSeconds: h.Floor.Seconds(), Reason: string(h.Why)}, ok
		}
	}
	reg.Register(evlist.Name, ev)
	return reg
}

// PrimaryMX returns a function giving a domain's most preferred MX host
// (the domain itself for an implicit MX) through r, the engine's cached
// resolver; false when the domain has no mail host or the lookup failed.
func PrimaryMX(r verify.Resolver) func(ctx context.Context, domain string) (string, bool) {
	return func(ctx context.Context, domain string) (string, bool) {
		res, err := r.Lookup(ctx, domain)
		if err != nil || res.Status != mxdns.OK || len(res.MX) == 0 {
			return "", false
		}
		return res.MX[0].Host, true
	}
}

// EngineCounters snapshots the work counters of e's DNS and SMTP stages
// (none for an offline engine).
func EngineCounters(e *verify.Engine) map[string]float64 {
	out := map[string]float64{}
	if r, ok := e.DNS.(*mxdns.Resolver); ok {
		maps.Copy(out, r.Stats().Counters())
	}
	if p, ok := e.SMTP.(*smtpprobe.Prober); ok {
		maps.Copy(out, p.Stats().Counters())
	}
	for _, r := range e.Reporters {
		maps.Copy(out, r.Counters())
	}
	return out
}

// OfflineEngine verifies without network stages.
func OfflineEngine() *verify.Engine {
	return &verify.Engine{Lists: emaillists.Default, Typos: typo.Default()}
}

// RegisterPeople adds the services backed by the reference people store:
// email_intelligence, and email_append, which looks people up by name and
// postal code with finder, or when finder is nil with the store's own
// index (people.NamePostalFinder; a store without one: email_append says
// it is not available).
func RegisterPeople(reg *listservice.Registry, store people.Store, finder peoplelist.PostalFinder) {
	reg.Register(peoplelist.NameEmailIntelligence, peoplelist.NewEmailIntelligence(store))
	appendStore := store
	if finder != nil {
		appendStore = peoplelist.WithPostalIndex(store, finder)
	}
	reg.Register(peoplelist.NameEmailAppend, peoplelist.NewEmailAppend(appendStore))
}
