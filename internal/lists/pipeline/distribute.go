package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// Domain shards (Config.ShardBy = ShardByDomain, for services that are
// listservice.HostSharders; issue 22). Preparation still reads the input
// once: the distributor gets every data row from the scan, picks its shard
// from a hash of its domain (shardOf) and keeps the rows in memory up to
// Config.DistributeMemory. When that is full it writes them as one "run":
// an object holding every shard's rows of the run, shard after shard, in
// row order inside a shard, and beside it an object of their row numbers
// laid out the same way. At the end, the staged input (keys.Staged) is the
// one run itself when there was only one, or else each shard's segments
// of every run concatenated (range reads): the I/O is linear in the list
// and the memory bounded by the setting. A shard is then a contiguous byte
// range of the staged object, as in rows mode, and RunShard reads it the
// same way; its rows' list row numbers come from keys.StagedRows. The
// route (keys.Route: each row's shard, in input order) lets Merge put the
// result rows back in input order.
//
// The shard count is chosen as in rows mode, from the data's size, but
// before the first row is placed: from the object's size, or for a zip
// from the size its header declares (a hint: a lying header only changes
// the count, within MaxShards). A list that gets one shard is left in rows
// mode. Shards are as uneven as the list's domains: one big domain makes
// one big shard, and a shard may even be empty.

// DefaultDistributeMemory is Config.DistributeMemory where none is set.
const DefaultDistributeMemory = 32 << 20

// distRecordOverhead is the memory of a buffered row beside its bytes:
// its end offset, its shard and its place in the sort by shard.
const distRecordOverhead = 8 + 2 + 4

// shardCount is the number of shards for dataBytes, as listfile's plan
// picks it: one per shardBytes, at most maxShards.
func shardCount(dataBytes, shardBytes int64, maxShards int) int {
	if shardBytes <= 0 {
		shardBytes = listfile.DefaultShardBytes
	}
	n := int64(1)
	if dataBytes > shardBytes {
		n = (dataBytes + shardBytes - 1) / shardBytes
	}
	return int(min(n, int64(min(max(maxShards, 1), listfile.MaxShards))))
}

// shardOf is the shard of a row among n: a fixed function of its domain
// key (FNV-1a, then a 64-bit finaliser so the high bits are mixed, then
// Lemire's multiply-shift range reduction), the same in every process;
// rows without a key go round-robin by row number.
func shardOf(key string, row int64, n int) int {
	if key == "" {
		return int(row % int64(n))
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// distRun is one spilled run: data and row-number segment offsets per
// shard (n+1 each).
type distRun struct {
	dataKey, numsKey string
	data, nums       []int64
}

type distributor struct {
	ctx    context.Context
	store  *blobstore.Store
	keys   blobstore.ListKeys
	hs     listservice.HostSharder
	mx     *mxRouter // ShardByMX with a resolver: keys are MX hosts
	col    int
	budget int64
	// size is the input's size (or a zip's declared size), for the count.
	size       int64
	shardBytes int64
	maxShards  int
	n          int // 0 before the first row
	off        bool

	data   []byte   // the run's rows, each with a line terminator
	ends   []int    // end in data of each row
	shards []uint16 // shard of each row
	first  int64    // list row number of the run's first row

	prev     []int64 // per shard: the last row number written (-1: none)
	rows     []int64 // per shard: rows so far
	firstRow []int64 // per shard: its first row (-1: none)
	runs     []distRun
	route    *objWriter
	tmp      [binary.MaxVarintLen64]byte
}

func newDistributor(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, hs listservice.HostSharder, col int, cfg Config) *distributor {
	budget := cfg.DistributeMemory
	if budget <= 0 {
		budget = DefaultDistributeMemory
	}
	return &distributor{ctx: ctx, store: store, keys: keys, hs: hs, col: col, budget: budget, shardBytes: cfg.ShardBytes, maxShards: cfg.MaxShards}
}

// active reports whether the list is sharded by domain (more than one shard).
func (d *distributor) active() bool { return d.n > 1 }

// start picks the shard count when the first data row, at dataStart, comes.
func (d *distributor) start(dataStart int64) error {
	d.n = shardCount(d.size-dataStart, d.shardBytes, d.maxShards)
	if d.n == 1 {
		d.off = true // rows mode: one shard holds every domain anyway
		return nil
	}
	// The buffer is sized once, for the list or the budget, whichever is
	// less, rather than grown by doubling.
	d.data = make([]byte, 0, min(d.budget, max(d.size-dataStart, 0)+d.size/16+4096))
	d.prev, d.rows, d.firstRow = make([]int64, d.n), make([]int64, d.n), make([]int64, d.n)
	for i := range d.prev {
		d.prev[i], d.firstRow[i] = -1, -1
	}
	var err error
	d.route, err = newObjWriter(d.ctx, d.store, d.keys.Route())
	return err
}

// add places data row n, whose email column holds email, and returns its
// shard.
func (d *distributor) add(row int64, rec *listfile.Record, email string) (int, error) {
	if d.n == 0 {
		if err := d.start(rec.Offset); err != nil {
			return 0, err
		}
	}
	if d.off {
		return 0, nil
	}
	key := d.hs.ShardKey(email)
	if d.mx != nil {
		key = d.mx.key(key)
	}
	s := shardOf(key, row, d.n)
	need := int64(len(rec.Raw) + 2 + distRecordOverhead)
	if len(d.ends) > 0 && int64(len(d.data)+distRecordOverhead*len(d.ends))+need > d.budget {
		if err := d.spillRun(); err != nil {
			return 0, err
		}
	}
	if len(d.ends) == 0 {
		d.first = row
	}
	d.data = append(d.data, rec.Raw...)
	// The staged row must read back as the same Raw: a Raw ending in CR
	// (an unterminated last line) keeps it by a CRLF terminator.
	if n := len(rec.Raw); n > 0 && rec.Raw[n-1] == '\r' {
		d.data = append(d.data, '\r')
	}
	d.data = append(d.data, '\n')
	d.ends = append(d.ends, len(d.data))
	d.shards = append(d.shards, uint16(s))
	d.rows[s]++
	if d.firstRow[s] < 0 {
		d.firstRow[s] = row
	}
	d.tmp[0], d.tmp[1] = byte(s), byte(s>>8) // a field: a local array would escape
	return s, d.route.write(d.tmp[:d.routeWidth()])
}

// routeWidth is the bytes a row's shard takes in the route.
func (d *distributor) routeWidth() int {
	if d.n <= 256 {
		return 1
	}
	return 2
}

// spillRun writes the buffered rows as a run in the list's spill folder.
func (d *distributor) spillRun() error {
	id := len(d.runs)
	return d.spill(d.keys.Spill(fmt.Sprintf("dist-%05d", id)), d.keys.Spill(fmt.Sprintf("dist-%05d.rows", id)))
}

// spill writes the buffered rows as a run: the data grouped by shard (a
// counting sort keeps row order inside a shard), then their row numbers.
func (d *distributor) spill(dataKey, numsKey string) error {
	order, starts := d.byShard()
	run := distRun{dataKey: dataKey, numsKey: numsKey, data: make([]int64, d.n+1), nums: make([]int64, d.n+1)}
	d.runs = append(d.runs, run) // listed first, so a failed write is deleted too
	err := d.writeSegments(dataKey, run.data, starts, order, func(w *bufio.Writer, i int32) error {
		start := 0
		if i > 0 {
			start = d.ends[i-1]
		}
		_, err := w.Write(d.data[start:d.ends[i]])
		return err
	})
	if err != nil {
		return err
	}
	err = d.writeSegments(numsKey, run.nums, starts, order, func(w *bufio.Writer, i int32) error {
		row, s := d.first+int64(i), d.shards[i]
		k := binary.PutUvarint(d.tmp[:], uint64(row-d.prev[s]-1))
		d.prev[s] = row
		_, err := w.Write(d.tmp[:k])
		return err
	})
	if err != nil {
		return err
	}
	d.data, d.ends, d.shards = d.data[:0], d.ends[:0], d.shards[:0]
	return nil
}

// byShard returns the buffered rows' indexes grouped by shard, in row
// order inside a shard, and where each shard's group starts (n+1).
func (d *distributor) byShard() ([]int32, []int) {
	starts := make([]int, d.n+1)
	for _, s := range d.shards {
		starts[s+1]++
	}
	for s := 1; s <= d.n; s++ {
		starts[s] += starts[s-1]
	}
	next := append([]int(nil), starts[:d.n]...)
	order := make([]int32, len(d.shards))
	for i, s := range d.shards {
		order[next[s]] = int32(i)
		next[s]++
	}
	return order, starts
}

// writeSegments writes key: for each shard, put(row) for its rows; offs
// gets each shard's segment offsets.
func (d *distributor) writeSegments(key string, offs []int64, starts []int, order []int32, put func(*bufio.Writer, int32) error) error {
	w, err := newObjWriter(d.ctx, d.store, key)
	if err != nil {
		return err
	}
	for s := 0; s < d.n; s++ {
		offs[s] = w.n()
		for _, i := range order[starts[s]:starts[s+1]] {
			if err := put(w.bw, i); err != nil {
				w.abort()
				return fmt.Errorf("write %s: %w", key, err)
			}
		}
	}
	offs[d.n] = w.n()
	return w.close()
}

// finish writes the staged input and its row numbers and returns the
// shards and the routing for the plan. The runs are deleted.
func (d *distributor) finish() ([]listfile.Shard, *Routing, error) {
	defer d.cleanup()
	if err := d.route.close(); err != nil {
		return nil, nil, err
	}
	d.route = nil
	var final distRun
	runs := 0 // spilled runs; none when the rows were regrouped in memory
	if len(d.runs) == 0 {
		if err := d.spill(d.keys.Staged(), d.keys.StagedRows()); err != nil {
			return nil, nil, err
		}
		final, d.runs = d.runs[0], nil // the staged objects are no run to delete
	} else {
		if len(d.ends) > 0 {
			if err := d.spillRun(); err != nil {
				return nil, nil, err
			}
		}
		runs = len(d.runs)
		final = distRun{data: make([]int64, d.n+1), nums: make([]int64, d.n+1)}
		if err := d.concat(d.keys.Staged(), final.data, func(r distRun) []int64 { return r.data }, func(r distRun) string { return r.dataKey }); err != nil {
			return nil, nil, err
		}
		if err := d.concat(d.keys.StagedRows(), final.nums, func(r distRun) []int64 { return r.nums }, func(r distRun) string { return r.numsKey }); err != nil {
			return nil, nil, err
		}
	}
	shards := make([]listfile.Shard, d.n)
	routing := &Routing{RowsKey: d.keys.StagedRows(), Rows: make([]ByteRange, d.n), RouteKey: d.keys.Route(), RouteWidth: d.routeWidth(), Runs: runs}
	for s := range shards {
		shards[s] = listfile.Shard{Index: s, Start: final.data[s], End: final.data[s+1], FirstRow: max(d.firstRow[s], 0), Rows: d.rows[s], FirstLine: 1}
		routing.Rows[s] = ByteRange{Start: final.nums[s], End: final.nums[s+1]}
	}
	return shards, routing, nil
}

// concat writes key as every shard's segments of every run, in order.
func (d *distributor) concat(key string, offs []int64, segs func(distRun) []int64, keyOf func(distRun) string) error {
	w, err := newObjWriter(d.ctx, d.store, key)
	if err != nil {
		return err
	}
	for s := 0; s < d.n; s++ {
		offs[s] = w.n()
		for _, r := range d.runs {
			o := segs(r)
			if o[s+1] == o[s] {
				continue
			}
			if err := d.copyRange(w.bw, keyOf(r), o[s], o[s+1]-o[s]); err != nil {
				w.abort()
				return fmt.Errorf("write %s: %w", key, err)
			}
		}
	}
	offs[d.n] = w.n()
	return w.close()
}

func (d *distributor) copyRange(w io.Writer, key string, off, n int64) error {
	r, err := d.store.NewRangeReader(d.ctx, key, off, n, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	got, err := io.Copy(w, r)
	if err == nil && got != n {
		err = fmt.Errorf("%s: read %d of %d bytes at %d", key, got, n, off)
	}
	return err
}

// cleanup deletes the runs and abandons an unfinished route (best effort:
// a list's leftovers go with its prefix when it is deleted).
func (d *distributor) cleanup() {
	for _, r := range d.runs {
		_ = d.store.Delete(context.WithoutCancel(d.ctx), r.dataKey)
		_ = d.store.Delete(context.WithoutCancel(d.ctx), r.numsKey)
	}
	d.runs = nil
	if d.route != nil {
		d.route.abort()
		d.route = nil
	}
	d.data, d.ends, d.shards = nil, nil, nil
}

// objWriter writes one object through a buffer; abort abandons it.
type objWriter struct {
	key     string
	cancel  context.CancelFunc
	w       io.WriteCloser
	bw      *bufio.Writer
	flushed int64
}

func newObjWriter(ctx context.Context, store *blobstore.Store, key string) (*objWriter, error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := store.NewWriter(wctx, key, &blobWriterOptions)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	ow := &objWriter{key: key, cancel: cancel, w: w}
	ow.bw = bufio.NewWriterSize(writerFunc(func(p []byte) (int, error) {
		n, err := w.Write(p)
		ow.flushed += int64(n)
		return n, err
	}), runBuffer)
	return ow, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// n is the bytes written so far.
func (ow *objWriter) n() int64 { return ow.flushed + int64(ow.bw.Buffered()) }

func (ow *objWriter) write(p []byte) error {
	_, err := ow.bw.Write(p)
	return err
}

func (ow *objWriter) close() error {
	defer ow.cancel()
	if err := ow.bw.Flush(); err != nil {
		ow.abort()
		return fmt.Errorf("write %s: %w", ow.key, err)
	}
	if err := ow.w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", ow.key, err)
	}
	return nil
}

func (ow *objWriter) abort() {
	ow.cancel()
	_ = ow.w.Close()
}

// errShort is a domain shard's side object ending before its rows do.
var errShort = errors.New("ends before the shard's rows do; prepare the list again")
