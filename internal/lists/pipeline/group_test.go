package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// TestGroupBatches: a read-ahead is cut into batches of whole groups, in
// the order of each group's first row, a group's rows in input order; a
// group bigger than a batch goes alone, whole; rows without a key are
// groups of one.
func TestGroupBatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys string // one letter a row; '.' no key
		size int
		want []string // each batch's rows, as their keys' letters and row indexes
	}{
		{"one batch", "abab", 4, []string{"a0 a2 b1 b3"}},
		{"groups stay whole", "abcabc", 4, []string{"a0 a3 b1 b4", "c2 c5"}},
		{"first row's order", "cbacba", 2, []string{"c0 c3", "b1 b4", "a2 a5"}},
		{"a group bigger than a batch goes alone", "abbbbbc", 3, []string{"a0", "b1 b2 b3 b4 b5", "c6"}},
		{"batches filled up to size", "aabbccdd", 4, []string{"a0 a1 b2 b3", "c4 c5 d6 d7"}},
		{"no key: groups of one", "a.a..", 2, []string{"a0 a2", ".1 .3", ".4"}},
		{"a domain across the read-ahead", "abababababab", 1, []string{"a0 a2 a4 a6 a8 a10", "b1 b3 b5 b7 b9 b11"}},
		{"empty", "", 4, nil},
		{"size zero is one", "ab", 0, []string{"a0", "b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := func(i int) string {
				if tc.keys[i] == '.' {
					return ""
				}
				return tc.keys[i : i+1]
			}
			order, bounds := groupBatches(len(tc.keys), tc.size, key, nil, nil)
			var got []string
			for k := 1; k < len(bounds); k++ {
				var b []string
				for _, i := range order[bounds[k-1]:bounds[k]] {
					b = append(b, fmt.Sprintf("%c%d", tc.keys[i], i))
				}
				got = append(got, strings.Join(b, " "))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("batches %q, want %q", got, tc.want)
			}
			// Reuse: the same answer with the slices handed back.
			order2, bounds2 := groupBatches(len(tc.keys), tc.size, key, order, bounds)
			if !slices.Equal(order2, order) || !slices.Equal(bounds2, bounds) {
				t.Fatalf("reused: %v %v, want %v %v", order2, bounds2, order, bounds)
			}
		})
	}
}

// groupStreamer is a listservice.Grouper that records each batch's keys.
type groupStreamer struct {
	batch, window, ahead int

	mu       sync.Mutex
	batches  [][]string // each batch's rows' keys
	finished []int64    // rows of FinishBatch calls, in order
}

func (p *groupStreamer) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	p.mu.Lock()
	var keys []string
	for i, r := range rows {
		keys = append(keys, p.GroupKey(r))
		out[i][0] = fmt.Sprint(r.Number)
	}
	p.batches = append(p.batches, keys)
	p.mu.Unlock()
	return nil
}

func (p *groupStreamer) FinishBatch(rows []listservice.Row, _ [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rows {
		p.finished = append(p.finished, r.Number)
	}
}

func (p *groupStreamer) GroupKey(r listservice.Row) string {
	e := r.Field(0)
	return e[strings.IndexByte(e, '@')+1:]
}
func (p *groupStreamer) GroupRows() int                   { return p.ahead }
func (p *groupStreamer) RowsInFlight() int                { return p.window }
func (p *groupStreamer) BatchSize() int                   { return p.batch }
func (p *groupStreamer) Reporting() listservice.Reporting { return nil }
func (p *groupStreamer) Close() error                     { return nil }

// TestGrouperBatches: with a Grouper, a domain's rows within a read-ahead
// (GroupRows, at most half the window) go to the processor in one batch,
// while the output keeps the input's order and FinishBatch sees every row
// once, in order.
func TestGrouperBatches(t *testing.T) {
	const rows, domains = 1200, 30
	var in strings.Builder
	for i := range rows {
		fmt.Fprintf(&in, "u%d@d%d.test\n", i, i%domains) // every domain in every 30 rows
	}
	for _, tc := range []struct {
		name                 string
		batch, window, ahead int
		// splits is how many batches each domain's rows go in; maxBatch
		// the most rows a batch.
		splits, maxBatch int
	}{
		{"no grouping: a domain in every batch", 100, 1000, 0, 12, 100},
		{"read-ahead up to the batch: no grouping", 100, 1000, 100, 12, 100},
		{"read-ahead of 400: a domain once in each", 100, 1000, 400, 3, 98},
		{"read-ahead capped at half the window", 100, 600, 5000, 4, 100},
		{"the whole list in one read-ahead", 100, 5000, 1200, 1, 80},
		{"a shard that fits the window: one read-ahead", 100, 1500, 5000, 1, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &groupStreamer{batch: tc.batch, window: tc.window, ahead: tc.ahead}
			plan := &Plan{Delimiter: ',', EmailColumn: 1, Width: 1, Columns: []string{"n"}}
			shard := listfile.Shard{Start: 0, End: int64(in.Len()), Rows: rows, FirstLine: 1}
			var out bytes.Buffer
			n, err := processRows(context.Background(), plan, shard, p, nil, nil, strings.NewReader(in.String()), &out, listfile.Limits{}, clock.Wall{}, nil)
			if err != nil || n != rows {
				t.Fatalf("rows %d, err %v", n, err)
			}
			for i, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				if want := fmt.Sprintf("u%d@d%d.test,%d", i, i%domains, i); l != want {
					t.Fatalf("line %d: %q, want %q", i, l, want)
				}
			}
			for i, r := range p.finished {
				if r != int64(i) {
					t.Fatalf("FinishBatch rows out of order at %d: %d", i, r)
				}
			}
			in := map[string]int{}
			most := 0
			for _, b := range p.batches {
				most = max(most, len(b))
				seen := map[string]bool{}
				for _, k := range b {
					if !seen[k] {
						seen[k] = true
						in[k]++
					}
				}
			}
			for k, c := range in {
				if c != tc.splits {
					t.Fatalf("domain %s in %d batches, want %d", k, c, tc.splits)
				}
			}
			if most != tc.maxBatch {
				t.Fatalf("largest batch %d rows, want %d", most, tc.maxBatch)
			}
		})
	}
}

// TestGroupChunk: a read-ahead is GroupRows, at most half the window, or
// the whole shard when it fits the window; never below a batch.
func TestGroupChunk(t *testing.T) {
	for _, tc := range []struct {
		groupRows, window, size int
		shardRows               int64
		want                    int
	}{
		{25_000, 100_000, 1000, 50_000_000, 25_000},
		{25_000, 25_000, 1000, 50_000_000, 12_500}, // half the window
		{25_000, 25_000, 1000, 20_000, 20_000},     // the shard fits the window
		{25_000, 25_000, 1000, 25_000, 25_000},
		{25_000, 25_000, 1000, 25_001, 12_500},
		{10_000, 25_000, 1000, 20_000, 10_000}, // GroupRows caps
		{500, 100_000, 1000, 50_000, 1000},     // up to a batch: none
		{25_000, 1500, 1000, 0, 1000},          // rows unknown: half the window
	} {
		if got := groupChunk(tc.groupRows, tc.window, tc.size, tc.shardRows); got != tc.want {
			t.Errorf("groupChunk(%d, %d, %d, %d) = %d, want %d", tc.groupRows, tc.window, tc.size, tc.shardRows, got, tc.want)
		}
	}
}
