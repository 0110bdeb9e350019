package restapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/restapi"
)

// TestLoadTD drives GET /v5/td with hack/apiload against 1,000,000
// generated people (seed 1), per store: bbolt and PostgreSQL. The URLs
// (EMAILDATA_LOAD_TD_URLS, default 20,000) name people sampled across the
// whole store: 60 % by email, 15 % by md5_email, 15 % by sha1_email, 10 %
// by name and zip4, all with a demographics-only key; each URL is
// requested once before the run (warm), then in turn. The API under load
// is a second server without a useful rate limit. Skipped unless
// EMAILDATA_LOAD=1:
//
//	EMAILDATA_LOAD=1 KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 \
//	    go test -count=1 -timeout 30m -run TestLoadTD -v ./internal/restapi/
//
// The stores are kept for reruns: the bbolt file
// $EMAILDATA_PEOPLE_BENCH_DIR/people-td-bolt-1000000-seed1 (default dir
// $TMPDIR/emaildata-people-bench; a .complete marker is written after the
// load) and the PostgreSQL schema people_td_bench of $DATABASE_URL
// (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable; its
// bench_meta table records the size, a mismatch reloads). The first run
// loads them (about a minute each).
//
// The targets: bbolt at least 10,000 requests/s with p99 under 5 ms,
// PostgreSQL p99 under 15 ms (its throughput is reported).
// EMAILDATA_LOAD_DURATION (default 10s), EMAILDATA_LOAD_CONNS (default
// 16), EMAILDATA_LOAD_TD_MIN_RPS (default 10000; 0 only reports),
// EMAILDATA_LOAD_TD_MAX_P99 (default 5ms), EMAILDATA_LOAD_TD_PG_MIN_RPS
// (default 0) and EMAILDATA_LOAD_TD_PG_MAX_P99 (default 15ms) tune it;
// EMAILDATA_LOAD_TD_STORES (default "bolt,postgres") picks the stores.
func TestLoadTD(t *testing.T) {
	loadOnly(t)
	dur := envDuration(t, "EMAILDATA_LOAD_DURATION", 10*time.Second)
	conns := envInt(t, "EMAILDATA_LOAD_CONNS", 16)
	n := envInt(t, "EMAILDATA_LOAD_TD_N", 1_000_000)
	nURLs := envInt(t, "EMAILDATA_LOAD_TD_URLS", 20_000)
	stores := os.Getenv("EMAILDATA_LOAD_TD_STORES")
	if stores == "" {
		stores = "bolt,postgres"
	}
	sample := tdSample(n, nURLs)
	bin := buildAPILoad(t)
	for _, name := range strings.Split(stores, ",") {
		t.Run(name, func(t *testing.T) {
			minRPS := envInt(t, "EMAILDATA_LOAD_TD_MIN_RPS", 10000)
			maxP99 := envDuration(t, "EMAILDATA_LOAD_TD_MAX_P99", 5*time.Millisecond)
			var st people.Store
			switch name {
			case "bolt":
				st = openTDBolt(t, n)
			case "postgres":
				minRPS = envInt(t, "EMAILDATA_LOAD_TD_PG_MIN_RPS", 0)
				maxP99 = envDuration(t, "EMAILDATA_LOAD_TD_PG_MAX_P99", 15*time.Millisecond)
				st = openTDPostgres(t, n)
			default:
				t.Fatalf("unknown store %q", name)
			}
			defer st.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := runAPI(t, ctx, cfg, restapi.RunOptions{Config: restapi.Config{RateLimit: 1e9, Burst: 1e9, People: st}, Store: store})
			urls := tdURLs(t, "http://"+addr, sample)
			file := filepath.Join(t.TempDir(), "urls.txt")
			if err := os.WriteFile(file, []byte(strings.Join(urls, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// Warm: every URL once; each must find its person.
			warm := exec.Command(bin, "-urls", file, "-c", strconv.Itoa(conns), "-n", strconv.Itoa(len(urls)), "-d", "5m")
			if out, err := warm.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("status codes: 200=%d\n", len(urls))) {
				t.Fatalf("warm-up: %v\n%s", err, out)
			}
			self0, kids0, pg0 := cputime.Self(), cputime.Running(), cputime.Named("postgres")
			load0 := cputime.LoadAverage()
			cmd := exec.Command(bin, "-urls", file, "-c", strconv.Itoa(conns), "-n", "0", "-d", dur.String())
			if procs := envInt(t, "EMAILDATA_LOAD_APILOAD_PROCS", 0); procs > 0 {
				cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
			}
			out, err := cmd.CombinedOutput()
			t.Logf("apiload output:\n%s", out)
			if err != nil {
				t.Fatalf("apiload: %v", err)
			}
			self1, kids1, pg1 := cputime.Self(), cputime.Running(), cputime.Named("postgres")
			rps, requests, codes := parseAPILoad(t, string(out))
			p99 := parseP99(t, string(out))
			loadCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			perReq := func(d time.Duration) string {
				return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3/float64(max(requests, 1)))
			}
			t.Logf("machine: %d CPUs, %s, load average before the run %s, after %s", runtime.NumCPU(), runtime.Version(), load0, cputime.LoadAverage())
			t.Logf("CPU during the run (%s wall, %s of CPU available):", dur, time.Duration(runtime.NumCPU())*dur)
			t.Logf("  test process (API under load, suite): %s = %s per request", (self1 - self0).Round(time.Millisecond), perReq(self1-self0))
			t.Logf("  apiload (load generator):             %s = %s per request", loadCPU.Round(time.Millisecond), perReq(loadCPU))
			t.Logf("  kube-apiserver + etcd (envtest):      %s", (kids1 - kids0).Round(time.Millisecond))
			if name == "postgres" {
				// Every postgres process of the machine: other sessions'
				// queries count too, so this is an upper bound.
				t.Logf("  PostgreSQL server processes:          %s = %s per request (upper bound: the server is shared)", (pg1 - pg0).Round(time.Millisecond), perReq(pg1-pg0))
			}
			if codes != fmt.Sprintf("200=%d", requests) {
				t.Errorf("status codes %q: want every request answered 200", codes)
			}
			if minRPS > 0 && rps < float64(minRPS) {
				t.Errorf("%.0f requests/s, want at least %d", rps, minRPS)
			}
			if maxP99 > 0 && p99 > maxP99 {
				t.Errorf("p99 latency %v, want under %v", p99, maxP99)
			}
		})
	}
}

// tdSample returns k people spread over Generate(1, n).
func tdSample(n, k int) []people.Record {
	out := make([]people.Record, 0, k)
	step := max(1, n/k)
	i := 0
	for r := range people.Generate(1, n) {
		if i%step == step/2 && len(out) < k {
			out = append(out, r)
		}
		i++
	}
	return out
}

// tdURLs builds the GET /v5/td URLs of the sample (see TestLoadTD).
func tdURLs(t *testing.T, base string, sample []people.Record) []string {
	t.Helper()
	rnd := rand.New(rand.NewPCG(13, 13))
	urls := make([]string, len(sample))
	for i, r := range sample {
		q := url.Values{"api_key": {keyDemo}}
		switch x := rnd.IntN(100); {
		case x < 60:
			q.Set("email", r.Email)
		case x < 75:
			q.Set("md5_email", people.EmailMD5(r.Email))
		case x < 90:
			q.Set("sha1_email", people.EmailSHA1(r.Email))
		default:
			// Name and zip4 may be ambiguous (an answer of {}); with the
			// email they are not.
			q.Set("email", r.Email)
			q.Set("first", r.First)
			q.Set("last", r.Last)
			q.Set("zip4", r.Zip+"-0000")
		}
		urls[i] = base + "/v5/td?" + q.Encode()
	}
	return urls
}

func peopleBenchDir(t *testing.T) string {
	dir := os.Getenv("EMAILDATA_PEOPLE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "emaildata-people-bench")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadTDPeople upserts Generate(1, n) into s in 50,000-person batches.
func loadTDPeople(t *testing.T, s people.Store, n int) {
	t.Helper()
	start := time.Now()
	batch := make([]people.Record, 0, people.DefaultImportBatch)
	for r := range people.Generate(1, n) {
		if batch = append(batch, r); len(batch) == cap(batch) {
			if err := s.Upsert(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Upsert(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d people in %v", n, time.Since(start).Round(time.Millisecond))
}

func openTDBolt(t *testing.T, n int) people.Store {
	t.Helper()
	path := filepath.Join(peopleBenchDir(t), fmt.Sprintf("people-td-bolt-%d-seed1", n))
	if _, err := os.Stat(path + ".complete"); err != nil {
		os.RemoveAll(path)
		s, err := people.Open(context.Background(), "bolt://"+path+"?nosync=true")
		if err != nil {
			t.Fatal(err)
		}
		loadTDPeople(t, s, n)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".complete", nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := people.Open(context.Background(), "bolt://"+path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openTDPostgres(t *testing.T, n int) people.Store {
	t.Helper()
	ctx := context.Background()
	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	defer c.Close(ctx)
	const schema = "people_td_bench"
	u, _ := url.Parse(dbURL)
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	var size int
	if c.QueryRow(ctx, "SELECT n FROM "+schema+".bench_meta").Scan(&size) == nil && size == n {
		s, err := people.Open(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	s, err := people.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	loadTDPeople(t, s, n)
	for _, stmt := range []string{
		"VACUUM ANALYZE " + schema + ".people",
		"CREATE TABLE " + schema + ".bench_meta (n integer NOT NULL)",
		fmt.Sprintf("INSERT INTO %s.bench_meta VALUES (%d)", schema, n),
	} {
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// BenchmarkTDHandler measures the GET /v5/td handler chain in process
// (request ID, recovery, routing, metrics, key check, people.Match on the
// suite's bbolt store, the JSON answer) without the network: CPU and
// allocations per request of the API's own code.
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.36.3 go test -run '^$' -bench TDHandler -benchmem ./internal/restapi/
func BenchmarkTDHandler(b *testing.B) {
	keys := apikey.NewStore()
	if err := restapi.UpsertKeySecret(keys, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: "key-td-bench"},
		Data:       map[string][]byte{"key": []byte(keyDemo), "services": []byte("demographics")},
	}); err != nil {
		b.Fatal(err)
	}
	h := restapi.New(restapi.Config{Namespace: nsSystem, RateLimit: 1e9, Burst: 1e9, People: peopleStore}, keys, nil, nil, nil, nil,
		slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))).Handler()
	p := peopleData[3]
	for name, q := range map[string]url.Values{
		"email":    {"api_key": {keyDemo}, "email": {p.Email}},
		"sha1":     {"api_key": {keyDemo}, "sha1_email": {people.EmailSHA1(p.Email)}},
		"name+zip": {"api_key": {keyDemo}, "first": {p.First}, "last": {p.Last}, "zip4": {p.Zip + "-0000"}},
	} {
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v5/td?"+q.Encode(), nil)
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
		})
	}
}
