package pipeline

import (
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// The external sort yields every value in order, in memory or through
// spilled runs merged in rounds (more runs than maxFanIn), and leaves no
// run behind.
func TestExtSorter(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		n        int
		mem      int64
		wantRuns int // runs written before the merge
	}{
		{"in memory", 5000, 1 << 20, 0},
		{"spilled", 5000, 8 * 1000, 4},
		{"merged in rounds", 20000, 8 * 64, 312},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memStore(t)
			rng := rand.New(rand.NewPCG(1, uint64(tc.n)))
			in := make([]int64, tc.n)
			es := newExtSorter(ctx, s, "spill/x-", rowCodec, tc.mem)
			for i := range in {
				in[i] = rng.Int64N(1000) // many ties
				if err := es.add(in[i]); err != nil {
					t.Fatal(err)
				}
			}
			if len(es.runs) != tc.wantRuns {
				t.Errorf("%d runs before the merge, want %d", len(es.runs), tc.wantRuns)
			}
			var out []int64
			if err := es.each(func(v int64) error { out = append(out, v); return nil }); err != nil {
				t.Fatal(err)
			}
			slices.Sort(in)
			if !slices.Equal(in, out) {
				t.Fatalf("sorted %d values into %d, not in order", len(in), len(out))
			}
			it := s.List(&blob.ListOptions{Prefix: "spill/"})
			if obj, err := it.Next(ctx); err != io.EOF {
				t.Errorf("run left behind: %v %v", obj, err)
			}
		})
	}
}

// dedupService flags repeats of the email column, case-insensitively.
type dedupService struct{ constService }

func (dedupService) DedupKey(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func (dedupService) NewProcessor(context.Context, listservice.Input) (listservice.Processor, error) {
	return &repeatProc{}, nil
}

// repeatProc writes Row.Repeat as its column.
type repeatProc struct{ constProc }

func (repeatProc) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	for i, r := range rows {
		out[i][0] = map[bool]string{true: "repeat", false: "first"}[r.Repeat]
	}
	return nil
}

// A shard refuses repeats that do not match its rows (a plan whose counts
// or objects were changed), instead of writing wrong flags.
func TestRepeatsMismatch(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	var b strings.Builder
	for i := range 400 {
		b.WriteString([]string{"a@x.com\n", "B@x.com\n", " a@X.com\n", "c@x.com\n"}[i%4])
	}
	put(t, s, "in", []byte(b.String()))
	reg := listservice.NewRegistry()
	reg.Register("dedup", dedupService{})
	keys := blobstore.ListKeys{UID: "m"}
	cfg := testConfig()
	cfg.ShardBytes = 512
	plan, err := Prepare(ctx, s, keys, Request{Source: Source{Key: "in", Name: "l.txt"}, Dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 1}, Service: "dedup"}, dedupService{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Three keys: every row after the first three distinct ones repeats.
	if len(plan.Shards) < 3 || plan.Repeats[0] != plan.Shards[0].Rows-3 || plan.Repeats[1] != plan.Shards[1].Rows {
		t.Fatalf("shards %d, repeats %v", len(plan.Shards), plan.Repeats)
	}
	if _, err := RunShard(ctx, s, keys, 1, reg, cfg.Limits); err != nil {
		t.Fatal(err)
	}
	part := string(get(t, s, keys.Part(1)))
	if strings.Count(part, "first") != 0 || strings.Count(part, "repeat") != int(plan.Shards[1].Rows) {
		t.Errorf("shard 1 part: %q", part)
	}

	for _, tc := range []struct {
		name   string
		change func(p *Plan)
		want   string
	}{
		{"count too high", func(p *Plan) { p.Repeats[1]++ }, "read shard repeats"},
		{"count too low", func(p *Plan) { p.Repeats[1]-- }, "never read"},
		{"counts missing", func(p *Plan) { p.Repeats = p.Repeats[:1] }, "prepare the list again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *plan
			p.Repeats = slices.Clone(plan.Repeats)
			tc.change(&p)
			if err := s.WriteJSON(ctx, keys.Plan(), &p); err != nil {
				t.Fatal(err)
			}
			_, err := RunShard(ctx, s, keys, 1, reg, cfg.Limits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// The radix sort of fingerprints orders them as a comparison sort does,
// with clustered and repeated digests too.
func TestSortFingerprints(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 100, 4095, 4096, 100_000} {
		for _, clustered := range []bool{false, true} {
			a := make([]fingerprint, n)
			for i := range a {
				a[i] = fingerprint{rng.Uint64(), rng.Uint64(), int64(i)}
				if clustered { // few distinct top bits: big buckets
					a[i].hi &= 0xff000000000000ff
				}
				if i > 0 && rng.IntN(4) == 0 {
					a[i].hi, a[i].lo = a[rng.IntN(i)].hi, a[rng.IntN(i)].lo
				}
			}
			want := slices.Clone(a)
			slices.SortStableFunc(want, cmpFingerprint)
			sortFingerprints(a)
			if !slices.EqualFunc(a, want, func(x, y fingerprint) bool { return x.hi == y.hi && x.lo == y.lo }) {
				t.Fatalf("n=%d clustered=%v: not sorted like a comparison sort", n, clustered)
			}
		}
	}
}

func BenchmarkSortFingerprints(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := make([]fingerprint, (32<<20)/24)
	for i := range src {
		src[i] = fingerprint{rng.Uint64(), rng.Uint64(), int64(i)}
	}
	a := make([]fingerprint, len(src))
	for _, bc := range []struct {
		name string
		sort func([]fingerprint)
	}{{"radix", sortFingerprints}, {"pdqsort", func(a []fingerprint) { slices.SortFunc(a, cmpFingerprint) }}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				copy(a, src)
				bc.sort(a)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(a)), "ns/value")
		})
	}
}

func TestConfigSharedBy(t *testing.T) {
	for _, tc := range []struct {
		mem  int64
		n    int
		want int64
	}{{0, 4, DefaultDedupMemory / 4}, {64 << 20, 1, 64 << 20}, {64 << 20, 0, 64 << 20}, {40 << 20, 4, 10 << 20}} {
		if got := (Config{DedupMemory: tc.mem}).SharedBy(tc.n).DedupMemory; got != tc.want {
			t.Errorf("DedupMemory %d shared by %d = %d, want %d", tc.mem, tc.n, got, tc.want)
		}
	}
}
