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

// batchSize rows go to a service at a time; big enough for a service to
// group by domain, small enough to keep memory flat.
const batchSize = 512

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

// processRows streams records through the processor in batches and writes
// each row with the service's columns appended, in input order.
func processRows(ctx context.Context, plan *Plan, shard listfile.Shard, proc listservice.Processor, in io.Reader, out io.Writer, lim listfile.Limits, progress func(int64)) (int64, error) {
	rd := listfile.NewRangeReader(in, plan.Dialect(), lim, shard.Start, shard.FirstLine)
	wr := listfile.NewWriter(out, plan.Delimiter, plan.CRLF)
	ncol := len(plan.Columns)

	rows := make([]listservice.Row, 0, batchSize)
	raws := make([][]byte, 0, batchSize)
	nfields := make([]int, 0, batchSize)
	outs := make([][]string, batchSize)
	for i := range outs {
		outs[i] = make([]string, ncol)
	}
	var done int64
	lastProgress := time.Now()

	flush := func() error {
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
			if err := wr.WriteRaw(raws[i], nfields[i], plan.Width, batchOut[i]); err != nil {
				return fmt.Errorf("write row: %w", err)
			}
		}
		done += int64(len(rows))
		rows, raws, nfields = rows[:0], raws[:0], nfields[:0]
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
			return done, classify(fmt.Errorf("row %d: %w", shard.FirstRow+done+int64(len(rows))+1, err))
		}
		n := rec.NumFields()
		fields := make([]string, n)
		for i := 0; i < n; i++ {
			fields[i] = rec.Field(i)
		}
		rows = append(rows, listservice.Row{Number: shard.FirstRow + done + int64(len(rows)), Fields: fields})
		raws = append(raws, append([]byte(nil), rec.Raw...))
		nfields = append(nfields, n)
		if len(rows) == batchSize {
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
