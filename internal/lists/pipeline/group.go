package pipeline

import (
	"sync"

	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// groupBatches cuts n rows (a read-ahead) into batches of whole groups:
// the rows with the same key (key(i), i in [0, n)) all go in one batch,
// the groups in the order of their first row and each group's rows in
// input order, batches of at most size rows unless one group alone is
// bigger (it then goes alone, whole). A row with an empty key is a group
// of its own. Batch k is order[bounds[k]:bounds[k+1]]; order and bounds
// reuse the slices passed in. The cost is linear in n: a map of the keys
// and two passes over the rows.
func groupBatches(n, size int, key func(i int) string, order []int32, bounds []int) ([]int32, []int) {
	size = max(size, 1)
	gid := make([]int32, n)
	ids := make(map[string]int32)
	var count []int32 // rows of each group, then its first slot in order
	for i := range n {
		k := key(i)
		id, ok := ids[k]
		if !ok || k == "" {
			id = int32(len(count))
			count = append(count, 0)
			if k != "" {
				ids[k] = id
			}
		}
		gid[i] = id
		count[id]++
	}
	// Batches: whole groups, in group order.
	bounds = append(bounds[:0], 0)
	fill, at := 0, 0
	for _, c := range count {
		if fill > 0 && fill+int(c) > size {
			bounds = append(bounds, at)
			fill = 0
		}
		fill += int(c)
		at += int(c)
	}
	if fill > 0 {
		bounds = append(bounds, at)
	}
	// A stable counting sort of the rows by group.
	start := int32(0)
	for g, c := range count {
		count[g], start = start, start+c
	}
	if cap(order) < n {
		order = make([]int32, n)
	}
	order = order[:n]
	for i, g := range gid {
		order[count[g]] = int32(i)
		count[g]++
	}
	return order, bounds
}

// groupChunk is the rows a Grouper's read-ahead takes: up to groupRows,
// and half the window (rows in flight), so that the next read-ahead is in
// flight while one finishes; a shard that fits in the window whole is one
// read-ahead (all its rows are in flight at once anyway). At most size:
// no grouping across batches.
func groupChunk(groupRows, window, size int, shardRows int64) int {
	room := window / 2
	if shardRows > 0 && shardRows <= int64(window) {
		room = int(shardRows)
	}
	return max(size, min(groupRows, room))
}

// grouped is a flight's rows cut into batches of whole groups (see
// listservice.Grouper); its buffers are kept with the flight for reuse.
type grouped struct {
	order  []int32
	bounds []int
	rows   []listservice.Row
	out    [][]string
}

// processGrouped runs f's rows through the processor in batches of whole
// groups, side by side, and returns the first error. A batch's error
// fails the shard at once (the others see the cancellation).
func (st *streamer) processGrouped(f *flight) error {
	g := &f.grouped
	g.order, g.bounds = groupBatches(len(f.rows), st.size, func(i int) string { return st.group.GroupKey(f.rows[i]) }, g.order, g.bounds)
	g.rows, g.out = g.rows[:0], g.out[:0]
	for _, i := range g.order {
		g.rows = append(g.rows, f.rows[i])
		g.out = append(g.out, f.out[i]) // the same cells: the processor fills f.out
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for k := 1; k < len(g.bounds); k++ {
		lo, hi := g.bounds[k-1], g.bounds[k]
		wg.Go(func() {
			if err := st.proc.ProcessBatch(st.ctx, g.rows[lo:hi:hi], g.out[lo:hi:hi]); err != nil {
				st.fail(err)
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
