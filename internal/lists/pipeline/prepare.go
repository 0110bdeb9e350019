package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Config bounds and sizes the work.
type Config struct {
	Limits listfile.Limits
	// ShardBytes is the target input size of one shard.
	ShardBytes int64
	// MaxShards caps the shard count; shards grow beyond ShardBytes instead.
	MaxShards int
	// DedupMemory bounds the memory of the duplicate search at
	// preparation (listservice.Deduper): past it, sorted runs spill to
	// the store. Half of it holds fingerprints, 24 bytes a row.
	DedupMemory int64
	// ShardBy is ShardByRows (contiguous shards; "" too) or ShardByDomain
	// (rows sent to shards by their email's domain, for services that are
	// listservice.HostSharders; others are cut by rows).
	ShardBy string
	// DistributeMemory bounds the rows held in memory while preparation
	// regroups them by domain shard; past it they spill to the store as
	// runs (see distribute.go).
	DistributeMemory int64
	// MXLookupTimeout bounds one MX lookup of ShardByMX, MXLookupBudget
	// all of a list's, and MXMaxDomains the distinct domains remembered
	// (see mxroute.go; zero: the defaults).
	MXLookupTimeout, MXLookupBudget time.Duration
	MXMaxDomains                    int
	// MXLookupConcurrency is the MX lookups of ShardByMX made at once
	// (zero: DefaultMXConcurrency).
	MXLookupConcurrency int
	// Clock times the MX lookups against MXLookupBudget (nil: the wall
	// clock; the wiring passes its one clock, tests run in synctest
	// bubbles).
	Clock clock.Clock
}

// DefaultConfig is used where nothing is configured.
func DefaultConfig() Config {
	return Config{
		Limits:           listfile.DefaultLimits(),
		ShardBytes:       8 << 20,
		MaxShards:        64,
		DedupMemory:      DefaultDedupMemory,
		ShardBy:          ShardByRows,
		DistributeMemory: DefaultDistributeMemory,
	}
}

// SharedBy returns c for a process that prepares up to n lists at once:
// they share DedupMemory and DistributeMemory, so the process's memory does not grow with them.
func (c Config) SharedBy(n int) Config {
	if n > 1 {
		if c.DedupMemory <= 0 {
			c.DedupMemory = DefaultDedupMemory
		}
		c.DedupMemory /= int64(n)
		if c.DistributeMemory <= 0 {
			c.DistributeMemory = DefaultDistributeMemory
		}
		c.DistributeMemory /= int64(n)
	}
	return c
}

// DefaultDedupMemory is Config.DedupMemory where none is set: lists up to
// about 1.4 million rows are searched for duplicates without spilling (a
// quarter of that in a manager preparing four lists at once).
const DefaultDedupMemory = 64 << 20

// Source is the submitted list file in the blob store.
type Source struct {
	// Key of the file as submitted (a zip stays zipped).
	Key string
	// Name is the file name; its extension decides the format.
	Name string
}

// Request is what Prepare needs to know about the list.
type Request struct {
	Source  Source
	Dialect listfile.Dialect
	Service string
	// MaxAge is passed to the service (listservice.Input.MaxAge).
	MaxAge *time.Duration
	// HistoryTenant is whose list this is, for the verification history
	// (listservice.Input.HistoryTenant).
	HistoryTenant string
	// EscapeFormulas escapes the input's own cells in the result too
	// (Plan.EscapeFormulas).
	EscapeFormulas bool
}

// Prepare validates the list file, extracts a zip into a plain input object,
// plans the shards and stores the plan. Problems with the file itself come
// back as InputError; anything else is worth retrying.
func Prepare(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, req Request, svc listservice.Service, cfg Config) (*Plan, error) {
	// A dialect from NewDialect (the CRD's ListFormat.Dialect) was checked
	// where it entered; one built by hand is checked here, once, and Scan
	// and the reader trust it from then on.
	d, err := req.Dialect.Validated()
	if err != nil {
		return nil, BadInput(err)
	}
	req.Dialect = d
	kind, err := listfile.KindOf(req.Source.Name)
	if err != nil {
		return nil, BadInput(err)
	}
	size, err := store.Size(ctx, req.Source.Key)
	if err != nil {
		if blobstore.IsNotFound(err) {
			return nil, BadInputf("the list file %q is missing from the store", req.Source.Key)
		}
		return nil, err
	}

	plan := &Plan{
		Version:       PlanVersion,
		Service:       req.Service,
		InputKey:      req.Source.Key,
		Delimiter:     req.Dialect.Delimiter,
		Header:        req.Dialect.Header,
		EmailColumn:   req.Dialect.EmailColumn,
		SizeBytes:     size,
		Columns:       svc.Columns(),
		MaxAge:        req.MaxAge,
		HistoryTenant: req.HistoryTenant,

		EscapeFormulas: req.EscapeFormulas,
	}

	// The duplicate search and the domain distribution take the rows from
	// the scan: one read.
	dist, finder := rowConsumers(ctx, store, keys, req, svc, cfg, size)
	if dist != nil {
		defer dist.cleanup()
	}
	if finder != nil {
		defer finder.cleanup()
	}
	each := eachRow(dist, finder)
	var scanned *listfile.Plan
	if kind == listfile.KindZip {
		plan.Zip = true
		plan.InputKey = keys.Input()
		var hint func(int64)
		if dist != nil {
			hint = func(n int64) { dist.size = n }
		}
		scanned, plan.ZipEntry, err = prepareZip(ctx, store, req, keys.Input(), size, cfg, each, hint)
	} else {
		if dist != nil && dist.mx != nil {
			if err := dist.mx.prefetch(store, req.Source.Key, req.Dialect, cfg.Limits, dist.col, dist.hs); err != nil {
				return nil, err
			}
		}
		scanned, err = scanObject(ctx, store, req.Source.Key, req.Dialect, cfg, each)
	}
	if err != nil {
		return nil, err
	}

	plan.Width = scanned.MaxFields
	plan.CRLF = scanned.CRLF
	plan.InputHeader = scanned.Header
	plan.Records = scanned.Records
	plan.Shards = scanned.Shards
	plan.OutputHeader = outputHeader(scanned.Header, scanned.MaxFields, int(req.Dialect.EmailColumn), plan.Columns)

	if err := svc.Check(listservice.Input{Header: scanned.Header, EmailIndex: req.Dialect.EmailColumn.Index()}); err != nil {
		return nil, BadInput(err)
	}
	if dist != nil && dist.active() {
		if plan.Shards, plan.Routing, err = dist.finish(); err != nil {
			return nil, err
		}
		plan.Version, plan.InputKey = PlanVersionDomain, keys.Staged()
		if dist.mx != nil {
			plan.MXRouting = dist.mx.report()
		}
	}
	if finder != nil {
		if plan.Repeats, err = finder.finish(plan); err != nil {
			return nil, err
		}
	}
	if err := store.WriteJSON(ctx, keys.Plan(), plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// rowConsumers returns what takes the scanned rows: the domain
// distributor (ShardByDomain, for a listservice.HostSharder) and the
// duplicate search (for a listservice.Deduper); either may be nil.
func rowConsumers(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, req Request, svc listservice.Service, cfg Config, size int64) (*distributor, *repeatFinder) {
	col := req.Dialect.EmailColumn.Index()
	var dist *distributor
	if hs, ok := svc.(listservice.HostSharder); ok && (cfg.ShardBy == ShardByDomain || cfg.ShardBy == ShardByMX) {
		dist = newDistributor(ctx, store, keys, hs, col, cfg)
		dist.size = size
		if ms, ok := svc.(listservice.MXSharder); ok && cfg.ShardBy == ShardByMX && ms.CanResolveMX() {
			dist.mx = newMXRouter(ctx, ms, cfg)
		}
	}
	var finder *repeatFinder
	if dd, ok := svc.(listservice.Deduper); ok {
		mem := cfg.DedupMemory
		if mem <= 0 {
			mem = DefaultDedupMemory
		}
		finder = newRepeatFinder(ctx, store, keys, dd, col, mem)
	}
	return dist, finder
}

// eachRow is the scan's callback feeding dist and finder (nil if neither).
func eachRow(dist *distributor, finder *repeatFinder) func(int64, *listfile.Record) error {
	switch {
	case dist == nil && finder == nil:
		return nil
	case dist == nil:
		return func(n int64, rec *listfile.Record) error { return finder.row(n, 0, rec) }
	}
	return func(n int64, rec *listfile.Record) error {
		email := string(rec.FieldBytes(dist.col)) // once for both
		shard, err := dist.add(n, rec, email)
		if err != nil || finder == nil {
			return err
		}
		return finder.rowEmail(n, shard, email)
	}
}

func scanObject(ctx context.Context, store *blobstore.Store, key string, d listfile.Dialect, cfg Config, each func(int64, *listfile.Record) error) (*listfile.Plan, error) {
	r, err := store.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("open list file: %w", err)
	}
	defer r.Close()
	p, err := listfile.ScanEach(r, d, cfg.Limits, cfg.ShardBytes, cfg.MaxShards, each)
	return p, classify(err)
}

// prepareZip extracts the zip's one file into dstKey while scanning it.
// hint, when not nil, gets the size the zip declares for its file.
func prepareZip(ctx context.Context, store *blobstore.Store, req Request, dstKey string, size int64, cfg Config, each func(int64, *listfile.Record) error, hint func(int64)) (*listfile.Plan, string, error) {
	ra, _, err := store.NewReaderAt(ctx, req.Source.Key)
	if err != nil {
		return nil, "", err
	}
	name, rc, err := listfile.OpenZip(ra, size, cfg.Limits)
	if err != nil {
		return nil, "", classify(err)
	}
	defer rc.Close()
	if hint != nil {
		hint(listfile.DeclaredSize(rc))
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := store.NewWriter(wctx, dstKey, nil)
	if err != nil {
		return nil, "", fmt.Errorf("create %s: %w", dstKey, err)
	}
	scanned, err := listfile.ScanEach(io.TeeReader(rc, w), req.Dialect, cfg.Limits, cfg.ShardBytes, cfg.MaxShards, each)
	if err != nil {
		cancel() // abandons the partial object
		_ = w.Close()
		return nil, "", classify(err)
	}
	if err := w.Close(); err != nil {
		return nil, "", fmt.Errorf("write %s: %w", dstKey, err)
	}
	return scanned, name, nil
}

// classify turns listfile's bad-input errors into InputErrors.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if listfile.IsBadInput(err) {
		return BadInput(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return err
}

// outputHeader is the result's header: the input header (padded to width
// with synthesized names) or a synthesized one, then the service columns.
func outputHeader(in []string, width, emailColumn int, columns []string) []string {
	synth := listfile.SynthesizeHeader(width, emailColumn)
	out := make([]string, 0, width+len(columns))
	for i := 0; i < width; i++ {
		if i < len(in) {
			out = append(out, in[i])
		} else {
			out = append(out, synth[i])
		}
	}
	return append(out, columns...)
}

// ResultFileName is the download name: <name>-<listID>-results.<ext>.
func ResultFileName(name string, listID int64) string {
	ext := path.Ext(name)
	base := strings.TrimSuffix(path.Base(name), ext)
	if base == "" {
		base = "list"
	}
	return fmt.Sprintf("%s-%d-results%s", base, listID, strings.ToLower(ext))
}

// ContentType is the media type of a result file of that name.
func ContentType(fileName string) string {
	switch k, _ := listfile.KindOf(fileName); k {
	case listfile.KindZip:
		return "application/zip"
	case listfile.KindCSV:
		return "text/csv; charset=utf-8"
	default:
		return "text/plain; charset=utf-8"
	}
}
