// Package metrics owns every Prometheus metric emaildata exports: their
// names (prefix emaildata_), help, types and labels. The manager and the
// REST API build their collectors here and only feed them, so dashboards,
// alerts and tests have one list to check against (Families, Names).
//
// Labels are low-cardinality by construction: routes are mux patterns,
// codes and phases come from fixed sets, services are the list services.
// Never put addresses, keys, list names or namespaces in a label.
//
// The package imports client_golang only (no Kubernetes packages), so any
// binary or test can use it.
package metrics

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Prefix starts every name this package registers.
const Prefix = "emaildata_"

// RouteUnmatched is the route label of API requests that no route matched
// (the mux's own 404 and 405 answers).
const RouteUnmatched = "unmatched"

// Shard outcomes (the outcome label of ListShards).
const (
	ShardSucceeded = "succeeded"
	ShardFailed    = "failed"
)

// Callback delivery outcomes (the outcome label of CallbackDeliveries):
// an attempt delivered, failed and will be retried, or failed for good.
const (
	CallbackDelivered = "delivered"
	CallbackRetrying  = "retrying"
	CallbackFailed    = "failed"
)

// Type is a metric family's type.
type Type string

// Family types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Family describes one metric family: its full name, type, labels and
// which process exports it ("manager", "api" or both).
type Family struct {
	Name      string
	Type      Type
	Help      string
	Labels    []string
	Exporters []string
}

const (
	manager = "manager"
	api     = "api"
)

// Family names. Counters end in _total; histograms add _bucket, _sum and
// _count to the name in queries.
const (
	Lists              = Prefix + "lists"
	ListRowsProcessed  = Prefix + "list_rows_processed_total"
	ListDuration       = Prefix + "list_duration_seconds"
	ListsFailed        = Prefix + "lists_failed_total"
	ListShards         = Prefix + "list_shards_total"
	Verifications      = Prefix + "verifications_total"
	CallbackDeliveries = Prefix + "callback_deliveries_total"
	APIRequests        = Prefix + "api_requests_total"
	APIRequestDuration = Prefix + "api_request_duration_seconds"
	APIRateLimited     = Prefix + "api_rate_limited_total"
	OrphanUploads      = Prefix + "orphan_uploads_removed_total"
	OrphanUploadBytes  = Prefix + "orphan_upload_bytes_removed_total"
	UploadSweeps       = Prefix + "upload_sweeps_total"
)

// Upload sweep outcomes (the outcome label of UploadSweeps).
const (
	SweepSucceeded = "succeeded"
	SweepFailed    = "failed"
)

// families lists every family but the engine counters (engineFamilies).
var families = []Family{
	{Lists, Gauge, "EmailLists by phase.", []string{"phase"}, []string{manager}},
	{ListRowsProcessed, Counter, "List rows processed by finished shards, by service.", []string{"service"}, []string{manager}},
	{ListDuration, Histogram, "Time from a list's creation to its first final phase (Processed, Results or Failed), by service and phase.", []string{"service", "phase"}, []string{manager}},
	{ListsFailed, Counter, "Lists that failed, by service and condition reason.", []string{"service", "reason"}, []string{manager}},
	{ListShards, Counter, "Shards of finished lists by outcome (failed: the list's failed indexes).", []string{"service", "outcome"}, []string{manager}},
	{Verifications, Counter, "Verification verdicts by service and status code (lists: from shard summaries; API: GET /v5/ev).", []string{"service", "status_code"}, []string{manager, api}},
	{CallbackDeliveries, Counter, "Completion callback attempts by outcome.", []string{"outcome"}, []string{manager}},
	{APIRequests, Counter, "API requests by route and status code.", []string{"route", "code"}, []string{api}},
	{APIRequestDuration, Histogram, "API request latency by route and status code.", []string{"route", "code"}, []string{api}},
	{APIRateLimited, Counter, "API requests refused with 429 (a key's rate limit, failed key checks from the client's address, a tenant's calls refused with 403, uploads at once), by route.", []string{"route"}, []string{api}},
	{OrphanUploads, Counter, "Orphaned uploads removed from the store (left by an API that stopped mid-upload), by kind: object (a file or a temporary file) or multipart (an incomplete S3 upload).", []string{"kind"}, []string{manager}},
	{OrphanUploadBytes, Counter, "Bytes of the orphaned upload objects removed (incomplete S3 uploads not counted).", nil, []string{manager}},
	{UploadSweeps, Counter, "Sweeps of the uploads folder for orphans, by outcome (succeeded or failed).", []string{"outcome"}, []string{manager}},
}

// engineCounter maps a key of the engines' Counters() maps (mxdns.Stats,
// smtpprobe.Stats; shard summaries carry them) to its family.
type engineCounter struct {
	key  string
	help string
}

// engineCounters are exported by the manager (totals of finished shards)
// and by the API (its own verifier, for GET /v5/ev). Keys not listed here
// are not exported.
var engineCounters = []engineCounter{
	{"dns_lookups", "DNS MX lookups requested."},
	{"dns_cache_hits", "DNS MX lookups answered from the cache."},
	{"dns_resolutions", "DNS MX lookups resolved (cache misses, after coalescing)."},
	{"dns_resolution_seconds", "Time spent resolving DNS MX lookups (divide by resolutions for the mean latency)."},
	{"dns_queries", "DNS messages sent, retries and copies included."},
	{"dns_timeouts", "DNS query attempts that timed out."},
	{"dns_retransmits", "Copies of a UDP DNS query sent within an attempt, its answer not come within the retransmission timeout (a datagram lost, or a slow resolver)."},
	{"smtp_dials", "SMTP connection attempts."},
	{"smtp_sessions", "SMTP sessions that reached EHLO/HELO."},
	{"smtp_rcpt", "SMTP RCPT commands sent (catch-all probes included)."},
	{"smtp_catchall_probes", "SMTP RCPTs for a random local part (catch-all detection)."},
	{"smtp_catchall_claims_lost", "SMTP catch-all probes not sent because another process sharing the fleet had claimed the domain's probe; its verdict was awaited."},
	{"smtp_mail", "SMTP MAIL commands sent: transactions, each carrying many RCPTs."},
	{"smtp_refusals", "Times an SMTP host asked to slow down (421 or 4xx greeting or session reply, refused connection after a session): its queue waited out a backoff."},
	{"smtp_deferred", "Addresses deferred after a 4xx (greylisting) for a later retry."},
	{"smtp_retries", "Deferred addresses sent again."},
	{"smtp_host_floor_seconds", "Sum over the SMTP hosts worked of the least time their own limits allow (greylisting delay, connection rate, connections a window, concurrency with error sleeps and slow replies); compare with smtp_host_span_seconds."},
	{"smtp_host_span_seconds", "Sum over the SMTP hosts worked of the time from a host's first session to its last reply."},
	{"smtp_session_limits", "SMTP sessions ended early by a server's per-session limit (RCPTs, a Postfix server's rejection budget, non-mail commands)."},
	{"smtp_host_failures", "SMTP sessions that failed before any RCPT verdict."},
	{"smtp_hosts_skipped", "MX host addresses skipped as recently stalled or unreachable."},
	{"smtp_stalled_hosts", "SMTP hosts that timed out on connect or greeting (tarpits)."},
	{"smtp_proxy_failovers", "SMTP connections moved to another proxy after a proxy failed."},
	{"smtp_session_seconds", "Time SMTP connections were open (divide by sessions for the mean session latency)."},
	{"smtp_stalled_seconds", "Time spent on SMTP connects and greetings that timed out."},
	{"smtp_deferred_seconds", "Time addresses waited out greylisting delays."},
	{"smtp_queued_seconds", "Time addresses waited for an SMTP session slot or rate token."},
	{"history_hits", "Mailbox verdicts answered from the verification history (fresh enough for the caller)."},
	{"history_misses", "Mailbox lookups the verification history could not answer (none kept, too old for the caller, or the history unreachable): probed."},
	{"history_errors", "Verification history calls that failed (the addresses were probed; nothing stale was trusted)."},
	{"history_recorded", "Mailbox verdicts kept in the verification history."},
	{"history_key_mismatches", "Key checks and verification history calls that found its store kept under another key or scope (another process runs with a different HISTORY_KEY or --history-scope): the process stops using the history until they agree, and probes. Growing: a mismatch now."},
	{"history_key_lost", "Key checks that found this process's key fingerprint gone from the history's store (it lost its data, or no process renewed it for a lease) and published it again."},
	{"fleet_lease_waits", "Connection slot requests that found every slot of the host taken fleet-wide and waited."},
	{"fleet_lease_wait_seconds", "Time connection slot requests waited for a slot."},
	{"fleet_rate_waits", "New connections that waited for the host's fleet-wide rate."},
	{"fleet_leases_lost", "Connection slots lost before release (expired, backend restarted or unreachable, budget switched)."},
	{"fleet_fallbacks", "Switches to the divided budget because the fleet backend was unreachable."},
	{"fleet_fallback_seconds", "Time spent on the divided budget with the fleet backend unreachable (growing: in fallback now)."},
	{"fleet_backend_errors", "Fleet backend calls and health checks that failed."},
}

// EngineCounterName is the family name of an engine counter key.
func EngineCounterName(key string) string { return Prefix + key + "_total" }

// EngineCounterKeys lists the engine counter keys that are exported.
func EngineCounterKeys() []string {
	out := make([]string, len(engineCounters))
	for i, c := range engineCounters {
		out[i] = c.key
	}
	return out
}

// Families returns every family the code registers, sorted by name.
func Families() []Family {
	out := append([]Family(nil), families...)
	for _, c := range engineCounters {
		out = append(out, Family{EngineCounterName(c.key), Counter, c.help, nil, []string{manager, api}})
	}
	for _, h := range engineHistograms {
		out = append(out, Family{Prefix + h.key, Histogram, h.help, nil, []string{manager, api}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the name of every family the code registers, sorted.
func Names() []string {
	fs := Families()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// Known reports whether name is a series name of a registered family: a
// family name, or a histogram's name with _bucket, _sum or _count.
func Known(name string) bool {
	for _, f := range Families() {
		if name == f.Name {
			return true
		}
		if f.Type == Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				if name == f.Name+s {
					return true
				}
			}
		}
	}
	return false
}

func family(name string) Family {
	for _, f := range families {
		if f.Name == name {
			return f
		}
	}
	panic(fmt.Sprintf("metrics: no family %q", name))
}

func counterVec(name string) *prometheus.CounterVec {
	f := family(name)
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name, Help: f.Help}, f.Labels)
}

func histogramVec(name string, buckets []float64) *prometheus.HistogramVec {
	f := family(name)
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: f.Name, Help: f.Help, Buckets: buckets}, f.Labels)
}

// validKey reports whether s can be a label value we export: short, and
// made of the characters of routes, codes, reasons and service names.
func validKey(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) < 0
}
