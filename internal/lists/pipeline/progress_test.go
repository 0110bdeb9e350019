package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// timedProc takes each batch of batch rows took long, or until its
// context ends.
type timedProc struct {
	batch int
	took  time.Duration
}

func (p *timedProc) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(p.took):
	}
	for i, r := range rows {
		out[i][0] = fmt.Sprint(r.Number)
	}
	return nil
}

func (p *timedProc) BatchSize() int                   { return p.batch }
func (p *timedProc) Reporting() listservice.Reporting { return nil }
func (p *timedProc) Close() error                     { return nil }

// progressCall is one call of a shard's progress callback: when, from the
// shard's start, and with how many rows written.
type progressCall struct {
	at   time.Duration
	rows int64
}

// TestProgressThrottle: a shard reports its progress at the first batch
// written progressEvery or more after its last report (or its start), on
// the clock it is given; in a synctest bubble, at exact times.
func TestProgressThrottle(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rows, batch int
		took        time.Duration
		want        []progressCall
	}{
		// Batches end at 0.7, 1.4, 2.1 s…: reports at 2.1, 4.2 and 6.3 s.
		{"between batches", 10, 1, 700 * time.Millisecond, []progressCall{{2100 * time.Millisecond, 3}, {4200 * time.Millisecond, 6}, {6300 * time.Millisecond, 9}}},
		// A batch ending exactly progressEvery after the last report
		// reports.
		{"on the interval", 6, 2, progressEvery, []progressCall{{2 * time.Second, 2}, {4 * time.Second, 4}, {6 * time.Second, 6}}},
		// A shard done within progressEvery never reports: its summary
		// says more.
		{"faster than the interval", 100, 10, 150 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				input := strings.Repeat("a@example.com\n", tc.rows)
				plan := &Plan{Delimiter: ',', EmailColumn: 1, Width: 1, Columns: []string{"n"}}
				shard := listfile.Shard{Start: 0, End: int64(len(input)), Rows: int64(tc.rows), FirstLine: 1}
				start := time.Now()
				var got []progressCall
				var out bytes.Buffer
				n, err := processRows(context.Background(), plan, shard, &timedProc{batch: tc.batch, took: tc.took}, nil, nil,
					strings.NewReader(input), &out, listfile.Limits{}, clock.Wall{}, func(done int64) {
						got = append(got, progressCall{time.Since(start), done})
					})
				if err != nil || n != int64(tc.rows) {
					t.Fatalf("rows %d, err %v", n, err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("progress reports %v, want %v", got, tc.want)
				}
			})
		})
	}
}
