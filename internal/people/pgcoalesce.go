package people

import (
	"context"
	"errors"
	"sync"
	"time"
)

var errStoreClosed = errors.New("people: store closed")

// Small PostgreSQL lookups (a single GET /v5/td is one key) are coalesced:
// concurrent LookupBatch calls of few keys queue, and each of a few workers
// (as many as the pool has connections) takes every call queued at that
// moment and sends their keys as one lookupRange, one round trip. Nothing
// waits on purpose: a call alone goes out at once; calls pile up only while
// the workers are busy, which is exactly when merging them saves the
// server work. Each caller gets its own keys' records; a caller whose
// context ends stops waiting (the batch goes on for the others).

// pgCoalesceMax: calls of more keys than this go straight to the server,
// and a merged batch stops growing past it.
const pgCoalesceMax = 256

// pgCoalesceTimeout bounds one merged round trip (no caller's context
// governs it).
const pgCoalesceTimeout = 30 * time.Second

type lookupCall struct {
	keys []Key
	out  []*Record
	err  error
	done chan struct{}
}

type coalescer struct {
	lookup func(ctx context.Context, keys []Key, out []*Record) error
	calls  chan *lookupCall
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newCoalescer(workers int, lookup func(ctx context.Context, keys []Key, out []*Record) error) *coalescer {
	c := &coalescer{lookup: lookup, calls: make(chan *lookupCall), stop: make(chan struct{})}
	for range max(1, workers) {
		c.wg.Go(c.work)
	}
	return c
}

// Lookup queues keys for the next merged round trip and waits for their
// records.
func (c *coalescer) Lookup(ctx context.Context, keys []Key) ([]*Record, error) {
	call := &lookupCall{keys: keys, done: make(chan struct{})}
	select {
	case c.calls <- call:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stop:
		return nil, errStoreClosed
	}
	select {
	case <-call.done:
		return call.out, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *coalescer) work() {
	var batch []*lookupCall
	var keys []Key
	for {
		select {
		case first := <-c.calls:
			batch, keys = append(batch[:0], first), append(keys[:0], first.keys...)
		case <-c.stop:
			return
		}
	gather:
		for len(keys) < pgCoalesceMax {
			select {
			case call := <-c.calls:
				batch = append(batch, call)
				keys = append(keys, call.keys...)
			default:
				break gather
			}
		}
		out := make([]*Record, len(keys))
		ctx, cancel := context.WithTimeout(context.Background(), pgCoalesceTimeout)
		err := c.lookup(ctx, keys, out)
		cancel()
		off := 0
		for _, call := range batch {
			if err == nil {
				call.out = out[off : off+len(call.keys) : off+len(call.keys)]
			}
			call.err = err
			off += len(call.keys)
			close(call.done)
		}
		clear(batch) // drop the references until the next batch
	}
}

// Close stops the workers; calls in flight finish first.
func (c *coalescer) Close() {
	close(c.stop)
	c.wg.Wait()
}
