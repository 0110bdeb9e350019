package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// slowStreamer is a listservice.Streamer whose early batches take longest,
// so batches finish out of order. It records how many rows were in flight
// and the order of FinishBatch calls.
type slowStreamer struct {
	batch, window int
	failAt        int64 // first row of the batch that fails; -1: none
	waitFail      bool  // other batches wait for the failure's cancellation

	mu           sync.Mutex
	inFlight     int
	maxInFlight  int
	maxBatches   int
	running      int
	finished     []int64 // first row of each finished batch, in FinishBatch order
	sawCancelled int
}

func (p *slowStreamer) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	p.mu.Lock()
	p.inFlight += len(rows)
	p.running++
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
	p.maxBatches = max(p.maxBatches, p.running)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight -= len(rows)
		p.running--
		p.mu.Unlock()
	}()
	first := rows[0].Number
	if first == p.failAt {
		return errors.New("boom")
	}
	// Earlier batches sleep longer: 20ms for the first, less later.
	d := time.Duration(max(0, 20-first/int64(p.batch))) * time.Millisecond
	select {
	case <-time.After(d):
	case <-ctx.Done():
		p.mu.Lock()
		p.sawCancelled++
		p.mu.Unlock()
		return ctx.Err()
	}
	if p.waitFail && p.failAt >= 0 {
		<-ctx.Done()
		p.mu.Lock()
		p.sawCancelled++
		p.mu.Unlock()
		return ctx.Err()
	}
	for i, r := range rows {
		out[i][0] = fmt.Sprint(r.Number)
	}
	return nil
}

func (p *slowStreamer) FinishBatch(rows []listservice.Row, out [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = append(p.finished, rows[0].Number)
	for i := range rows {
		out[i][0] += "!"
	}
}

func (p *slowStreamer) RowsInFlight() int                { return p.window }
func (p *slowStreamer) BatchSize() int                   { return p.batch }
func (p *slowStreamer) Reporting() listservice.Reporting { return nil }
func (p *slowStreamer) Close() error                     { return nil }

// TestStreamerOrder: a Streamer gets many batches at once, never more rows
// than its window, and its rows are written (and finished) in input order
// although batches complete out of order.
func TestStreamerOrder(t *testing.T) {
	const rows = 2000
	var in strings.Builder
	for i := range rows {
		fmt.Fprintf(&in, "u%d@example.com\n", i)
	}
	plan := &Plan{Delimiter: ',', EmailColumn: 1, Width: 1, Columns: []string{"n"}}
	shard := listfile.Shard{Start: 0, End: int64(in.Len()), Rows: rows, FirstLine: 1}
	p := &slowStreamer{batch: 100, window: 1000, failAt: -1}
	var out bytes.Buffer
	n, err := processRows(context.Background(), plan, shard, p, nil, nil, strings.NewReader(in.String()), &out, listfile.Limits{}, clock.Wall{}, nil)
	if err != nil || n != rows {
		t.Fatalf("rows %d, err %v", n, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, l := range lines {
		if want := fmt.Sprintf("u%d@example.com,%d!", i, i); l != want {
			t.Fatalf("line %d: %q, want %q", i, l, want)
		}
	}
	for i, f := range p.finished {
		if f != int64(i*p.batch) {
			t.Fatalf("FinishBatch order %v", p.finished)
		}
	}
	if p.maxInFlight > p.window || p.maxBatches < 5 {
		t.Fatalf("max in flight %d rows in %d batches, window %d", p.maxInFlight, p.maxBatches, p.window)
	}
}

// TestStreamerFailure: one failing batch fails the shard, the others see
// the cancellation, and nothing after the failure is written.
func TestStreamerFailure(t *testing.T) {
	const rows = 1000
	input := strings.Repeat("a@example.com\n", rows)
	plan := &Plan{Delimiter: ',', EmailColumn: 1, Width: 1, Columns: []string{"n"}}
	shard := listfile.Shard{Start: 0, End: int64(len(input)), Rows: rows, FirstLine: 1}
	p := &slowStreamer{batch: 100, window: 1000, failAt: 300, waitFail: true}
	var out bytes.Buffer
	n, err := processRows(context.Background(), plan, shard, p, nil, nil, strings.NewReader(input), &out, listfile.Limits{}, clock.Wall{}, nil)
	if err == nil || err.Error() != "boom" {
		t.Fatalf("err %v", err)
	}
	if n != 0 || out.Len() != 0 || p.running != 0 {
		t.Fatalf("%d rows written (%d bytes), %d batches still running", n, out.Len(), p.running)
	}
	if p.sawCancelled == 0 {
		t.Fatal("no batch saw the cancellation")
	}
}
