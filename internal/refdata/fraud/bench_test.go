package fraud

import (
	"context"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// BenchmarkAssess measures Assess with every dependency in memory: GeoIP
// (a small .mmdb), IP lists, the reference-person fake and MemoryHistory.
// No network. Besides ns/op (wall time) it reports cpu-ns/op, the process
// CPU time (user + system, GC included) per call, which does not grow when
// other processes compete for the cores.
//
//	go test -run '^$' -bench BenchmarkAssess -benchmem -cpu 1 ./internal/refdata/fraud/
func BenchmarkAssess(b *testing.B) {
	ctx := context.Background()

	b.Run("full", func(b *testing.B) {
		geo := buildMMDB(b, []geoNet{{CIDR: "73.0.0.0/8", Country: "US", Lat: 39.7, Lon: -104.9, Org: "Comcast Cable"}})
		people := fakePeople{"ann.lee@gmail.com": {"Ann", "Lee", "123 Main St", "Denver", "80202"}}
		now := t0
		s := New(testConfig(b, nil), Deps{History: NewMemoryHistory(0, 0), GeoIP: geo, People: people, Now: func() time.Time { return now }})
		in := Input{
			Email: "ann.lee@gmail.com", ReferenceID: "order-17", First: "Ann", Last: "Lee", Street: "123 Main Street",
			City: "Denver", State: "CO", Zip: "80202", Country: "US", Phone: "+1 201 555 0123", IP: "73.1.2.3",
			UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
		}
		ev := okResult(in.Email)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			now = now.Add(time.Second)
			s.Assess(ctx, testTenant, in, ev)
		}
	})

	b.Run("email-only", func(b *testing.B) {
		s := New(DefaultConfig(), Deps{History: NewMemoryHistory(0, 0)})
		in := Input{Email: "ann.lee@gmail.com"}
		ev := okResult(in.Email)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			s.Assess(ctx, testTenant, in, ev)
		}
	})

	// evalset: the 3000 rows of the evaluation set in turn (every kind of
	// input, history growing to the set's size).
	b.Run("evalset", func(b *testing.B) {
		cases := loadEvalSet(b)
		evs := make([]verify.Result, len(cases))
		for i, c := range cases {
			evs[i] = c.verifyResult()
		}
		var now time.Time
		s := evalScorer(b, cases, DefaultConfig(), &now)
		b.ReportAllocs()
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			c := &cases[i%len(cases)]
			now = c.At.Add(time.Duration(i/len(cases)) * 24 * time.Hour)
			s.Assess(ctx, testTenant, c.Input, evs[i%len(cases)])
			i++
		}
	})
}

// reportCPU starts measuring process CPU time; the returned func reports it
// per iteration as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cputime.Self()
	return func() {
		if d := cputime.Self() - start; d > 0 && b.N > 0 {
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}
