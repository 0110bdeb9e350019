package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// domainSide is what a shard of a list sharded by domain reads and writes
// beside its rows: the list row numbers of its rows (from the plan's
// Routing, since its rows are not a contiguous run of the list) and the
// byte length of each row it writes (keys.PartLengths), by which Merge
// cuts the part into rows: a row may hold quoted newlines, so lines would
// not do.
type domainSide struct {
	index   int
	nums    io.ReadCloser
	br      *bufio.Reader
	prev    int64
	left    int64
	lengths *objWriter
	tmp     [binary.MaxVarintLen64]byte
}

func openDomainSide(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, index int) (*domainSide, error) {
	rg := plan.Routing.Rows[index]
	nums, err := store.NewRangeReader(ctx, plan.Routing.RowsKey, rg.Start, rg.End-rg.Start, nil)
	if err != nil {
		return nil, fmt.Errorf("open row numbers of shard %d: %w", index, err)
	}
	lengths, err := newObjWriter(ctx, store, keys.PartLengths(index))
	if err != nil {
		nums.Close()
		return nil, err
	}
	return &domainSide{index: index, nums: nums, br: bufio.NewReaderSize(nums, 16<<10), prev: -1, left: plan.Shards[index].Rows, lengths: lengths}, nil
}

// number sets the list row numbers of the next rows.
func (d *domainSide) number(rows []listservice.Row) error {
	for i := range rows {
		gap, err := binary.ReadUvarint(d.br)
		if err != nil || d.left == 0 {
			return fmt.Errorf("row numbers of shard %d: %w", d.index, errShort)
		}
		d.left--
		d.prev += int64(gap) + 1
		rows[i].Number = d.prev
	}
	return nil
}

// length records the byte length of the row just written.
func (d *domainSide) length(n int64) error {
	k := binary.PutUvarint(d.tmp[:], uint64(n))
	return d.lengths.write(d.tmp[:k])
}

// finish checks that every row number was used and stores the lengths.
func (d *domainSide) finish() error {
	if _, err := d.br.ReadByte(); err != io.EOF || d.left != 0 {
		return fmt.Errorf("row numbers of shard %d do not match its rows (%d unused); prepare the list again", d.index, d.left)
	}
	err := d.lengths.close()
	d.lengths = nil
	return err
}

// abort closes the row numbers and abandons unfinished lengths.
func (d *domainSide) abort() {
	d.nums.Close()
	if d.lengths != nil {
		d.lengths.abort()
	}
}
