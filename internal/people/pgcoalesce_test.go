package people

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCoalescer: concurrent small lookups are merged while the worker is
// busy, each caller gets exactly its own keys' records, errors reach every
// caller of the batch, and a caller whose context ends stops waiting.
func TestCoalescer(t *testing.T) {
	var calls, maxKeys atomic.Int64
	release := make(chan struct{})
	c := newCoalescer(1, func(_ context.Context, keys []Key, out []*Record) error {
		if calls.Add(1) == 1 {
			<-release // hold the first batch so the others queue
		}
		maxKeys.Store(max(maxKeys.Load(), int64(len(keys))))
		for i, k := range keys {
			if k.Value == "fail" {
				return errors.New("boom")
			}
			out[i] = &Record{Email: k.Value}
		}
		return nil
	})
	defer c.Close()
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			keys := []Key{EmailKey(fmt.Sprintf("a%d@example.com", i)), EmailKey(fmt.Sprintf("b%d@example.com", i))}
			recs, err := c.Lookup(context.Background(), keys)
			if err != nil || len(recs) != 2 || recs[0].Email != keys[0].Value || recs[1].Email != keys[1].Value {
				errs <- fmt.Errorf("caller %d: %v, %v", i, recs, err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // let the callers queue behind the first batch
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := calls.Load(); got >= n || maxKeys.Load() < 4 {
		t.Errorf("%d round trips for %d callers (largest batch %d keys): not merged", got, n, maxKeys.Load())
	}

	// An error reaches the callers of its batch.
	if _, err := c.Lookup(context.Background(), []Key{EmailKey("fail")}); err == nil {
		t.Error("no error from a failing batch")
	}
	// A cancelled caller stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Lookup(ctx, []Key{EmailKey("x@example.com")}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled lookup: %v", err)
	}
}

// TestPostgresConcurrentSmallLookups: many concurrent one-key lookups (the
// shape of GET /v5/td) through the coalescer find each caller its person.
func TestPostgresConcurrentSmallLookups(t *testing.T) {
	s := openURL(t, pgTestURL(t))
	recs := GenerateSlice(5, 400)
	if err := s.Upsert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(recs))
	for i, r := range recs {
		wg.Go(func() {
			key := EmailKey(r.Email)
			switch i % 3 {
			case 1:
				key = MD5Key(EmailMD5(r.Email))
			case 2:
				key = SHA1Key(EmailSHA1(r.Email))
			}
			got, err := s.LookupBatch(context.Background(), []Key{key, EmailKey("nobody@example.com")})
			if err != nil || got[0] == nil || got[0].Email != r.Email || got[1] != nil {
				errs <- fmt.Errorf("%s: %v %v", key.Kind, got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
