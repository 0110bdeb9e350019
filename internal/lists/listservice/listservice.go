// Package listservice defines the seam between the list pipeline and the data
// services (email verification, append, intelligence) that run over a list.
package listservice

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Row is one data row handed to a service. Its fields are copies, so a
// service may keep them while it works through a batch.
type Row struct {
	// Number is the 0-based data row number in the whole list.
	Number int64
	// Fields are the row's unquoted values.
	Fields []string
	// Repeat says the row's duplicate key (see Deduper) appeared in an
	// earlier row of the whole list, in this shard or any before it. It is
	// set only for services that implement Deduper.
	Repeat bool
}

// Field returns field i (0-based), or "" for a short row.
func (r Row) Field(i int) string {
	if i < 0 || i >= len(r.Fields) {
		return ""
	}
	return r.Fields[i]
}

// Input describes the list a processor works on.
type Input struct {
	// Header holds the input's header names, or nil when it had none.
	Header []string
	// EmailIndex is the 0-based index of the email column
	// (listfile.Column.Index of the 1-based column users name).
	EmailIndex int
	// MaxAge is the oldest verdict from the verification history the list
	// accepts instead of a new probe (nil: the service's default, any
	// verdict still kept; 0: probe every address).
	MaxAge *time.Duration
	// HistoryTenant is whose list this is, for the verification history:
	// an evhistory tenant (APITenant of the submitting API tenant,
	// NamespaceTenant of a list applied with kubectl). With a history
	// scoped per tenant, the list is answered only from its tenant's own
	// earlier checks.
	HistoryTenant string
}

// Processor runs a service over the rows of one shard. Rows come in
// batches, so a service can group work (for example by mail domain).
type Processor interface {
	// ProcessBatch fills out[i] with the appended values for rows[i];
	// each out[i] has len(Columns()) entries. An error aborts the shard.
	ProcessBatch(ctx context.Context, rows []Row, out [][]string) error
	// Reporting returns the aggregated counts of the rows seen so far.
	Reporting() Reporting
	// Close releases the processor's resources.
	Close() error
}

// BatchSizer is implemented by processors that want batches of another
// size than the pipeline's default.
type BatchSizer interface {
	BatchSize() int
}

// Streamer is implemented by processors whose ProcessBatch may run for
// several batches at once: services that wait on remote servers
// (greylisting, slow hosts). The pipeline then keeps up to RowsInFlight
// rows in flight, so that all their waits overlap, and still writes the
// rows in input order. Whatever depends on row order (duplicates, running
// counts) goes in FinishBatch, which the pipeline calls once per batch, in
// input order, after that batch's ProcessBatch returned; only FinishBatch
// and Reporting need no locking.
type Streamer interface {
	RowsInFlight() int
	FinishBatch(rows []Row, out [][]string)
}

// Grouper is implemented by Streamers whose work is cheaper when the
// rows of one key arrive together (email verification: a mail host's
// sessions are planned from the work queued at it, so a domain's rows
// spread over several batches can each cost a session of their own). The
// pipeline reads up to GroupRows rows ahead (at most half its rows in
// flight, so two read-aheads overlap), and hands the processor batches of
// whole groups: a key's rows among them go in one ProcessBatch call. It
// still writes the rows, and calls FinishBatch, in input order.
type Grouper interface {
	// GroupRows is the most rows read ahead and grouped at once (up to
	// the batch size: no grouping across batches).
	GroupRows() int
	// GroupKey returns row's group ("" for none: such rows go in any
	// batch). It must be a pure function; it may be called from several
	// goroutines at once.
	GroupKey(row Row) string
}

// Deduper is implemented by services that flag rows repeating an earlier
// row of the list. The pipeline finds the repeats once for the whole list,
// when it prepares the list (in time linear in the list and memory bounded
// by pipeline.Config.DedupMemory), and hands each row's answer to the
// processor in Row.Repeat, so a shard never needs the rows before it.
type Deduper interface {
	// DedupKey returns the normalised form of a row's email column value
	// under which repeats are compared, or "" for a value that never
	// repeats (an empty address). It must be a pure function, and keep
	// neither email nor the key it returns: the pipeline passes a view of
	// its read buffer (no copy per row) and hashes the key at once.
	DedupKey(email string) string
}

// HostSharder is implemented by services whose work is per mail host
// (email verification): with pipeline.ShardByDomain, the pipeline sends
// all the rows of one shard key to one shard, so that one process talks to
// each mail host of a list instead of every shard to every host.
type HostSharder interface {
	// ShardKey returns the normalised domain of a row's email column value
	// (the same for "Foo@GMAIL.com" and "foo@gmail.com"), or "" when it has
	// none; such rows are spread by row number. It must be a pure function.
	ShardKey(email string) string
}

// MXSharder is a HostSharder that can route by MX host
// (pipeline.ShardByMX): the pipeline sends the rows of every domain whose
// primary MX host is the same to one shard.
type MXSharder interface {
	HostSharder
	// CanResolveMX reports whether PrimaryMX can answer at all (false for
	// an engine without DNS: the pipeline then routes by domain).
	CanResolveMX() bool
	// PrimaryMX returns the name of a ShardKey's (a domain's) most
	// preferred MX host, looked up through the service's DNS cache within
	// ctx, or false when the domain has none or the lookup failed.
	PrimaryMX(ctx context.Context, domain string) (string, bool)
}

// Pace says what paced a shard's work: the mail host whose work took
// longest, the least time its own limits allow for it (its floor) and the
// limit that sets that floor. A bounded summary: one host, no row data.
type Pace struct {
	Host         string  `json:"host"`
	SpanSeconds  float64 `json:"spanSeconds"`
	FloorSeconds float64 `json:"floorSeconds"`
	Reason       string  `json:"reason,omitempty"`
}

// PaceReporter is implemented by processors that know what paced their
// work; the pipeline keeps it in the shard summary and the merge keeps
// the slowest shard's.
type PaceReporter interface {
	Pace() (Pace, bool)
}

// CounterReporter is implemented by processors with work counters (DNS
// lookups, SMTP sessions, ...); the pipeline puts them in the shard
// summary, keyed by the names the counters' owners give them.
type CounterReporter interface {
	Counters() map[string]float64
}

// Service is a data service that can run over lists.
type Service interface {
	// Columns names the appended columns, in order.
	Columns() []string
	// Check rejects inputs the service cannot work with (for example a
	// header that lacks required columns), before any shard runs.
	Check(in Input) error
	// NewProcessor returns a processor for one shard.
	NewProcessor(ctx context.Context, in Input) (Processor, error)
}

// Reporting holds small aggregated counts: field → bucket → count.
type Reporting map[string]map[string]int64

// Add counts one row into field/bucket.
func (r Reporting) Add(field, bucket string, n int64) {
	m := r[field]
	if m == nil {
		m = map[string]int64{}
		r[field] = m
	}
	m[bucket] += n
}

// Merge adds other's counts into r.
func (r Reporting) Merge(other Reporting) {
	for field, buckets := range other {
		for bucket, n := range buckets {
			r.Add(field, bucket, n)
		}
	}
}

// Registry maps service names to services. It is not global: each binary
// builds one with the services it is configured for.
type Registry struct {
	mu       sync.RWMutex
	services map[string]Service
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{services: map[string]Service{}} }

// Register adds a service under name.
func (r *Registry) Register(name string, s Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services[name] = s
}

// Lookup returns the named service.
func (r *Registry) Lookup(name string) (Service, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.services[name]
	if !ok {
		names := make([]string, 0, len(r.services))
		for n := range r.services {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("service %q is not available in this deployment (available: %v)", name, names)
	}
	return s, nil
}
