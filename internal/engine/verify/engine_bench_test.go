package verify_test

import (
	"context"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
)

var benchAddrs = []string{
	"john.smith@example.com", "sales@acme-corp.com", "Jane.Doe+news@gmail.com", "x@mailinator.com",
	"john@gmial.com", "no-at-sign.example.com", "a@b@example.com", "user@sub.example.co.uk",
	"abuse@example.org", "first.last@company.io", "info@shop.de", "someone@outlook.com",
	"bad..dots@example.com", "ünïcödé@bücher.de", "trailing@example.com.", "ok123@yahoo.co.jp",
}

// BenchmarkOfflineVerify measures the stages that need no network: syntax,
// corrections and lists (the target is at least 1M addresses/s per core).
func BenchmarkOfflineVerify(b *testing.B) {
	e := &verify.Engine{Lists: emaillists.Default, Typos: typo.Default()}
	ctx := context.Background()
	e.Verify(ctx, benchAddrs[0], verify.Options{}) // load the lists outside the timer
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = e.Verify(ctx, benchAddrs[i%len(benchAddrs)], verify.Options{})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "addrs/s")
}

// BenchmarkOfflineVerifyBatch is the list service's path for the same stages.
func BenchmarkOfflineVerifyBatch(b *testing.B) {
	e := &verify.Engine{Lists: emaillists.Default, Typos: typo.Default()}
	ctx := context.Background()
	addrs := make([]string, 512)
	for i := range addrs {
		addrs[i] = benchAddrs[i%len(benchAddrs)]
	}
	res := make([]verify.Result, len(addrs))
	_ = e.VerifyBatch(ctx, addrs, res, verify.Options{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = e.VerifyBatch(ctx, addrs, res, verify.Options{})
	}
	b.ReportMetric(float64(b.N*len(addrs))/b.Elapsed().Seconds(), "addrs/s")
}
