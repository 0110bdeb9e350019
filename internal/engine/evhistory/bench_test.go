package evhistory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

const benchTenant = "api/bench"

// benchHistory opens a history on b's backend holding n verdicts and
// returns their mailboxes.
func benchHistory(b *testing.B, mk func(testing.TB) backend, n int) (*History, []string) {
	be := mk(b)
	h, err := Open(context.Background(), be.url, Options{TTLs: DefaultTTLs(), Secret: testSecret})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	boxes := make([]string, n)
	vs := make([]verify.NewVerdict, n)
	for i := range boxes {
		boxes[i] = "user" + strconv.Itoa(i) + "@domain" + strconv.Itoa(i%500) + ".test"
		vs[i] = verify.NewVerdict{Mailbox: boxes[i], Code: verify.CodeDeliverable, CheckedAt: time.Now()}
	}
	if err := h.Record(context.Background(), benchTenant, vs); err != nil {
		b.Fatal(err)
	}
	return h, boxes
}

// A list batch (1,000 rows) looked up at once: one round trip.
func benchLookup(b *testing.B, mk func(testing.TB) backend, batch int) {
	h, boxes := benchHistory(b, mk, 1000)
	ctx := context.Background()
	cpu0 := cputime.Self()
	b.ResetTimer()
	for i := range b.N {
		lo := (i * batch) % len(boxes)
		hi := min(lo+batch, len(boxes))
		if _, err := h.Lookup(ctx, benchTenant, boxes[lo:hi], nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if cpu1 := cputime.Self(); cpu0 > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*batch), "cpu-ns/address")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/address")
}

func benchRecord(b *testing.B, mk func(testing.TB) backend) {
	h, boxes := benchHistory(b, mk, 1000)
	vs := make([]verify.NewVerdict, len(boxes))
	for i, m := range boxes {
		vs[i] = verify.NewVerdict{Mailbox: m, Code: verify.CodeMailboxNotFound}
	}
	ctx := context.Background()
	cpu0 := cputime.Self()
	b.ResetTimer()
	for range b.N {
		if err := h.Record(ctx, benchTenant, vs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if cpu1 := cputime.Self(); cpu0 > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*len(vs)), "cpu-ns/address")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vs)), "ns/address")
}

func BenchmarkLookupRedis1000(b *testing.B)    { benchLookup(b, redisBackend, 1000) }
func BenchmarkLookupRedis1(b *testing.B)       { benchLookup(b, redisBackend, 1) }
func BenchmarkLookupPostgres1000(b *testing.B) { benchLookup(b, pgBackend, 1000) }
func BenchmarkLookupPostgres1(b *testing.B)    { benchLookup(b, pgBackend, 1) }
func BenchmarkLookupBolt1000(b *testing.B)     { benchLookup(b, boltBackend, 1000) }
func BenchmarkRecordRedis1000(b *testing.B)    { benchRecord(b, redisBackend) }
func BenchmarkRecordPostgres1000(b *testing.B) { benchRecord(b, pgBackend) }
func BenchmarkRecordBolt1000(b *testing.B)     { benchRecord(b, boltBackend) }
