package controllers_test

import (
	"context"
	"sync"
	"testing"

	"github.com/emaildata/emaildata/internal/listid"
)

// TestListIDsUniqueUnderContention: several allocators (as API replicas and
// the controller would be) racing on one counter never hand out the same
// number, and each one's numbers increase.
func TestListIDsUniqueUnderContention(t *testing.T) {
	ctx := context.Background()
	const allocators, each = 4, 15
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, allocators)
	for a := 0; a < allocators; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alloc := &listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsSystem, Name: "contention-test"}
			var last int64
			for i := 0; i < each; i++ {
				id, err := alloc.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				if id <= last {
					t.Errorf("id %d after %d: not increasing", id, last)
				}
				last = id
				mu.Lock()
				if seen[id] {
					t.Errorf("id %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != allocators*each {
		t.Fatalf("%d ids, want %d", len(seen), allocators*each)
	}
	for id := int64(1); id <= allocators*each; id++ {
		if !seen[id] {
			t.Errorf("id %d skipped: ids should be dense", id)
		}
	}
}
