package fraud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pgPool connects to DATABASE_URL (or the local test database). Without a
// database the test is skipped, except under CI=true where it fails.
func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL not reachable (required under CI=true): %v", err)
		}
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// pgHistory returns a migrated history on a table of its own, dropped at
// the end of the test.
func pgHistory(t *testing.T, pool *pgxpool.Pool) (*PostgresHistory, string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "fraud_test_" + hex.EncodeToString(b[:])
	h, err := NewPostgresHistory(pool, PostgresOptions{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), dropTables(table))
		if err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	return h, table
}

// dropTables drops every table of a history on table.
func dropTables(table string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %[1]s, %[1]s_first_seen, %[1]s_reports, %[1]s_report_marks, %[1]s_report_counts", table)
}

func TestPostgresHistory(t *testing.T) {
	pool := pgPool(t)
	h, _ := pgHistory(t, pool)
	historyContract(t, h)
	// Migrate again: idempotent.
	if err := h.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	h2, _ := pgHistory(t, pool)
	reportContract(t, h2)
}

func TestPostgresHistoryBadTable(t *testing.T) {
	for _, name := range []string{"Fraud", "a;drop table x", "1abc", ""} {
		_, err := NewPostgresHistory(nil, PostgresOptions{Table: name})
		if (err == nil) != (name == "") {
			t.Errorf("table %q: err %v", name, err)
		}
	}
}

// TestPostgresHistoryReplicas runs two "replicas" (separate pools and
// scorers) against one table: concurrent migrations, concurrent sightings
// of the same address, and both agree on counts and the first-seen date.
func TestPostgresHistoryReplicas(t *testing.T) {
	pool := pgPool(t)
	url := pool.Config().ConnString()
	ctx := context.Background()
	pool2, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()

	h1, table := pgHistory(t, pool)
	h2, err := NewPostgresHistory(pool2, PostgresOptions{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, h := range []*PostgresHistory{h1, h2, h1, h2} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- h.Migrate(ctx) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	base := time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC)
	key := []byte("shared-secret")
	replicas := []*Scorer{
		New(DefaultConfig(), Deps{History: h1, HistoryKey: key, Now: fixedClock(base.Add(2 * time.Second))}),
		New(DefaultConfig(), Deps{History: h2, HistoryKey: key, Now: fixedClock(base.Add(1 * time.Second))}),
	}
	const perReplica = 10
	wg = sync.WaitGroup{}
	for _, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perReplica {
				s.Assess(ctx, testTenant, Input{Email: "Shared@Example.com", IP: "8.8.8.8"}, okResult("Shared@Example.com"))
			}
		}()
	}
	wg.Wait()

	later := base.Add(time.Hour)
	for i, h := range []*PostgresHistory{h1, h2} {
		s := New(DefaultConfig(), Deps{History: h, HistoryKey: key, Now: fixedClock(later), NoRecord: true})
		a := s.Assess(ctx, testTenant, Input{Email: "shared@example.com"}, okResult("shared@example.com"))
		if a.EAM == nil || a.EAM.DateFirstSeen != "2026-01-10" || a.EAM.Popularity != scale10(2*perReplica) {
			t.Errorf("replica %d: eam %+v", i, a.EAM)
		}
		st, err := h.Stats(ctx, StatsQuery{Keys: s.HistoryKeys(Input{Email: "shared@example.com"}), Tenant: testTenant, Now: later, Window: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if !st.EmailFirstSeen.Equal(base.Add(time.Second)) || st.EmailCount != 2*perReplica || st.EmailTotal != 2*perReplica {
			t.Errorf("replica %d: stats %+v", i, st)
		}
	}

	n, err := h1.Prune(ctx, later)
	if err != nil || n != 2*perReplica {
		t.Errorf("prune: %d, %v", n, err)
	}
	st, _ := h2.Stats(ctx, StatsQuery{Keys: replicas[0].HistoryKeys(Input{Email: "shared@example.com"}), Tenant: testTenant, Now: later, Window: 24 * time.Hour})
	if st.EmailCount != 0 || st.EmailTotal != 2*perReplica {
		t.Errorf("after prune: %+v", st)
	}
}

// BenchmarkPostgresHistory measures one Stats plus one Record (what Assess
// does per query) against the local database, on a table that grows with
// the benchmark (distinct addresses, 64 IPs, one domain).
func BenchmarkPostgresHistory(b *testing.B) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		b.Skipf("PostgreSQL not reachable: %v", err)
	}
	defer pool.Close()
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	table := "fraud_bench_" + hex.EncodeToString(rb[:])
	h, err := NewPostgresHistory(pool, PostgresOptions{Table: table})
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	defer pool.Exec(ctx, dropTables(table))
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := Keys{Email: fmt.Sprint("e", i), Domain: "d", Tumbling: fmt.Sprint("t", i/3), IP: fmt.Sprint("ip", i%64), Phone: fmt.Sprint("p", i%500)}
		if _, err := h.Stats(ctx, StatsQuery{Keys: k, Tenant: testTenant, Now: now, Window: 24 * time.Hour, ReportsSince: now.AddDate(-1, 0, 0)}); err != nil {
			b.Fatal(err)
		}
		if err := h.Record(ctx, Event{Keys: k, Tenant: testTenant, At: now}); err != nil {
			b.Fatal(err)
		}
		now = now.Add(100 * time.Millisecond)
		i++
	}
}

// pgSchemaV1 is the schema before tenants (fraud_events, _first_seen and
// _reports without a tenant), as a database of that version holds it.
const pgSchemaV1 = `
CREATE TABLE {T} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL, email text NOT NULL,
	domain text NOT NULL DEFAULT '', tumbling text NOT NULL DEFAULT '', ip text NOT NULL DEFAULT '', phone text NOT NULL DEFAULT '');
CREATE INDEX {T}_email_at ON {T} (email, at);
CREATE INDEX {T}_ip_at ON {T} (ip, at, email) WHERE ip <> '';
CREATE TABLE {T}_first_seen (kind text NOT NULL, key text NOT NULL, first_seen timestamptz NOT NULL,
	last_seen timestamptz NOT NULL, total bigint NOT NULL, PRIMARY KEY (kind, key));
CREATE TABLE {T}_reports (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL, fraud_type text NOT NULL,
	email text NOT NULL, ip text NOT NULL DEFAULT '', phone text NOT NULL DEFAULT '');
CREATE INDEX {T}_reports_email ON {T}_reports (email);
INSERT INTO {T} (at, email, domain, ip) VALUES ('2026-03-01T10:00:00Z', 'E', 'D', 'I');
INSERT INTO {T}_first_seen VALUES ('e', 'E', '2026-03-01T10:00:00Z', '2026-03-01T10:00:00Z', 1);
INSERT INTO {T}_reports (at, fraud_type, email, ip) VALUES ('2026-03-01T00:00:00Z', 'spam', 'E', 'I');
`

// TestPostgresMigrateFromV1: Migrate brings a database of the version
// without tenants up to date in place. What it held cannot be told apart
// by tenant, so it counts for no tenant: the old report is neither own nor
// network for anyone, the old events no tenant's velocity.
func TestPostgresMigrateFromV1(t *testing.T) {
	pool := pgPool(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	table := "fraud_v1_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), dropTables(table)) })
	if _, err := pool.Exec(ctx, strings.ReplaceAll(pgSchemaV1, "{T}", table)); err != nil {
		t.Fatal(err)
	}
	h, err := NewPostgresHistory(pool, PostgresOptions{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := h.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	q := StatsQuery{Keys: Keys{Email: "E", Domain: "D", IP: "I"}, Tenant: "acme", Now: t0, Window: 48 * time.Hour, ReportsSince: t0.AddDate(-1, 0, 0)}
	st, err := h.Stats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !sameStats(st, Stats{}) {
		t.Errorf("the old rows count for acme: %+v", st)
	}
	// The first-seen key now has the tenant: two tenants see one address.
	for _, tenant := range []string{"acme", "globex"} {
		if err := h.Record(ctx, Event{Keys: Keys{Email: "E", Domain: "D"}, Tenant: tenant, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = h.Stats(ctx, q)
	if st.EmailTotal != 1 || st.EmailCount != 1 || !st.EmailFirstSeen.Equal(t0) {
		t.Errorf("after acme's query: %+v", st)
	}
	// The old report is kept (an operator may attribute it), but listed
	// to no tenant.
	if list, _, err := h.ListReports(ctx, "acme", ReportFilter{}, "", 10); err != nil || len(list) != 0 {
		t.Errorf("acme lists %v, %v", list, err)
	}
	var old int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table+"_reports WHERE tenant = ''").Scan(&old); err != nil || old != 1 {
		t.Errorf("old reports kept: %d, %v", old, err)
	}
	reportContract(t, h)
}
