package evhistory

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// The history's TTLs and the bolt store's hourly janitor on the clock of a
// synctest bubble (no injected clock: the history's default one): a
// catch-all verdict (72h) is reused until a second before its TTL and not
// at it, a deliverable one (28 days) still is, and the janitor's sweep at
// that hour deletes the expired entry from the store.
func TestTTLsInSimulatedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h, err := Open(ctx, boltBackend(t).url, Options{TTLs: DefaultTTLs(), Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		// 72 hourly sweeps pass here: without an fsync each (what the
		// disk makes durable is not what this test is about).
		h.store.(*boltStore).db.NoSync = true
		boxes := []string{"carol@catchall.test", "alice@example.test"}
		if err := h.Record(ctx, acme, []verify.NewVerdict{
			{Mailbox: boxes[0], Code: verify.CodeCatchAll, CheckedAt: time.Now()},
			{Mailbox: boxes[1], Code: verify.CodeDeliverable, CheckedAt: time.Now()},
		}); err != nil {
			t.Fatal(err)
		}
		check := func(when string, want []verify.Code, stored int) {
			t.Helper()
			got, err := h.Lookup(ctx, acme, boxes, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				if got[i].Code != w {
					t.Errorf("%s: %s: code %d, want %d", when, boxes[i], got[i].Code, w)
				}
			}
			n := 0
			_ = h.store.(*boltStore).db.View(func(tx *bolt.Tx) error { n = tx.Bucket(boltVerdicts).Stats().KeyN; return nil })
			if n != stored {
				t.Errorf("%s: %d entries in the store, want %d", when, n, stored)
			}
		}
		ttl := DefaultTTLs().CatchAll
		simtime.Advance(ttl - time.Second)
		check("a second before the catch-all TTL", []verify.Code{verify.CodeCatchAll, verify.CodeDeliverable}, 2)
		simtime.Advance(time.Second)
		check("at the catch-all TTL, the janitor's sweep at that hour", []verify.Code{0, verify.CodeDeliverable}, 1)
	})
}
