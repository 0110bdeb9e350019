package controllers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/lists/listid"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
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

// countingWriter counts the counter updates an allocator sends (conflicts
// included).
type countingWriter struct {
	client.Client
	updates atomic.Int64
}

func (c *countingWriter) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.updates.Add(1)
	return c.Client.Update(ctx, o, opts...)
}

// BenchmarkListIDAllocation: the cost of an ID under contention (4
// goroutines on one counter, against envtest's kube-apiserver): Next (a
// list applied with kubectl) against Reserve plus its release (a REST
// list: the API reserves, the controller releases once the status holds
// the ID), the releases batched by a Releaser as the controller does, or
// one update each. updates/id counts the writes sent, conflicts included.
func BenchmarkListIDAllocation(b *testing.B) {
	ctx := context.Background()
	for i, mode := range []string{"next", "reserve+batched-release", "reserve+release-each"} {
		b.Run(mode, func(b *testing.B) {
			w := &countingWriter{Client: k8s}
			a := &listid.Allocator{Reader: k8s, Writer: w, Namespace: nsSystem, Name: fmt.Sprintf("bench-%d-%d", i, b.N)}
			var rel listid.Releaser
			name := func(id int64) string { return fmt.Sprint("l-", id) }
			b.SetParallelism(4 / max(1, runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					var id int64
					switch mode {
					case "next":
						_, err = a.Next(ctx)
					case "reserve+batched-release":
						if id, err = a.Reserve(ctx, name); err == nil {
							err = rel.Release(ctx, a, id, name(id), nil)
						}
					default:
						if id, err = a.Reserve(ctx, name); err == nil {
							err = a.Release(ctx, id, name(id), nil)
						}
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(w.updates.Load())/float64(b.N), "updates/id")
		})
	}
}

// TestObscureListIDs: allocators that obscure (the manager's and the
// API's) hand out nothing until the key Secret exists (they never make it:
// the elected manager does), then, racing on one counter, distinct IDs in
// [2^40, 2^41), all made with that key, that do not count: their order
// says nothing. A key that is not the one the counter's IDs were made with
// is refused, before any ID is handed out.
func TestObscureListIDs(t *testing.T) {
	ctx := context.Background()
	const allocators, each, name, keyName = 3, 10, "obscure-test", "obscure-test-key"
	_, err := (&listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsSystem, Name: name, Obscure: true, KeySecret: keyName}).Next(ctx)
	if !errors.Is(err, listid.ErrKeyMissing) || !strings.Contains(err.Error(), nsSystem+"/"+keyName) {
		t.Fatalf("no key Secret: %v, want ErrKeyMissing naming it", err)
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: name}, &cm); !apierrors.IsNotFound(err) {
		t.Fatalf("an allocation without a key touched the counter: %v %v", cm.Data, err)
	}
	spec, _ := installsecret.Lookup(installsecret.ListIDKey)
	data, err := spec.Make(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: keyName}, Data: data}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	errs := make(chan error, allocators)
	for a := 0; a < allocators; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alloc := &listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsSystem, Name: name, Obscure: true, KeySecret: keyName}
			for i := 0; i < each; i++ {
				id, err := alloc.Next(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen, down := map[int64]bool{}, 0
	for i, id := range ids {
		if id < listid.PermutedBase || id >= 2*listid.PermutedBase || seen[id] {
			t.Errorf("ID %d: outside [2^40, 2^41) or handed out twice", id)
		}
		seen[id] = true
		if i > 0 && id < ids[i-1] {
			down++
		}
	}
	if down == 0 || down == len(ids)-1 {
		t.Errorf("IDs in handing-out order %v: they count", ids)
	}
	var sec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: keyName}, &sec); err != nil {
		t.Fatalf("the key Secret: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: name}, &cm); err != nil || cm.Data["last"] != fmt.Sprint(allocators*each) {
		t.Errorf("counter %v (%v), want last=%d", cm.Data, err, allocators*each)
	}

	// The key replaced (deleted and made again, say): no ID.
	sec.Data["key"] = bytes.Repeat([]byte{1}, 32)
	if err := k8s.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	_, err = (&listid.Allocator{Reader: k8s, Writer: k8s, Namespace: nsSystem, Name: name, Obscure: true, KeySecret: keyName}).Next(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not the key the IDs of counter") {
		t.Errorf("a replaced key: %v, want a refusal", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: name}, &cm); err != nil || cm.Data["last"] != fmt.Sprint(allocators*each) {
		t.Errorf("the refused allocation moved the counter: %v", cm.Data)
	}
}
