package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// maxFanIn bounds the sorted runs merged at once, and so the read buffers
// a merge holds (maxFanIn × runBuffer); more runs are merged in rounds.
const maxFanIn = 64

// runBuffer is the read and write buffer of one sorted run.
const runBuffer = 64 << 10

// codec stores values of T as fixed-size records.
type codec[T any] struct {
	size int
	put  func([]byte, T)
	get  func([]byte) T
	cmp  func(a, b T) int
	// sort sorts a buffer by cmp (slices.SortFunc when nil).
	sort func([]T)
}

func (c codec[T]) sortBuf(buf []T) {
	if c.sort != nil {
		c.sort(buf)
		return
	}
	slices.SortFunc(buf, c.cmp)
}

// extSorter sorts more values than fit in memory: it keeps up to max
// values, and when full sorts them into a run in the store; each then
// yields every value in order, merging the runs. Memory stays about
// max×sizeof(T) plus the merge's buffers, whatever the number of values.
type extSorter[T any] struct {
	ctx    context.Context
	store  *blobstore.Store
	prefix string // spill keys: prefix + run number
	c      codec[T]
	buf    []T
	max    int
	runs   []string
	nextID int
}

func newExtSorter[T any](ctx context.Context, store *blobstore.Store, prefix string, c codec[T], memBytes int64) *extSorter[T] {
	max := int(max(memBytes/int64(c.size), 64))
	return &extSorter[T]{ctx: ctx, store: store, prefix: prefix, c: c, max: max}
}

// add collects v, spilling a sorted run when memory is full.
func (s *extSorter[T]) add(v T) error {
	if len(s.buf) == s.max {
		if err := s.spill(); err != nil {
			return err
		}
	}
	if s.buf == nil {
		s.buf = make([]T, 0, min(s.max, 1<<16))
	}
	s.buf = append(s.buf, v)
	return nil
}

func (s *extSorter[T]) spill() error {
	s.c.sortBuf(s.buf)
	err := s.writeRun(func(put func(T) error) error {
		for _, v := range s.buf {
			if err := put(v); err != nil {
				return err
			}
		}
		return nil
	})
	s.buf = s.buf[:0]
	return err
}

// writeRun stores the values produced by fill as a new run.
func (s *extSorter[T]) writeRun(fill func(put func(T) error) error) error {
	key := fmt.Sprintf("%s%05d", s.prefix, s.nextID)
	s.nextID++
	wctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	w, err := s.store.NewWriter(wctx, key, &blobWriterOptions)
	if err != nil {
		return fmt.Errorf("create %s: %w", key, err)
	}
	bw := bufio.NewWriterSize(w, runBuffer)
	rec := make([]byte, s.c.size)
	err = fill(func(v T) error {
		s.c.put(rec, v)
		_, err := bw.Write(rec)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	s.runs = append(s.runs, key)
	return nil
}

// each calls fn with every value added, in order, then forgets them and
// deletes the runs.
func (s *extSorter[T]) each(fn func(T) error) error {
	defer s.cleanup()
	if len(s.runs) == 0 {
		s.c.sortBuf(s.buf)
		for _, v := range s.buf {
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf = nil // the merge needs no more than its buffers
	for len(s.runs) > maxFanIn {
		group := s.runs[:maxFanIn]
		rest := slices.Clone(s.runs[maxFanIn:])
		s.runs = nil
		if err := s.writeRun(func(put func(T) error) error { return s.merge(group, put) }); err != nil {
			return err
		}
		s.deleteRuns(group)
		s.runs = append(rest, s.runs...)
	}
	return s.merge(s.runs, fn)
}

// cleanup drops the values and deletes the runs (best effort: a list's
// leftovers go with its prefix when it is deleted).
func (s *extSorter[T]) cleanup() {
	s.buf = nil
	s.deleteRuns(s.runs)
	s.runs = nil
}

func (s *extSorter[T]) deleteRuns(keys []string) {
	for _, k := range keys {
		_ = s.store.Delete(context.WithoutCancel(s.ctx), k)
	}
}

// runReader yields the values of one run in order.
type runReader[T any] struct {
	r   io.ReadCloser
	br  *bufio.Reader
	rec []byte
	cur T
	src int
}

func (rr *runReader[T]) next(c codec[T]) (bool, error) {
	if _, err := io.ReadFull(rr.br, rr.rec); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, fmt.Errorf("read sorted run: %w", err)
	}
	rr.cur = c.get(rr.rec)
	return true, nil
}

// merge calls fn with the values of the runs in order: a k-way merge over
// a binary heap of the runs' heads (ties go to the earlier run, which
// keeps the order stable).
func (s *extSorter[T]) merge(keys []string, fn func(T) error) (err error) {
	var h []*runReader[T]
	defer func() {
		for _, rr := range h {
			rr.r.Close()
		}
	}()
	for i, k := range keys {
		r, err := s.store.NewReader(s.ctx, k, nil)
		if err != nil {
			return fmt.Errorf("open %s: %w", k, err)
		}
		rr := &runReader[T]{r: r, br: bufio.NewReaderSize(r, runBuffer), rec: make([]byte, s.c.size), src: i}
		ok, err := rr.next(s.c)
		if err != nil || !ok {
			r.Close()
			if err != nil {
				return err
			}
			continue
		}
		h = append(h, rr)
	}
	less := func(a, b *runReader[T]) bool {
		if c := s.c.cmp(a.cur, b.cur); c != 0 {
			return c < 0
		}
		return a.src < b.src
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, less)
	}
	for n := 0; len(h) > 0; n++ {
		if n&0xffff == 0 && s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		top := h[0]
		if err := fn(top.cur); err != nil {
			return err
		}
		ok, err := top.next(s.c)
		if err != nil {
			return err
		}
		if !ok {
			top.r.Close()
			last := len(h) - 1
			h[0] = h[last]
			h = h[:last]
		}
		siftDown(h, 0, less)
	}
	return nil
}

func siftDown[E any](h []E, i int, less func(a, b E) bool) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			m = r
		}
		if !less(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
