// Package pipeline runs a list through a data service in three steps:
// Prepare (stage the input and plan shards), RunShard (one per Job index),
// and Merge (one result file). The controller runs Prepare and Merge; the
// worker runs RunShard, in a Job pod or in-process.
package pipeline

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// PlanVersion changes when the plan document changes shape. Version 2:
// repeats are found at preparation (Repeats), not by each shard.
const PlanVersion = 2

// PlanVersionDomain is the version of plans whose shards were cut by
// domain (Plan.Routing set). Contiguous plans keep PlanVersion, so plans
// already stored still load; a worker older than domain shards refuses a
// version 3 plan instead of reading its shards as contiguous rows (with
// wrong row numbers).
const PlanVersionDomain = 3

// Shard modes (Config.ShardBy, the --shard-by flags of the manager and
// of `worker run`).
const (
	// ShardByRows cuts the input into contiguous byte ranges.
	ShardByRows = "rows"
	// ShardByDomain sends each row to the shard chosen by a hash of its
	// email's domain (listservice.HostSharder), for services whose work
	// is per mail host; other services are cut by rows.
	ShardByDomain = "domain"
	// ShardByMX sends each row to the shard chosen by a hash of its
	// domain's primary MX host (listservice.MXSharder, see mxroute.go),
	// so that the domains a provider hosts on one MX host are one shard's
	// work; a domain whose MX is unknown goes by its own hash. Services
	// that are only HostSharders are cut by domain, others by rows.
	ShardByMX = "mx"
	// ShardByFlag is the flag that chooses the mode.
	ShardByFlag = "shard-by"
)

// ShardByModes lists the valid modes, for flag help and checks.
var ShardByModes = []string{ShardByRows, ShardByDomain, ShardByMX}

// BindShardBy binds the --shard-by flag to mode with default def (the
// manager's is ShardByMX; `worker run`'s ShardByRows, since one
// process gains nothing from it).
func BindShardBy(fs *flag.FlagSet, mode *string, def string) {
	fs.StringVar(mode, ShardByFlag, def, "how lists are cut into shards: "+ShardByMX+
		" (rows go to shards by their email domain's primary MX host, looked up once per domain, so that one pod talks to each mail host), "+ShardByDomain+
		" (by their email's domain; both for services whose work is per mail host, others are cut by rows) or "+
		ShardByRows+" (contiguous runs of rows)")
}

// CheckShardBy refuses an unknown mode ("" is rows).
func CheckShardBy(mode string) error {
	if mode == "" || slices.Contains(ShardByModes, mode) {
		return nil
	}
	return fmt.Errorf("--%s %q: want %s, %s or %s", ShardByFlag, mode, ShardByRows, ShardByDomain, ShardByMX)
}

// maxPlanBytes bounds plan documents read back from the store.
const maxPlanBytes = 4 << 20

// Plan is everything a shard needs, stored as JSON in the blob store.
type Plan struct {
	Version int    `json:"version"`
	Service string `json:"service"`
	// InputKey is the plain delimited input (extracted from a zip when needed).
	InputKey string `json:"inputKey"`
	// Zip says the result must be zipped, with ZipEntry as its file name.
	Zip      bool   `json:"zip,omitempty"`
	ZipEntry string `json:"zipEntry,omitempty"`

	Delimiter   byte            `json:"delimiter"`
	Header      bool            `json:"header"`
	EmailColumn listfile.Column `json:"emailColumn"` // 1-based, as in the request
	// Width is the widest input row; shorter rows are padded to it so the
	// appended columns line up.
	Width int  `json:"width"`
	CRLF  bool `json:"crlf,omitempty"`
	// InputHeader is the input's header row, when it had one.
	InputHeader []string `json:"inputHeader,omitempty"`
	// OutputHeader is the result's header row: input columns then service columns.
	OutputHeader []string `json:"outputHeader"`
	// Columns are the service's appended columns.
	Columns []string `json:"columns"`
	// MaxAge is the list's maximum age of verdicts from the verification
	// history (nanoseconds; absent: the service's default). A field added
	// without a version change: older plans simply lack it.
	MaxAge *time.Duration `json:"maxAge,omitempty"`
	// HistoryTenant is whose list this is, for the verification history:
	// the shards (in the manager or in Job pods alike) read it here. Added
	// without a version change: a plan made before it has none, and its
	// shards then neither read nor write a tenant-scoped history.
	HistoryTenant string `json:"historyTenant,omitempty"`
	// EscapeFormulas says the input's own cells, header included, are
	// formula-escaped in the result (listfile.EscapeFormula), as the
	// service's columns always are; false keeps them byte for byte. A
	// field added without a version change: older plans lack it, false.
	EscapeFormulas bool `json:"escapeFormulas,omitempty"`

	SizeBytes int64 `json:"sizeBytes"`
	Records   int64 `json:"records"`
	// Shards are contiguous byte ranges of InputKey. In rows mode that is
	// the input itself, cut in order. In domain mode (Routing set; issue
	// 22) InputKey is a staged copy of the rows in which each shard's rows
	// (those whose email domain hashes to it, in row order) sit together,
	// so that one pod holds all of a mail host's addresses and a fleet of
	// pods opens about the sessions of one process rather than about 4×
	// as many; the shard's FirstRow is then the list row number of its
	// first row and FirstLine means nothing.
	Shards []listfile.Shard `json:"shards"`
	// Repeats counts, per shard, the rows that repeat an earlier row of
	// the list (blobstore.ListKeys.Repeats lists them); nil when the
	// service flags no duplicates (listservice.Deduper).
	Repeats []int64 `json:"repeats,omitempty"`
	// Routing is set when the shards were cut by domain; nil: contiguous.
	Routing *Routing `json:"routing,omitempty"`
	// MXRouting is what routing by MX host cost (ShardByMX): lookups,
	// failures, time. Nil otherwise.
	MXRouting *MXRouting `json:"mxRouting,omitempty"`
}

// Routing is what a domain-sharded plan adds: where each shard's rows
// came from and how the merge puts them back in input order.
type Routing struct {
	// RowsKey holds every shard's 0-based list row numbers, shard after
	// shard, as uvarint gaps (row - previous row of the shard - 1, the
	// first from -1); Rows[i] is shard i's byte range of it.
	RowsKey string      `json:"rowsKey"`
	Rows    []ByteRange `json:"rows"`
	// RouteKey holds the shard of every row in input order, RouteWidth
	// (1 or 2) bytes a row, little-endian.
	RouteKey   string `json:"routeKey"`
	RouteWidth int    `json:"routeWidth"`
	// Runs is how many runs preparation spilled to regroup the rows past
	// Config.DistributeMemory (0: regrouped in memory). Only a record of
	// the preparation's cost, for operators and tests; nothing reads it.
	Runs int `json:"runs,omitempty"`
}

// ByteRange is the range [Start, End) of an object.
type ByteRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// ByDomain reports whether the plan's shards were cut by domain.
func (p *Plan) ByDomain() bool { return p.Routing != nil }

// Dialect returns the listfile dialect of the plan.
func (p *Plan) Dialect() listfile.Dialect {
	return listfile.Dialect{Delimiter: p.Delimiter, Header: p.Header, EmailColumn: p.EmailColumn}
}

// Shard returns shard i of the plan.
func (p *Plan) Shard(i int) (listfile.Shard, error) {
	if i < 0 || i >= len(p.Shards) {
		return listfile.Shard{}, fmt.Errorf("shard index %d is outside the plan's %d shards", i, len(p.Shards))
	}
	return p.Shards[i], nil
}

// ExitBadInput is the exit code of a worker whose shard failed on a problem
// with the list itself (an InputError): the Job's pod failure policy fails
// the index at once instead of retrying.
const ExitBadInput = 42

// InputError is a problem with the list itself. Retrying cannot fix it, so
// the list fails at once (and a Job index fails without retries).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BadInput wraps err as an InputError.
func BadInput(err error) error {
	if err == nil {
		return nil
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return &InputError{Err: err}
}

// BadInputf formats an InputError.
func BadInputf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// IsBadInput reports whether err is a problem with the list itself.
func IsBadInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// Summary is a shard's small outcome document.
type Summary struct {
	Index     int                         `json:"index"`
	Rows      int64                       `json:"rows"`
	Reporting map[string]map[string]int64 `json:"reporting,omitempty"`
	// Counters are the service's work counters for the shard (see
	// listservice.CounterReporter): no per-row data.
	Counters map[string]float64 `json:"counters,omitempty"`
	// Pace is what paced the shard (listservice.PaceReporter).
	Pace *listservice.Pace `json:"pace,omitempty"`
	// Error is set when the shard failed; BadInput says retrying is useless.
	Error    string `json:"error,omitempty"`
	BadInput bool   `json:"badInput,omitempty"`
}

// ProgressDoc is a shard's running count, rewritten while it works.
type ProgressDoc struct {
	Rows int64 `json:"rows"`
}
