package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// routedMergeMemory bounds the read buffers of a domain merge, which has
// every part open at once: each part gets a share, within
// [minPartBuffer, runBuffer].
const (
	routedMergeMemory = 16 << 20
	minPartBuffer     = 4 << 10
	lengthsBuffer     = 4 << 10
)

// routedPart is one shard's part and row lengths, read row by row.
type routedPart struct {
	index         int
	part, lengths io.ReadCloser
	pr, lr        *bufio.Reader
}

// writeRouted writes the rows of a plan sharded by domain in input order:
// the route names each row's shard, whose lengths object gives the row's
// byte length in its part. Memory is the buffers, whatever the list.
func writeRouted(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, w io.Writer, part func(int) error) (err error) {
	for i := range plan.Shards {
		if err := part(i); err != nil {
			return err
		}
	}
	parts := make([]*routedPart, len(plan.Shards))
	defer func() {
		for _, p := range parts {
			if p != nil {
				p.close()
			}
		}
	}()
	size := min(max(routedMergeMemory/len(parts), minPartBuffer), runBuffer)
	for i := range parts {
		if parts[i], err = openRoutedPart(ctx, store, keys, i, size); err != nil {
			return err
		}
	}
	route, err := store.NewReader(ctx, plan.Routing.RouteKey, nil)
	if err != nil {
		return fmt.Errorf("open route: %w", err)
	}
	defer route.Close()
	rr := bufio.NewReaderSize(route, runBuffer)
	bw := bufio.NewWriterSize(w, 256<<10)
	var rows int64
	for ; ; rows++ {
		if rows&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		s, err := readShard(rr, plan.Routing.RouteWidth)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read route: %w", err)
		}
		if s >= len(parts) {
			return fmt.Errorf("route row %d names shard %d of %d", rows, s, len(parts))
		}
		if err := parts[s].copyRow(bw); err != nil {
			return err
		}
	}
	if rows != plan.Records {
		return fmt.Errorf("the route holds %d rows, the plan %d", rows, plan.Records)
	}
	for _, p := range parts {
		if err := p.done(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func openRoutedPart(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, i, size int) (*routedPart, error) {
	part, err := store.NewReader(ctx, keys.Part(i), nil)
	if err != nil {
		return nil, fmt.Errorf("open part %d: %w", i, err)
	}
	lengths, err := store.NewReader(ctx, keys.PartLengths(i), nil)
	if err != nil {
		part.Close()
		return nil, fmt.Errorf("open row lengths of part %d: %w", i, err)
	}
	return &routedPart{index: i, part: part, lengths: lengths, pr: bufio.NewReaderSize(part, size), lr: bufio.NewReaderSize(lengths, lengthsBuffer)}, nil
}

func readShard(r *bufio.Reader, width int) (int, error) {
	b, err := r.ReadByte()
	if err != nil || width == 1 {
		return int(b), err
	}
	hi, err := r.ReadByte()
	if err != nil {
		return 0, io.ErrUnexpectedEOF
	}
	return int(b) | int(hi)<<8, nil
}

// copyRow copies the part's next row to w, through the part's buffer.
func (p *routedPart) copyRow(w io.Writer) error {
	n, err := binary.ReadUvarint(p.lr)
	if err != nil {
		return fmt.Errorf("row lengths of part %d: %w", p.index, errShort)
	}
	for rem := int(n); rem > 0; {
		b, err := p.pr.Peek(min(rem, p.pr.Size()))
		if len(b) == 0 && err != nil {
			if err == io.EOF {
				err = errShort
			}
			return fmt.Errorf("part %d: %w", p.index, err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		_, _ = p.pr.Discard(len(b))
		rem -= len(b)
	}
	return nil
}

// done checks that the part and its lengths were read to their ends.
func (p *routedPart) done() error {
	_, e1 := p.pr.ReadByte()
	_, e2 := p.lr.ReadByte()
	if !errors.Is(e1, io.EOF) || !errors.Is(e2, io.EOF) {
		return fmt.Errorf("part %d holds more rows than its route; prepare the list again", p.index)
	}
	return nil
}

func (p *routedPart) close() {
	p.part.Close()
	p.lengths.Close()
}
