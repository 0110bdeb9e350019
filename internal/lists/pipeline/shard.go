package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// batchSize rows go to a service at a time by default; big enough for a
// service to group by domain, small enough to keep memory flat. Services
// may ask for other sizes (BatchSizer), up to maxBatchSize.
const (
	batchSize    = 512
	maxBatchSize = 50_000
)

// progressEvery is how often a shard rewrites its progress document: at
// the first batch written progressEvery or more after the last write (or
// the start), on the shard's clock.
const progressEvery = 2 * time.Second

// ShardOption sets an option of RunShard.
type ShardOption func(*shardOptions)

type shardOptions struct {
	clock clock.Clock
}

// WithClock runs the shard on c (the progress throttle); without it, on
// the wall clock. The wiring passes its one clock.
func WithClock(c clock.Clock) ShardOption {
	return func(o *shardOptions) { o.clock = c }
}

// LoadPlan reads a list's plan.
func LoadPlan(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys) (*Plan, error) {
	var p Plan
	if err := store.ReadJSON(ctx, keys.Plan(), maxPlanBytes, &p); err != nil {
		return nil, err
	}
	switch {
	case p.Version == PlanVersion && p.Routing == nil:
	case p.Version == PlanVersionDomain && p.Routing != nil && len(p.Routing.Rows) == len(p.Shards):
	default:
		return nil, fmt.Errorf("plan version %d is not supported (want %d, or %d with routing for every shard)", p.Version, PlanVersion, PlanVersionDomain)
	}
	return &p, nil
}

// RunShard processes shard index of a prepared list and writes its part of
// the result plus a summary. It is safe to run again: each run rewrites the
// same objects.
func RunShard(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, index int, reg *listservice.Registry, lim listfile.Limits, opts ...ShardOption) (*Summary, error) {
	var o shardOptions
	for _, opt := range opts {
		opt(&o)
	}
	sum, err := runShard(ctx, store, keys, index, reg, lim, clock.Or(o.clock))
	if err != nil {
		// The summary's error becomes the list's status message: the
		// condition without the server's paths (the caller logs err).
		failed := Summary{Index: index, Error: store.Redact(err), BadInput: IsBadInput(err)}
		if werr := store.WriteJSON(context.WithoutCancel(ctx), keys.Summary(index), failed); werr != nil {
			return nil, errors.Join(err, werr)
		}
		return nil, err
	}
	return sum, nil
}

func runShard(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, index int, reg *listservice.Registry, lim listfile.Limits, clk clock.Clock) (*Summary, error) {
	plan, err := LoadPlan(ctx, store, keys)
	if err != nil {
		return nil, err
	}
	shard, err := plan.Shard(index)
	if err != nil {
		return nil, err
	}
	svc, err := reg.Lookup(plan.Service)
	if err != nil {
		return nil, err
	}
	proc, err := svc.NewProcessor(ctx, listservice.Input{Header: plan.InputHeader, EmailIndex: plan.EmailColumn.Index(),
		MaxAge: plan.MaxAge, HistoryTenant: plan.HistoryTenant})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", plan.Service, err)
	}
	defer proc.Close()

	var repeats *repeatCursor
	if _, ok := svc.(listservice.Deduper); ok {
		if len(plan.Repeats) != len(plan.Shards) {
			return nil, fmt.Errorf("the plan lists repeats for %d of its %d shards; prepare the list again", len(plan.Repeats), len(plan.Shards))
		}
		if repeats, err = openRepeats(ctx, store, keys, index, shard, plan.Repeats[index]); err != nil {
			return nil, err
		}
		defer repeats.Close()
	}

	var side *domainSide
	if plan.ByDomain() {
		if side, err = openDomainSide(ctx, store, keys, plan, index); err != nil {
			return nil, err
		}
		defer side.abort()
	}

	in, err := store.NewRangeReader(ctx, plan.InputKey, shard.Start, shard.End-shard.Start, nil)
	if err != nil {
		return nil, fmt.Errorf("open shard input: %w", err)
	}
	defer in.Close()

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, err := store.NewWriter(wctx, keys.Part(index), &blobWriterOptions)
	if err != nil {
		return nil, fmt.Errorf("create shard output: %w", err)
	}
	rows, err := processRows(ctx, plan, shard, proc, repeats, side, bufio.NewReaderSize(in, 256<<10), out, lim, clk, func(done int64) {
		_ = store.WriteJSON(ctx, keys.Progress(index), ProgressDoc{Rows: done})
	})
	if err != nil {
		cancel()
		_ = out.Close()
		return nil, err
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("write shard output: %w", err)
	}
	if rows != shard.Rows {
		return nil, fmt.Errorf("shard %d read %d rows but the plan counted %d; the input changed after it was prepared", index, rows, shard.Rows)
	}
	if side != nil {
		if err := side.finish(); err != nil {
			return nil, err
		}
	}
	sum := &Summary{Index: index, Rows: rows, Reporting: proc.Reporting()}
	if cr, ok := proc.(listservice.CounterReporter); ok {
		sum.Counters = cr.Counters()
	}
	if pr, ok := proc.(listservice.PaceReporter); ok {
		if pace, ok := pr.Pace(); ok {
			sum.Pace = &pace
		}
	}
	if err := store.WriteJSON(ctx, keys.Summary(index), sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// processRows streams records through the processor in batches and writes
// each row with the service's columns appended, in input order. A
// listservice.Streamer gets many batches in flight at once. progress, if
// not nil, is given the rows written every progressEvery on clk.
func processRows(ctx context.Context, plan *Plan, shard listfile.Shard, proc listservice.Processor, repeats *repeatCursor, side *domainSide, in io.Reader, out io.Writer, lim listfile.Limits, clk clock.Clock, progress func(int64)) (int64, error) {
	rd := listfile.NewRangeReader(in, plan.Dialect(), lim, shard.Start, shard.FirstLine)
	wr := listfile.NewWriter(out, plan.Delimiter, plan.CRLF)
	size := batchSize
	if bs, ok := proc.(listservice.BatchSizer); ok && bs.BatchSize() > 0 {
		size = min(bs.BatchSize(), maxBatchSize)
	}
	st := &streamer{ctx: ctx, plan: plan, shard: shard, proc: proc, repeats: repeats, side: side, wr: wr, size: size, chunk: size, clock: clk, progress: progress, lastProgress: clk.Now()}
	if s, ok := proc.(listservice.Streamer); ok {
		st.finish = s
		if s.RowsInFlight() > size {
			st.stream, st.window = s, s.RowsInFlight()
			if g, ok := proc.(listservice.Grouper); ok {
				st.chunk = groupChunk(g.GroupRows(), st.window, size, shard.Rows)
				if st.chunk > size {
					st.group = g
				} else {
					st.chunk = size
				}
			}
		}
	}
	return st.run(rd)
}

// streamer runs batches through a processor: one at a time, or for a
// listservice.Streamer up to window rows at once, written in order. For a
// listservice.Grouper a flight is a read-ahead of chunk rows, handed to
// the processor in batches of whole groups (group.go).
type streamer struct {
	ctx      context.Context
	plan     *Plan
	shard    listfile.Shard
	proc     listservice.Processor
	stream   listservice.Streamer // nil: one batch at a time
	finish   listservice.Streamer // gets FinishBatch, windowed or not
	repeats  *repeatCursor        // nil: the service flags no duplicates
	side     *domainSide          // nil: contiguous shards
	group    listservice.Grouper  // nil: batches in input order
	window   int
	wr       *listfile.Writer
	size     int // rows a batch
	chunk    int // rows a flight: size, or a Grouper's read-ahead
	clock    clock.Clock
	progress func(int64)

	cancel       context.CancelFunc
	failMu       sync.Mutex
	failed       error     // the first batch error: it cancels the others
	flights      []*flight // in input order
	free         []*flight // written, for reuse of their buffers
	inFlight     int       // rows in flights
	read, done   int64     // rows read, rows written
	lastProgress time.Time
}

// flight is one batch handed to the processor, or one read-ahead handed
// to it in batches of whole groups.
type flight struct {
	b       *batch
	rows    []listservice.Row
	out     [][]string
	err     error
	over    chan struct{}
	grouped grouped // a Grouper's batches
}

func (st *streamer) run(rd *listfile.Reader) (int64, error) {
	ctx, cancel := context.WithCancel(st.ctx)
	defer cancel()
	defer st.drainAll() // on error, let running batches see the cancellation
	st.ctx, st.cancel = ctx, cancel
	b := st.newBatch()
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if st.side != nil { // by domain: the list row is not known here
				return st.done, classify(fmt.Errorf("row %d of shard %d: %w", st.read+int64(b.len())+1, st.shard.Index, err))
			}
			return st.done, classify(fmt.Errorf("row %d: %w", st.shard.FirstRow+st.read+int64(b.len())+1, err))
		}
		b.add(rec, st.plan.EscapeFormulas)
		if b.len() == st.chunk {
			if err := st.launch(b); err != nil {
				return st.done, err
			}
			b = st.newBatch()
		}
	}
	if err := st.launch(b); err != nil {
		return st.done, err
	}
	if st.repeats != nil {
		if err := st.repeats.finish(); err != nil {
			return st.done, err
		}
	}
	for len(st.flights) > 0 {
		if err := st.writeHead(); err != nil {
			return st.done, err
		}
	}
	if err := st.wr.Flush(); err != nil {
		return st.done, fmt.Errorf("write rows: %w", err)
	}
	return st.done, nil
}

// launch starts b, after writing out batches until it fits the window.
func (st *streamer) launch(b *batch) error {
	if b.len() == 0 {
		return nil
	}
	f := st.flightFor(b)
	st.read += int64(len(f.rows))
	if st.side != nil {
		if err := st.side.number(f.rows); err != nil {
			return err
		}
	}
	if st.repeats != nil {
		if err := st.repeats.mark(f.rows); err != nil {
			return err
		}
	}
	if st.stream == nil {
		f.err = st.proc.ProcessBatch(st.ctx, f.rows, f.out)
		close(f.over)
		st.flights = append(st.flights, f)
		return st.writeHead()
	}
	for len(st.flights) > 0 && st.inFlight+len(f.rows) > st.window {
		if err := st.writeHead(); err != nil {
			return err
		}
	}
	st.flights = append(st.flights, f)
	st.inFlight += len(f.rows)
	go func() {
		if st.group != nil && len(f.rows) > st.size {
			f.err = st.processGrouped(f)
		} else if f.err = st.proc.ProcessBatch(st.ctx, f.rows, f.out); f.err != nil {
			st.fail(f.err)
		}
		close(f.over)
	}()
	// Write whatever is already finished, so output and progress move.
	for len(st.flights) > 0 && isClosed(st.flights[0].over) {
		if err := st.writeHead(); err != nil {
			return err
		}
	}
	return nil
}

// fail cancels the shard's batches on the first error: batches before
// this one may be waiting long.
func (st *streamer) fail(err error) {
	st.failMu.Lock()
	defer st.failMu.Unlock()
	if st.failed == nil {
		st.failed = err
		st.cancel()
	}
}

// writeHead waits for the oldest batch and writes its rows.
func (st *streamer) writeHead() error {
	f := st.flights[0]
	<-f.over
	st.flights[0] = nil
	st.flights = st.flights[1:]
	st.inFlight -= len(f.rows)
	if f.err != nil {
		st.failMu.Lock()
		defer st.failMu.Unlock()
		if st.failed != nil {
			return st.failed
		}
		return f.err
	}
	if st.finish != nil {
		st.finish.FinishBatch(f.rows, f.out)
	}
	for i := range f.rows {
		before := st.wr.Written()
		if err := st.wr.WriteRaw(f.b.raw(i), f.b.nfields[i], st.plan.Width, f.out[i]); err != nil {
			return fmt.Errorf("write row: %w", err)
		}
		if st.side != nil {
			if err := st.side.length(st.wr.Written() - before); err != nil {
				return err
			}
		}
	}
	st.done += int64(len(f.rows))
	f.b.reset()
	st.free = append(st.free, f)
	if st.progress != nil && st.clock.Since(st.lastProgress) >= progressEvery {
		st.lastProgress = st.clock.Now()
		st.progress(st.done)
	}
	return st.ctx.Err()
}

// newBatch returns an empty batch, reusing a written one's buffers.
func (st *streamer) newBatch() *batch {
	if n := len(st.free); n > 0 {
		return st.free[n-1].b
	}
	return new(batch)
}

// flightFor wraps b, reusing the output buffers of the written flight
// that owned b, if any.
func (st *streamer) flightFor(b *batch) *flight {
	var f *flight
	if n := len(st.free); n > 0 && st.free[n-1].b == b {
		f = st.free[n-1]
		st.free[n-1] = nil
		st.free = st.free[:n-1]
	} else {
		f = &flight{b: b}
	}
	f.rows, f.err, f.over = b.rows(st.shard.FirstRow+st.read), nil, make(chan struct{})
	if cap(f.out) < len(f.rows) {
		f.out = make([][]string, 0, max(st.chunk, len(f.rows)))
	}
	f.out = f.out[:len(f.rows)]
	for i := range f.out {
		if f.out[i] == nil {
			f.out[i] = make([]string, len(st.plan.Columns))
		} else {
			clear(f.out[i])
		}
	}
	return f
}

// drainAll waits for batches still running (after an error).
func (st *streamer) drainAll() {
	for _, f := range st.flights {
		<-f.over
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// batch collects rows in flat buffers, so a batch costs a few allocations
// instead of one per field: field bytes go to one arena that becomes a
// single string when the batch is handed over.
type batch struct {
	arena    []byte // field values, back to back
	fieldEnd []int  // end offset in arena of every field
	rowEnd   []int  // end index in fieldEnd of every row
	rawBuf   []byte // raw records, back to back
	rawEnd   []int
	nfields  []int
	out      []listservice.Row
}

func (b *batch) len() int { return len(b.rowEnd) }

// add appends rec; with escape, the raw bytes written out are the record's
// with its formula cells escaped (listfile.Record.AppendEscaped), while the
// service still gets the values as they were.
func (b *batch) add(rec *listfile.Record, escape bool) {
	n := rec.NumFields()
	for i := 0; i < n; i++ {
		b.arena = append(b.arena, rec.FieldBytes(i)...)
		b.fieldEnd = append(b.fieldEnd, len(b.arena))
	}
	b.rowEnd = append(b.rowEnd, len(b.fieldEnd))
	if escape {
		b.rawBuf, _ = rec.AppendEscaped(b.rawBuf)
	} else {
		b.rawBuf = append(b.rawBuf, rec.Raw...)
	}
	b.rawEnd = append(b.rawEnd, len(b.rawBuf))
	b.nfields = append(b.nfields, n)
}

// rows materialises the batch. The strings are fresh per batch, so a
// service may keep them.
func (b *batch) rows(first int64) []listservice.Row {
	s := string(b.arena)
	fields := make([]string, len(b.fieldEnd))
	start := 0
	for i, end := range b.fieldEnd {
		fields[i] = s[start:end]
		start = end
	}
	b.out = b.out[:0]
	f := 0
	for i, end := range b.rowEnd {
		b.out = append(b.out, listservice.Row{Number: first + int64(i), Fields: fields[f:end:end]})
		f = end
	}
	return b.out
}

func (b *batch) raw(i int) []byte {
	start := 0
	if i > 0 {
		start = b.rawEnd[i-1]
	}
	return b.rawBuf[start:b.rawEnd[i]]
}

func (b *batch) reset() {
	b.arena, b.fieldEnd, b.rowEnd = b.arena[:0], b.fieldEnd[:0], b.rowEnd[:0]
	b.rawBuf, b.rawEnd, b.nfields = b.rawBuf[:0], b.rawEnd[:0], b.nfields[:0]
}
