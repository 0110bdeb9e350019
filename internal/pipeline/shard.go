package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/listfile"
	"github.com/emaildata/emaildata/internal/listservice"
)

// batchSize rows go to a service at a time by default; big enough for a
// service to group by domain, small enough to keep memory flat. Services
// may ask for larger batches (BatchSizer), up to maxBatchSize.
const (
	batchSize    = 512
	maxBatchSize = 50_000
)

// progressEvery is how often a shard rewrites its progress document.
const progressEvery = 2 * time.Second

// LoadPlan reads a list's plan.
func LoadPlan(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys) (*Plan, error) {
	var p Plan
	if err := store.ReadJSON(ctx, keys.Plan(), maxPlanBytes, &p); err != nil {
		return nil, err
	}
	if p.Version != PlanVersion {
		return nil, fmt.Errorf("plan version %d is not supported (want %d)", p.Version, PlanVersion)
	}
	return &p, nil
}

// RunShard processes shard index of a prepared list and writes its part of
// the result plus a summary. It is safe to run again: each run rewrites the
// same objects.
func RunShard(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, index int, reg *listservice.Registry, lim listfile.Limits) (*Summary, error) {
	sum, err := runShard(ctx, store, keys, index, reg, lim)
	if err != nil {
		failed := Summary{Index: index, Error: err.Error(), BadInput: IsBadInput(err)}
		if werr := store.WriteJSON(context.WithoutCancel(ctx), keys.Summary(index), failed); werr != nil {
			return nil, errors.Join(err, werr)
		}
		return nil, err
	}
	return sum, nil
}

func runShard(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, index int, reg *listservice.Registry, lim listfile.Limits) (*Summary, error) {
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
	proc, err := svc.NewProcessor(ctx, listservice.Input{Header: plan.InputHeader, EmailColumn: plan.EmailColumn - 1})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", plan.Service, err)
	}
	defer proc.Close()

	if obs, ok := proc.(listservice.PriorObserver); ok && index > 0 {
		if err := observePrior(ctx, store, plan, shard, obs, lim); err != nil {
			return nil, err
		}
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
	rows, err := processRows(ctx, plan, shard, proc, bufio.NewReaderSize(in, 256<<10), out, lim, func(done int64) {
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
	sum := &Summary{Index: index, Rows: rows, Reporting: proc.Reporting()}
	if err := store.WriteJSON(ctx, keys.Summary(index), sum); err != nil {
		return nil, err
	}
	return sum, nil
}

// observePrior streams the rows before shard, from the first data row, to
// obs. Reading is cheap next to the services that need it (about 700 MB/s).
func observePrior(ctx context.Context, store *blobstore.Store, plan *Plan, shard listfile.Shard, obs listservice.PriorObserver, lim listfile.Limits) error {
	start := plan.Shards[0].Start
	if shard.Start <= start {
		return nil
	}
	in, err := store.NewRangeReader(ctx, plan.InputKey, start, shard.Start-start, nil)
	if err != nil {
		return fmt.Errorf("open earlier rows: %w", err)
	}
	defer in.Close()
	rd := listfile.NewRangeReader(bufio.NewReaderSize(in, 256<<10), plan.Dialect(), lim, start, plan.Shards[0].FirstLine)
	var fields []string
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return classify(fmt.Errorf("earlier rows: %w", err))
		}
		fields = fields[:0]
		for i := 0; i < rec.NumFields(); i++ {
			fields = append(fields, rec.Field(i))
		}
		obs.ObservePrior(fields)
	}
}

// processRows streams records through the processor in batches and writes
// each row with the service's columns appended, in input order.
func processRows(ctx context.Context, plan *Plan, shard listfile.Shard, proc listservice.Processor, in io.Reader, out io.Writer, lim listfile.Limits, progress func(int64)) (int64, error) {
	rd := listfile.NewRangeReader(in, plan.Dialect(), lim, shard.Start, shard.FirstLine)
	wr := listfile.NewWriter(out, plan.Delimiter, plan.CRLF)
	ncol := len(plan.Columns)

	size := batchSize
	if bs, ok := proc.(listservice.BatchSizer); ok && bs.BatchSize() > 0 {
		size = min(bs.BatchSize(), maxBatchSize)
	}
	var b batch
	outs := make([][]string, size)
	for i := range outs {
		outs[i] = make([]string, ncol)
	}
	var done int64
	lastProgress := time.Now()

	flush := func() error {
		rows := b.rows(shard.FirstRow + done)
		if len(rows) == 0 {
			return nil
		}
		batchOut := outs[:len(rows)]
		for _, o := range batchOut {
			clear(o)
		}
		if err := proc.ProcessBatch(ctx, rows, batchOut); err != nil {
			return err
		}
		for i := range rows {
			if err := wr.WriteRaw(b.raw(i), b.nfields[i], plan.Width, batchOut[i]); err != nil {
				return fmt.Errorf("write row: %w", err)
			}
		}
		done += int64(len(rows))
		b.reset()
		if progress != nil && time.Since(lastProgress) >= progressEvery {
			lastProgress = time.Now()
			progress(done)
		}
		return ctx.Err()
	}

	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return done, classify(fmt.Errorf("row %d: %w", shard.FirstRow+done+int64(b.len())+1, err))
		}
		b.add(rec)
		if b.len() == size {
			if err := flush(); err != nil {
				return done, err
			}
		}
	}
	if err := flush(); err != nil {
		return done, err
	}
	if err := wr.Flush(); err != nil {
		return done, fmt.Errorf("write rows: %w", err)
	}
	return done, nil
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

func (b *batch) add(rec *listfile.Record) {
	n := rec.NumFields()
	for i := 0; i < n; i++ {
		b.arena = append(b.arena, rec.FieldBytes(i)...)
		b.fieldEnd = append(b.fieldEnd, len(b.arena))
	}
	b.rowEnd = append(b.rowEnd, len(b.fieldEnd))
	b.rawBuf = append(b.rawBuf, rec.Raw...)
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
