package people

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// Benchmarks. They run only with -bench (see docs/benchmarks.md):
//
//	go test -run '^$' -bench BenchmarkImport -benchtime 3x -benchmem ./internal/refdata/people/
//	EMAILDATA_PEOPLE_IMPORT_N=1000000 go test -run '^$' -bench BenchmarkImport -benchtime 1x ./internal/refdata/people/
//	go test -run '^$' -bench BenchmarkMatch1M -benchtime 300x -timeout 1h ./internal/refdata/people/
//
// BenchmarkMatch1M loads 1,000,000 generated people (seed 1) into each
// backend once and keeps them for later runs: the embedded file in
// $EMAILDATA_PEOPLE_BENCH_DIR (default $TMPDIR/emaildata-people-bench), the
// PostgreSQL data in schema $EMAILDATA_PEOPLE_BENCH_SCHEMA (default
// people_bench) of $DATABASE_URL, with a bench_meta table recording what was
// loaded. EMAILDATA_PEOPLE_BENCH_N changes the size.

// embeddedBackends are the embedded stores the benchmarks run; name is the
// URL scheme. (Pebble was measured against bbolt the same way before bbolt
// was chosen: docs/benchmarks.md.)
var embeddedBackends = []string{"bolt"}

func embeddedURL(scheme, path string) string { return scheme + "://" + path }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkImport imports a generated CSV (EMAILDATA_PEOPLE_IMPORT_N rows,
// default 100,000) into a new embedded store per iteration, Open and Close
// included.
func BenchmarkImport(b *testing.B) {
	n := envInt("EMAILDATA_PEOPLE_IMPORT_N", 100_000)
	var csv bytes.Buffer
	if err := WriteCSV(&csv, Generate(42, n)); err != nil {
		b.Fatal(err)
	}
	for _, scheme := range embeddedBackends {
		b.Run(scheme, func(b *testing.B) {
			b.SetBytes(int64(csv.Len()))
			dir := b.TempDir()
			var elapsed time.Duration
			cpu0 := cputime.Self()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				s, err := Open(context.Background(), embeddedURL(scheme, filepath.Join(dir, strconv.Itoa(i))))
				if err != nil {
					b.Fatal(err)
				}
				res, err := Import(context.Background(), s, bytes.NewReader(csv.Bytes()), ImportOptions{BatchSize: envInt("EMAILDATA_PEOPLE_IMPORT_BATCH", 0)})
				if err != nil || res.Imported != n {
					b.Fatalf("import: %+v, %v", res, err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				os.RemoveAll(filepath.Join(dir, strconv.Itoa(i)))
			}
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(n)*float64(b.N)/(cputime.Self()-cpu0).Seconds(), "rows/cpu-s")
		})
	}
}

const benchSeed = 1

func benchDir(b *testing.B) string {
	dir := os.Getenv("EMAILDATA_PEOPLE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "emaildata-people-bench")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	return dir
}

// loadStore upserts Generate(benchSeed, n) into s in batches and logs the
// rate.
func loadStore(b *testing.B, s Store, n int) {
	ctx := context.Background()
	start := time.Now()
	batch := make([]Record, 0, envInt("EMAILDATA_PEOPLE_LOAD_BATCH", DefaultImportBatch))
	for r := range Generate(benchSeed, n) {
		batch = append(batch, r)
		if len(batch) == cap(batch) {
			if err := s.Upsert(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Upsert(ctx, batch); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	b.Logf("loaded %d people in %v (%.0f rows/s)", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

// openEmbeddedBench opens the cached embedded store of n people, loading it
// first when missing.
func openEmbeddedBench(b *testing.B, scheme string, n int) Store {
	path := filepath.Join(benchDir(b), fmt.Sprintf("people-%s-%d-seed%d", scheme, n, benchSeed))
	marker := path + ".complete"
	if _, err := os.Stat(marker); err != nil {
		os.RemoveAll(path)
		s, err := Open(context.Background(), embeddedURL(scheme, path))
		if err != nil {
			b.Fatal(err)
		}
		loadStore(b, s, n)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(context.Background(), embeddedURL(scheme, path))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// openPostgresBench opens the benchmark schema, (re)loading it when its
// bench_meta does not record this seed and size.
func openPostgresBench(b *testing.B, n int) Store {
	ctx := context.Background()
	c := requirePostgres(b)
	defer c.Close(ctx)
	schema := os.Getenv("EMAILDATA_PEOPLE_BENCH_SCHEMA")
	if schema == "" {
		schema = "people_bench"
	}
	qs := pgx.Identifier{schema}.Sanitize()
	var seed, size int
	err := c.QueryRow(ctx, "SELECT seed, n FROM "+qs+".bench_meta").Scan(&seed, &size)
	u := withSchema(databaseURL(), schema)
	if err == nil && seed == benchSeed && size == n {
		s, err := Open(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+qs+" CASCADE"); err != nil {
		b.Fatal(err)
	}
	s, err := Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	loadStore(b, s, n)
	for _, q := range []string{
		"VACUUM ANALYZE " + qs + ".people",
		"CREATE TABLE " + qs + ".bench_meta (seed integer NOT NULL, n integer NOT NULL)",
		fmt.Sprintf("INSERT INTO %s.bench_meta VALUES (%d, %d)", qs, benchSeed, n),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// benchBatches builds count batches of size inputs from a sample of the
// generated people: a mix of plain, MD5 and SHA-1 emails with and without
// names and addresses, household members' names, unknown emails and
// non-email values.
func benchBatches(n, count, size int) [][]Input {
	r := rand.New(rand.NewPCG(99, 7))
	var pool [][]Record // sampled households
	var cur []Record
	keep := func() {
		if len(cur) > 1 && r.IntN(10) == 0 {
			pool = append(pool, slices.Clone(cur))
		}
	}
	for p := range Generate(benchSeed, n) {
		if len(cur) > 0 && cur[0].HouseholdID != p.HouseholdID {
			keep()
			cur = cur[:0]
		}
		cur = append(cur, p)
	}
	keep()
	batches := make([][]Input, count)
	for i := range batches {
		items := make([]Input, size)
		for j := range items {
			hh := pool[r.IntN(len(pool))]
			k := r.IntN(len(hh))
			p := &hh[k]
			other := &hh[(k+1)%len(hh)]
			full := Input{Email: p.Email, First: p.First, Last: p.Last, Street: p.Street, City: p.City, State: p.State, Zip: p.Zip}
			var in Input
			switch x := r.IntN(100); {
			case x < 30:
				in = full
			case x < 50:
				in = Input{Email: p.Email, First: p.First, Last: p.Last}
			case x < 60:
				in = Input{Email: p.Email}
			case x < 68:
				in = Input{MD5Email: EmailMD5(p.Email), First: p.First, Last: p.Last}
			case x < 75:
				in = full
				in.Email, in.SHA1Email = "", EmailSHA1(p.Email)
			case x < 85:
				in = Input{Email: p.Email, First: other.First, Last: other.Last, Zip: p.Zip}
			case x < 90:
				in = Input{Email: p.Email, First: "Zebulon", Last: "Quixote"}
			case x < 95:
				in = Input{Email: fmt.Sprintf("nobody%d@example.invalid", r.IntN(1e9)), First: p.First}
			default:
				in = Input{Email: []string{"n/a", "555-0100", "unknown", ""}[r.IntN(4)], Last: p.Last}
			}
			items[j] = in
		}
		batches[i] = items
	}
	return batches
}

// BenchmarkMatch1M matches 5,000-item batches against 1,000,000 people per
// backend and reports the latency percentiles of one Match call.
func BenchmarkMatch1M(b *testing.B) {
	n := envInt("EMAILDATA_PEOPLE_BENCH_N", 1_000_000)
	batches := benchBatches(n, 16, MaxBatch)
	type bk struct {
		name string
		open func(b *testing.B) Store
	}
	var bks []bk
	for _, scheme := range embeddedBackends {
		bks = append(bks, bk{scheme, func(b *testing.B) Store { return openEmbeddedBench(b, scheme, n) }})
	}
	bks = append(bks, bk{"postgres", func(b *testing.B) Store { return openPostgresBench(b, n) }})
	for _, k := range bks {
		b.Run(k.name, func(b *testing.B) {
			s := k.open(b)
			defer s.Close()
			ctx := context.Background()
			levels := map[Level]int{}
			for i, batch := range batches { // warm up, and check the mix once
				res, err := Match(ctx, s, batch)
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					for _, m := range res {
						levels[m.Level]++
					}
				}
			}
			b.Logf("levels of one batch: %v", levels)
			var lat []time.Duration
			i := 0
			cpu0 := cputime.Self()
			for b.Loop() {
				start := time.Now()
				if _, err := Match(ctx, s, batches[i%len(batches)]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
			cpu := cputime.Self() - cpu0
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
		})
	}
}
