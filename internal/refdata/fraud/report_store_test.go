package fraud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/kits/testkit/redistest"
)

// storeFile stores reports as one feedback file of tenant and commits it.
func storeFile(t *testing.T, h History, tenant, id string, received time.Time, quota int64, reports ...Report) error {
	t.Helper()
	ctx := context.Background()
	b, err := h.BeginReports(ctx, tenant, id, received, quota)
	if err != nil {
		return err
	}
	if err := b.Add(ctx, reports); err != nil {
		_ = b.Abort(ctx)
		return err
	}
	if err := b.Commit(ctx); err != nil {
		_ = b.Abort(ctx)
		return err
	}
	return nil
}

func rep(line int, email, ip, phone string, day time.Time) Report {
	return Report{Keys: Keys{Email: email, IP: ip, Phone: phone}, Type: "chargeback", At: reportDay(day), Line: line, ReferenceID: fmt.Sprint("case-", line)}
}

// reportContract checks a ReportStore: tenant-scoped summaries, the
// horizon, all-or-nothing files, the quota, listing and withdrawal, each
// for its tenant only.
func reportContract(t *testing.T, h History) {
	ctx := context.Background()
	now := t0
	day := func(d int) time.Time { return reportDay(now.AddDate(0, 0, -d)) }
	const quota = 1000
	stats := func(tenant string, k Keys, since time.Time) Stats {
		t.Helper()
		st, err := h.Stats(ctx, StatsQuery{Keys: k, Tenant: tenant, Now: now, Window: time.Hour, ReportsSince: since})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	all := now.AddDate(-1, 0, 0)
	x := Keys{Email: "X", IP: "IX", Phone: "PX"}

	// acme reports X twice (the newest day counts), globex and initech once.
	must(t, storeFile(t, h, "acme", "fb_acme1", now.Add(-3*time.Hour), quota,
		rep(2, "X", "IX", "", day(10)), rep(3, "X", "", "PX", day(4)), rep(5, "Y", "", "", day(1))))
	must(t, storeFile(t, h, "globex", "fb_globex1", now.Add(-2*time.Hour), quota, rep(2, "X", "IX", "PX", day(30))))
	must(t, storeFile(t, h, "initech", "fb_initech1", now.Add(-time.Hour), quota, rep(9, "X", "", "", day(60))))

	st := stats("acme", x, all)
	want := Reported{Own: day(4), Network: []time.Time{day(30), day(60)}}
	if !sameReported(st.EmailReported, want) {
		t.Errorf("acme's view of X: %+v, want %+v", st.EmailReported, want)
	}
	if !sameReported(st.IPReported, Reported{Own: day(10), Network: []time.Time{day(30)}}) ||
		!sameReported(st.PhoneReported, Reported{Own: day(4), Network: []time.Time{day(30)}}) {
		t.Errorf("acme's view of X's ip %+v and phone %+v", st.IPReported, st.PhoneReported)
	}
	if st := stats("umbrella", x, all); !sameReported(st.EmailReported, Reported{Network: []time.Time{day(4), day(30), day(60)}}) {
		t.Errorf("umbrella's view of X: %+v", st.EmailReported)
	}
	// The horizon: reports dated before it are not counted (a report of
	// day D counts from a horizon of D 00:00 on, not from D 00:01).
	if st := stats("umbrella", x, day(30)); !sameReported(st.EmailReported, Reported{Network: []time.Time{day(4), day(30)}}) {
		t.Errorf("since day 30: %+v", st.EmailReported)
	}
	if st := stats("umbrella", x, day(30).Add(time.Minute)); !sameReported(st.EmailReported, Reported{Network: []time.Time{day(4)}}) {
		t.Errorf("since day 30 00:01: %+v", st.EmailReported)
	}

	// A file that fails or is aborted leaves nothing; nor does one over the
	// quota.
	b, err := h.BeginReports(ctx, "globex", "fb_globex2", now, quota)
	must(t, err)
	must(t, b.Add(ctx, []Report{rep(2, "Z", "IZ", "PZ", day(1))}))
	must(t, b.Abort(ctx))
	if st := stats("acme", Keys{Email: "Z", IP: "IZ", Phone: "PZ"}, all); !sameStats(st, Stats{}) {
		t.Errorf("an aborted file counts: %+v", st)
	}
	if err := storeFile(t, h, "globex", "fb_globex3", now, 2, rep(2, "Z", "", "", day(1)), rep(3, "Z", "", "", day(1))); !isQuota(err, 2, 1, 2) {
		t.Errorf("a file beyond the quota: %v", err)
	}
	if _, err := h.BeginReports(ctx, "initech", "fb_initech2", now, 1); !isQuota(err, 1, 1, 0) {
		t.Errorf("a tenant at its quota begins a file: %v", err)
	}
	// Two files of one tenant under way at once: the second to commit
	// finds the first counted.
	b1, err := h.BeginReports(ctx, "initech", "fb_initech3", now, 3)
	must(t, err)
	b2, err := h.BeginReports(ctx, "initech", "fb_initech4", now, 3)
	must(t, err)
	must(t, b1.Add(ctx, []Report{rep(2, "W", "", "", day(1)), rep(3, "W", "", "", day(1))}))
	must(t, b2.Add(ctx, []Report{rep(2, "V", "", "", day(1)), rep(3, "V", "", "", day(1))}))
	must(t, b1.Commit(ctx))
	if err := b2.Commit(ctx); !isQuota(err, 3, 3, 2) {
		t.Errorf("the second file over the quota: %v", err)
	}
	must(t, b2.Abort(ctx))
	if st := stats("acme", Keys{Email: "V"}, all); !sameStats(st, Stats{}) {
		t.Errorf("a file refused at commit counts: %+v", st)
	}
	if st := stats("acme", Keys{Email: "W"}, all); len(st.EmailReported.Network) != 1 {
		t.Errorf("the file committed first: %+v", st.EmailReported)
	}
	// globex's failures took nothing from acme's quota: acme still adds.
	must(t, storeFile(t, h, "acme", "fb_acme2", now.Add(-30*time.Minute), quota, rep(2, "U", "", "", day(2)), rep(4, "X", "", "", day(2))))

	// Listing: a tenant's own reports, in pages, never another's.
	list := func(tenant string, f ReportFilter, limit int) []string {
		t.Helper()
		var out []string
		after := ""
		for range 20 {
			page, next, err := h.ListReports(ctx, tenant, f, after, limit)
			must(t, err)
			if len(page) > limit {
				t.Fatalf("page of %d, limit %d", len(page), limit)
			}
			for _, r := range page {
				out = append(out, fmt.Sprintf("%s:%d:%s:%s:%s", r.FeedbackID, r.Line, r.Email, r.At.Format(time.DateOnly), r.ReferenceID))
			}
			if next == "" {
				return out
			}
			after = next
		}
		t.Fatal("listing does not end")
		return nil
	}
	acmeAll := []string{
		"fb_acme1:2:X:" + day(10).Format(time.DateOnly) + ":case-2",
		"fb_acme1:3:X:" + day(4).Format(time.DateOnly) + ":case-3",
		"fb_acme1:5:Y:" + day(1).Format(time.DateOnly) + ":case-5",
		"fb_acme2:2:U:" + day(2).Format(time.DateOnly) + ":case-2",
		"fb_acme2:4:X:" + day(2).Format(time.DateOnly) + ":case-4",
	}
	for _, limit := range []int{1, 2, 10} {
		if got := list("acme", ReportFilter{}, limit); !slices.Equal(got, acmeAll) {
			t.Errorf("acme's reports by %d:\n got %q\nwant %q", limit, got, acmeAll)
		}
	}
	if got := list("acme", ReportFilter{Email: "X"}, 2); !slices.Equal(got, []string{acmeAll[0], acmeAll[1], acmeAll[4]}) {
		t.Errorf("acme's reports of X: %q", got)
	}
	if got := list("acme", ReportFilter{FeedbackID: "fb_acme1", Line: 3}, 10); !slices.Equal(got, acmeAll[1:2]) {
		t.Errorf("acme's line 3: %q", got)
	}
	if got := list("globex", ReportFilter{}, 10); len(got) != 1 || got[0][:10] != "fb_globex1" {
		t.Errorf("globex's reports: %q", got)
	}
	if got := list("globex", ReportFilter{FeedbackID: "fb_acme1"}, 10); len(got) != 0 {
		t.Errorf("globex lists acme's file: %q", got)
	}
	if _, _, err := h.ListReports(ctx, "acme", ReportFilter{}, "not-a-cursor", 10); !errors.Is(err, ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}

	// Withdrawal: another tenant's file, line or address withdraws nothing.
	for _, f := range []ReportFilter{{FeedbackID: "fb_acme1"}, {FeedbackID: "fb_acme1", Line: 2}, {Email: "Y"}} {
		if n, err := h.WithdrawReports(ctx, "globex", f); err != nil || n != 0 {
			t.Errorf("globex withdraws %+v: %d, %v", f, n, err)
		}
	}
	if got := list("acme", ReportFilter{}, 10); !slices.Equal(got, acmeAll) {
		t.Errorf("acme's reports after globex's withdrawals: %q", got)
	}
	// acme withdraws one line: X's newest own report is now day 2's.
	if n, err := h.WithdrawReports(ctx, "acme", ReportFilter{FeedbackID: "fb_acme1", Line: 3}); err != nil || n != 1 {
		t.Fatalf("withdraw a line: %d, %v", n, err)
	}
	st = stats("umbrella", x, all)
	if !sameReported(st.EmailReported, Reported{Network: []time.Time{day(2), day(30), day(60)}}) ||
		!sameReported(st.PhoneReported, Reported{Network: []time.Time{day(30)}}) {
		t.Errorf("after withdrawing line 3: email %+v phone %+v", st.EmailReported, st.PhoneReported)
	}
	// ... then every report of X: acme no longer reports it.
	if n, err := h.WithdrawReports(ctx, "acme", ReportFilter{Email: "X"}); err != nil || n != 2 {
		t.Fatalf("withdraw X: %d, %v", n, err)
	}
	st = stats("umbrella", x, all)
	if !sameReported(st.EmailReported, Reported{Network: []time.Time{day(30), day(60)}}) || !sameReported(st.IPReported, Reported{Network: []time.Time{day(30)}}) {
		t.Errorf("after withdrawing X: email %+v ip %+v", st.EmailReported, st.IPReported)
	}
	// ... then a whole file.
	if n, err := h.WithdrawReports(ctx, "globex", ReportFilter{FeedbackID: "fb_globex1"}); err != nil || n != 1 {
		t.Fatalf("withdraw a file: %d, %v", n, err)
	}
	if st := stats("umbrella", x, all); !sameReported(st.EmailReported, Reported{Network: []time.Time{day(60)}}) || !sameReported(st.PhoneReported, Reported{}) {
		t.Errorf("after globex withdrew its file: %+v", st)
	}
	if got := list("acme", ReportFilter{}, 10); !slices.Equal(got, []string{acmeAll[2], acmeAll[3]}) {
		t.Errorf("acme's reports after its withdrawals: %q", got)
	}
	// Withdrawn reports leave the quota: initech (3 of 3) withdraws one
	// and adds one.
	if n, err := h.WithdrawReports(ctx, "initech", ReportFilter{Email: "W"}); err != nil || n != 2 {
		t.Fatalf("initech withdraws W: %d, %v", n, err)
	}
	must(t, storeFile(t, h, "initech", "fb_initech5", now, 3, rep(2, "T", "", "", day(1)), rep(3, "T", "", "", day(1))))
}

func isQuota(err error, quota, held, adds int64) bool {
	var q *QuotaError
	return errors.As(err, &q) && q.Quota == quota && q.Held == held && (adds == 0 || q.Adds == adds)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// redisHistory is a RedisHistory on a key space of the test's own.
func redisHistory(t *testing.T) *RedisHistory {
	rdb := redistest.Need(t)
	return NewRedisHistory(rdb, RedisOptions{Prefix: redistest.Prefix(t, rdb, "fraudtest")})
}

func TestRedisHistory(t *testing.T) {
	historyContract(t, redisHistory(t))
	reportContract(t, redisHistory(t))
}

// TestRedisStagedFilesSwept: a file staged by a process that died is
// swept by a later BeginReports, marks and records alike.
func TestRedisStagedFilesSwept(t *testing.T) {
	h := redisHistory(t)
	ctx := context.Background()
	b, err := h.BeginReports(ctx, "acme", "fb_dead", t0, 100)
	must(t, err)
	must(t, b.Add(ctx, []Report{rep(2, "X", "IX", "PX", t0)}))
	// The process dies here: no Commit, no Abort.
	keys := func() []string {
		ks, err := h.rdb.Keys(ctx, h.p+"*").Result()
		must(t, err)
		slices.Sort(ks)
		return ks
	}
	if len(keys()) == 0 {
		t.Fatal("nothing staged")
	}
	if _, err := h.BeginReports(ctx, "globex", "fb_next", t0.Add(sweepAfter-time.Minute), 100); err != nil {
		t.Fatal(err)
	}
	if n := len(keys()); n == 0 {
		t.Fatal("swept too early")
	}
	if _, err := h.BeginReports(ctx, "globex", "fb_later", t0.Add(sweepAfter+time.Minute), 100); err != nil {
		t.Fatal(err)
	}
	if ks := keys(); len(ks) != 0 {
		t.Errorf("left after the sweep: %q", ks)
	}
}

// BenchmarkReportStoreMemory stores one file of 100,000 reports (each with
// its own address; with -ip and phone, its own IP and phone too) in
// Redis and reports the server's memory per report (INFO memory,
// used_memory, before and after).
func BenchmarkReportStoreMemory(b *testing.B) {
	for _, withIPPhone := range []bool{false, true} {
		b.Run(fmt.Sprintf("ip_phone=%v", withIPPhone), func(b *testing.B) {
			rdb := redistest.Need(b)
			ctx := context.Background()
			const n = 100_000
			used := func() int64 {
				info, err := rdb.Info(ctx, "memory").Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, line := range strings.Split(info, "\r\n") {
					if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
						u, _ := strconv.ParseInt(v, 10, 64)
						return u
					}
				}
				b.Fatal("no used_memory")
				return 0
			}
			for b.Loop() {
				h := NewRedisHistory(rdb, RedisOptions{Prefix: redistest.Prefix(b, rdb, "fraudmem")})
				before := used()
				batch, err := h.BeginReports(ctx, "acme", "fb_mem", t0, n)
				if err != nil {
					b.Fatal(err)
				}
				reports := make([]Report, 0, feedbackBatch)
				for i := range n {
					r := Report{Keys: Keys{Email: digest(nil, 'e', fmt.Sprint(i))}, Type: "chargeback", At: reportDay(t0), Line: i + 2}
					if withIPPhone {
						r.IP, r.Phone = digest(nil, 'i', fmt.Sprint(i)), digest(nil, 'p', fmt.Sprint(i))
					}
					if reports = append(reports, r); len(reports) == feedbackBatch {
						if err := batch.Add(ctx, reports); err != nil {
							b.Fatal(err)
						}
						reports = reports[:0]
					}
				}
				if err := batch.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(used()-before)/n, "redis-bytes/report")
			}
		})
	}
}
