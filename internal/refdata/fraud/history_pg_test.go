package fraud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
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
		_, err := pool.Exec(context.Background(), fmt.Sprintf("DROP TABLE IF EXISTS %s, %s_first_seen, %s_reports", table, table, table))
		if err != nil {
			t.Errorf("drop: %v", err)
		}
	})
	return h, table
}

func TestPostgresHistory(t *testing.T) {
	pool := pgPool(t)
	h, _ := pgHistory(t, pool)
	historyContract(t, h)
	// Migrate again: idempotent.
	if err := h.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
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
				s.Assess(ctx, Input{Email: "Shared@Example.com", IP: "8.8.8.8"}, okResult("Shared@Example.com"))
			}
		}()
	}
	wg.Wait()

	later := base.Add(time.Hour)
	for i, h := range []*PostgresHistory{h1, h2} {
		s := New(DefaultConfig(), Deps{History: h, HistoryKey: key, Now: fixedClock(later), NoRecord: true})
		a := s.Assess(ctx, Input{Email: "shared@example.com"}, okResult("shared@example.com"))
		if a.EAM == nil || a.EAM.DateFirstSeen != "2026-01-10" || a.EAM.Popularity != scale10(2*perReplica) {
			t.Errorf("replica %d: eam %+v", i, a.EAM)
		}
		st, err := h.Stats(ctx, s.HistoryKeys(Input{Email: "shared@example.com"}), later, 24*time.Hour)
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
	st, _ := h2.Stats(ctx, replicas[0].HistoryKeys(Input{Email: "shared@example.com"}), later, 24*time.Hour)
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
	defer pool.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s, %s_first_seen, %s_reports", table, table, table))
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := Keys{Email: fmt.Sprint("e", i), Domain: "d", Tumbling: fmt.Sprint("t", i/3), IP: fmt.Sprint("ip", i%64), Phone: fmt.Sprint("p", i%500)}
		if _, err := h.Stats(ctx, k, now, 24*time.Hour); err != nil {
			b.Fatal(err)
		}
		if err := h.Record(ctx, Event{Keys: k, At: now}); err != nil {
			b.Fatal(err)
		}
		now = now.Add(100 * time.Millisecond)
		i++
	}
}
