package pipeline

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"unsafe"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// Duplicates are found once per list, at preparation, by sorting instead
// of remembering: every row with a key (listservice.Deduper) becomes a
// 128-bit fingerprint of its key plus its row number; sorted by
// fingerprint, the rows of one key sit together, the smallest is the first
// occurrence and the others are repeats. The repeats' row numbers,
// sorted again, are cut at shard boundaries into one small object per
// shard, which the shard streams beside its rows. Both sorts spill sorted
// runs to the store when they outgrow their half of Config.DedupMemory
// (24 bytes a fingerprint, 8 a repeat), so the work is
// linear in the list (plus a log factor for the merge) and the memory is
// bounded by the setting, not by the list.
//
// Fingerprints are two 64-bit maphash values under random seeds drawn for
// each preparation: two different keys get the same fingerprint with a
// chance of about n²/2¹²⁹ (below 10⁻²⁰ at a billion rows), and the seeds
// are unknown to whoever wrote the list, so no list can be built to collide.

// fingerprint is a key's 128-bit digest and the row it came from.
type fingerprint struct {
	hi, lo uint64
	row    int64
}

var fingerprintCodec = codec[fingerprint]{
	size: 24,
	put: func(b []byte, f fingerprint) {
		binary.LittleEndian.PutUint64(b, f.hi)
		binary.LittleEndian.PutUint64(b[8:], f.lo)
		binary.LittleEndian.PutUint64(b[16:], uint64(f.row))
	},
	get: func(b []byte) fingerprint {
		return fingerprint{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), int64(binary.LittleEndian.Uint64(b[16:]))}
	},
	// Rows of one fingerprint come in any order (repeatFinder.finish keeps
	// the smallest), so the sort needs no tie-break on the row.
	cmp:  cmpFingerprint,
	sort: sortFingerprints,
}

func cmpFingerprint(a, b fingerprint) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

var rowCodec = codec[int64]{
	size: 8,
	put:  func(b []byte, r int64) { binary.LittleEndian.PutUint64(b, uint64(r)) },
	get:  func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) },
	cmp:  cmp.Compare[int64],
	sort: slices.Sort[[]int64],
}

// sortFingerprints sorts by (hi, lo). The digests are uniformly random, so
// in-place radix passes on the top bytes of hi (American flag sort, 256
// buckets a pass, which keeps the write positions in cache) leave small
// buckets that an insertion sort finishes: faster than a comparison sort
// of the 24-byte values.
func sortFingerprints(a []fingerprint) { radixSort(a, 56) }

func radixSort(a []fingerprint, shift uint) {
	if len(a) <= 32 {
		insertionSort(a)
		return
	}
	var next, end [256]int
	for _, f := range a {
		end[byte(f.hi>>shift)]++
	}
	sum := 0
	for b, c := range end {
		next[b] = sum
		sum += c
		end[b] = sum
	}
	for b := range next {
		for next[b] < end[b] {
			v := a[next[b]]
			for d := byte(v.hi >> shift); int(d) != b; d = byte(v.hi >> shift) {
				v, a[next[d]] = a[next[d]], v
				next[d]++
			}
			a[next[b]] = v
			next[b]++
		}
	}
	start := 0
	for _, e := range end {
		if shift == 0 {
			insertionSort(a[start:e])
		} else {
			radixSort(a[start:e], shift-8)
		}
		start = e
	}
}

func insertionSort(a []fingerprint) {
	if len(a) > 32 { // the last byte of hi: equal his, sort on lo
		slices.SortFunc(a, cmpFingerprint)
		return
	}
	for i := 1; i < len(a); i++ {
		v := a[i]
		j := i
		for ; j > 0 && (a[j-1].hi > v.hi || a[j-1].hi == v.hi && a[j-1].lo > v.lo); j-- {
			a[j] = a[j-1]
		}
		a[j] = v
	}
}

// repeatFinder finds the rows that repeat an earlier row's key: row gets
// every data row in order (from the scan of preparation, so the input is
// read once), finish writes the repeats per shard (keys.Repeats) and
// returns how many each shard has. Half of the memory goes to each sort.
type repeatFinder struct {
	ctx          context.Context
	store        *blobstore.Store
	keys         blobstore.ListKeys
	dd           listservice.Deduper
	col          int
	mem          int64
	seed1, seed2 maphash.Seed
	fps          *extSorter[fingerprint]
}

func newRepeatFinder(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, dd listservice.Deduper, col int, mem int64) *repeatFinder {
	return &repeatFinder{
		ctx: ctx, store: store, keys: keys, dd: dd, col: col, mem: mem,
		seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(),
		fps: newExtSorter(ctx, store, keys.Spill("fp-"), fingerprintCodec, mem/2),
	}
}

// shardShift places a row's domain shard (below listfile.MaxShards, 1<<16) above its
// row number in the values sorted here: fingerprints carry it to the
// repeats, and repeats sorted by value come shard by shard, in row order
// inside a shard, so that writeRepeats writes one shard's object at a
// time. In rows mode the shard is always 0 and the value is the row.
// 47 bits: shard 65535 still leaves the value positive, so that values
// sort by shard, and rows up to 1.4×10¹⁴ fit.
const (
	shardShift = 47
	rowMask    = 1<<shardShift - 1
)

// row takes data row n (0-based) of the list, which goes to shard (0
// unless sharded by domain).
func (f *repeatFinder) row(n int64, shard int, rec *listfile.Record) error {
	// A view of the record's bytes, not a copy: DedupKey keeps nothing
	// (listservice.Deduper) and rowEmail hashes the key before the record
	// is reused. The copy was a fifth of the duplicate search's CPU.
	b := rec.FieldBytes(f.col)
	return f.rowEmail(n, shard, unsafe.String(unsafe.SliceData(b), len(b)))
}

// rowEmail is row with the email column's value already taken out.
func (f *repeatFinder) rowEmail(n int64, shard int, email string) error {
	if n&0xffff == 0 && f.ctx.Err() != nil {
		return f.ctx.Err()
	}
	key := f.dd.DedupKey(email)
	if key == "" {
		return nil
	}
	return f.fps.add(fingerprint{maphash.String(f.seed1, key), maphash.String(f.seed2, key), n | int64(shard)<<shardShift})
}

// cleanup deletes whatever spilled, if finish did not run to its end.
func (f *repeatFinder) cleanup() { f.fps.cleanup() }

func (f *repeatFinder) finish(plan *Plan) ([]int64, error) {
	repeats := newExtSorter(f.ctx, f.store, f.keys.Spill("rep-"), rowCodec, f.mem/2)
	defer repeats.cleanup()
	// In each run of equal fingerprints the smallest row is the first
	// occurrence and every other row a repeat.
	var cur fingerprint // the group's fingerprint and smallest row so far
	first := true
	err := f.fps.each(func(fp fingerprint) error {
		if first || fp.hi != cur.hi || fp.lo != cur.lo {
			cur, first = fp, false
			return nil
		}
		r := fp.row
		if r&rowMask < cur.row&rowMask {
			r, cur.row = cur.row, r
		}
		return repeats.add(r)
	})
	if err != nil {
		return nil, err
	}
	return writeRepeats(f.ctx, f.store, f.keys, plan, repeats)
}

// writeRepeats cuts the sorted repeat rows at shard boundaries (by the
// shard carried in the value when sharded by domain): shard i's object
// holds its repeats as uvarint gaps (from the shard's first row, then
// from the previous repeat). Shards without repeats get no object.
func writeRepeats(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, repeats *extSorter[int64]) ([]int64, error) {
	counts := make([]int64, len(plan.Shards))
	var w *repeatWriter
	shard := 0
	err := repeats.each(func(v int64) error {
		row := v & rowMask
		if plan.ByDomain() {
			shard = int(v >> shardShift)
		}
		for shard < len(plan.Shards) && !plan.ByDomain() && row >= plan.Shards[shard].FirstRow+plan.Shards[shard].Rows {
			shard++
		}
		if shard >= len(plan.Shards) || row >= plan.Records {
			return fmt.Errorf("repeat row %d is beyond the plan's %d rows", row, plan.Records)
		}
		if w != nil && w.shard != shard {
			if err := w.close(); err != nil {
				return err
			}
			w = nil
		}
		if w == nil {
			var err error
			if w, err = newRepeatWriter(ctx, store, keys, shard, plan.Shards[shard].FirstRow); err != nil {
				return err
			}
		}
		counts[shard]++
		return w.add(row)
	})
	if w != nil {
		err = errors.Join(err, w.close())
	}
	if err != nil {
		return nil, err
	}
	return counts, nil
}

type repeatWriter struct {
	shard  int
	prev   int64
	cancel context.CancelFunc
	w      io.WriteCloser
	bw     *bufio.Writer
	tmp    [binary.MaxVarintLen64]byte
}

func newRepeatWriter(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, shard int, firstRow int64) (*repeatWriter, error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := store.NewWriter(wctx, keys.Repeats(shard), &blobWriterOptions)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create %s: %w", keys.Repeats(shard), err)
	}
	return &repeatWriter{shard: shard, prev: firstRow, cancel: cancel, w: w, bw: bufio.NewWriterSize(w, 32<<10)}, nil
}

func (rw *repeatWriter) add(row int64) error {
	n := binary.PutUvarint(rw.tmp[:], uint64(row-rw.prev))
	rw.prev = row
	_, err := rw.bw.Write(rw.tmp[:n])
	return err
}

func (rw *repeatWriter) close() error {
	defer rw.cancel()
	if err := rw.bw.Flush(); err != nil {
		rw.cancel()
		_ = rw.w.Close()
		return fmt.Errorf("write repeats of shard %d: %w", rw.shard, err)
	}
	if err := rw.w.Close(); err != nil {
		return fmt.Errorf("write repeats of shard %d: %w", rw.shard, err)
	}
	return nil
}

// repeatCursor streams one shard's repeat rows, in order.
type repeatCursor struct {
	r     io.ReadCloser
	br    *bufio.Reader
	next  int64 // the next repeat row, or -1 when none is left
	left  int64 // repeats not yet read from the object
	total int64
}

// openRepeats opens shard index's repeats; count is what the plan says it has.
func openRepeats(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, index int, shard listfile.Shard, count int64) (*repeatCursor, error) {
	c := &repeatCursor{next: -1, left: count, total: count}
	if count == 0 {
		return c, nil
	}
	r, err := store.NewReader(ctx, keys.Repeats(index), nil)
	if err != nil {
		return nil, fmt.Errorf("open repeats of shard %d: %w", index, err)
	}
	c.r, c.br, c.next = r, bufio.NewReaderSize(r, 16<<10), shard.FirstRow
	if err := c.advance(true); err != nil {
		r.Close()
		return nil, err
	}
	return c, nil
}

// advance reads the next repeat row.
func (c *repeatCursor) advance(first bool) error {
	if c.left == 0 {
		c.next = -1
		return nil
	}
	gap, err := binary.ReadUvarint(c.br)
	if err != nil {
		return fmt.Errorf("read shard repeats: %d of %d read: %w", c.total-c.left, c.total, err)
	}
	if gap == 0 && !first {
		return errors.New("read shard repeats: rows out of order")
	}
	c.next += int64(gap)
	c.left--
	return nil
}

// mark sets Repeat on the rows that repeat; rows come in order.
func (c *repeatCursor) mark(rows []listservice.Row) error {
	for i := range rows {
		if rows[i].Number == c.next {
			rows[i].Repeat = true
			if err := c.advance(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish checks that every repeat matched a row, and that the object
// held no more than the plan counted.
func (c *repeatCursor) finish() error {
	if c.next >= 0 {
		return fmt.Errorf("the shard's repeats name row %d, which it never read; the input changed after it was prepared", c.next+1)
	}
	if c.br != nil {
		if _, err := c.br.ReadByte(); err != io.EOF {
			return fmt.Errorf("the shard's repeats hold more than the %d rows the plan counted, which it never read; prepare the list again", c.total)
		}
	}
	return nil
}

func (c *repeatCursor) Close() error {
	if c.r == nil {
		return nil
	}
	return c.r.Close()
}
