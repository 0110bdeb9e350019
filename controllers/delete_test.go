package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/listservice/listservicetest"
)

// heldService is the suite's email_intelligence: DomainService, except that
// a batch holding an address @hold.test blocks until its shard is stopped,
// so tests can delete a list whose shards are running.
type heldService struct{ listservicetest.DomainService }

// heldShards counts shards that started processing held rows, heldStopped
// those that were stopped.
var heldShards, heldStopped atomic.Int64

func (s heldService) NewProcessor(ctx context.Context, in listservice.Input) (listservice.Processor, error) {
	p, err := s.DomainService.NewProcessor(ctx, in)
	return heldProc{p}, err
}

type heldProc struct{ listservice.Processor }

func (p heldProc) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	for _, r := range rows {
		if strings.HasSuffix(r.Field(0), "@hold.test") {
			heldShards.Add(1)
			<-ctx.Done()
			heldStopped.Add(1)
			return ctx.Err()
		}
	}
	return p.Processor.ProcessBatch(ctx, rows, out)
}

// heldList creates a list of 8 shards (the suite plans 256-byte shards)
// whose every row blocks, and its ConfigMap.
func heldList(t *testing.T, ns, name string) *listsv1.EmailList {
	var b strings.Builder
	for i := 0; b.Len() < 8*256; i++ {
		fmt.Fprintf(&b, "someone-%04d@hold.test\n", i)
	}
	createConfigMap(t, ns, name, "list.csv", b.String())
	l := builders.MakeEmailList(ns, name).Service(listsv1.ServiceEmailIntelligence).ConfigMap(name, "list.csv").Obj()
	create(t, l)
	return l
}

// TestDeleteStopsLocalShards: deleting a list whose shards run (4 at once
// locally) and wait (the other 4) stops them before the prefix is removed:
// the pending shards never start and no shard writes into the deleted
// prefix.
func TestDeleteStopsLocalShards(t *testing.T) {
	name := uniqueName("held")
	before, stoppedBefore := heldShards.Load(), heldStopped.Load()
	l := heldList(t, nsLocal, name)
	l = waitPhase(t, nsLocal, name, listsv1.PhaseProcessing)
	if l.Status.Shards != 8 {
		t.Fatalf("%d shards, want 8", l.Status.Shards)
	}
	eventually(t, 10*time.Second, "4 running shards", func() (bool, string) {
		n := heldShards.Load() - before
		return n == 4, fmt.Sprint(n)
	})
	deleteAndWait(t, l)
	if n := heldStopped.Load() - stoppedBefore; n != 4 {
		t.Errorf("%d running shards were stopped by the time the list was gone, want 4", n)
	}
	prefix := blobstore.ListKeys{UID: string(l.UID)}.Prefix()
	time.Sleep(500 * time.Millisecond) // a late writer would show now
	if keys := objectsUnder(t, prefix); len(keys) != 0 {
		t.Fatalf("the deleted list's prefix holds %d objects: %v", len(keys), keys)
	}
	if n := heldShards.Load() - before; n != 4 {
		t.Errorf("%d shards ran, want the 4 that were running: pending shards started after deletion", n)
	}
}
