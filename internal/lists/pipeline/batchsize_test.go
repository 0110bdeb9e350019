package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// sizedProc records the batch sizes it is handed.
type sizedProc struct {
	want  int
	sizes []int
}

func (p *sizedProc) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	p.sizes = append(p.sizes, len(rows))
	for i := range rows {
		out[i][0] = "x"
	}
	return nil
}
func (p *sizedProc) Reporting() listservice.Reporting { return nil }
func (p *sizedProc) Close() error                     { return nil }
func (p *sizedProc) BatchSize() int                   { return p.want }

// TestBatchSizer: a processor that asks for another batch size gets it,
// and the default applies otherwise.
func TestBatchSizer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  int
		sizes []int
	}{
		{"large batches", 1500, []int{1500, 1500, 300}},
		{"default", 0, []int{512, 512, 512, 512, 512, 512, 228}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := strings.Repeat("a@example.com\n", 3300)
			plan := &Plan{Delimiter: ',', EmailColumn: 1, Width: 1, Columns: []string{"c"}}
			shard := listfile.Shard{Start: 0, End: int64(len(input)), Rows: 3300, FirstLine: 1}
			p := &sizedProc{want: tc.want}
			var out bytes.Buffer
			n, err := processRows(context.Background(), plan, shard, p, nil, nil, strings.NewReader(input), &out, listfile.Limits{}, clock.Wall{}, nil)
			if err != nil || n != 3300 {
				t.Fatalf("rows %d, err %v", n, err)
			}
			if len(p.sizes) != len(tc.sizes) {
				t.Fatalf("batch sizes %v, want %v", p.sizes, tc.sizes)
			}
			for i := range tc.sizes {
				if p.sizes[i] != tc.sizes[i] {
					t.Fatalf("batch sizes %v, want %v", p.sizes, tc.sizes)
				}
			}
			if got := strings.Count(out.String(), "a@example.com,x\n"); got != 3300 {
				t.Errorf("%d rows written, want 3300", got)
			}
		})
	}
}
