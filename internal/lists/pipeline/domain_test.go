package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// hostService is upperService that flags repeats (Deduper) and shards by
// domain (HostSharder), with the normalisation evlist uses: trimmed and
// lower-cased. Its columns show the row number and the repeat flag, so a
// wrong number or flag in either mode changes the result bytes.
type hostService struct{ upperService }

const hostName = "host"

func (hostService) Columns() []string { return []string{"email_upper", "row_number", "repeat"} }

func (hostService) DedupKey(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func (h hostService) ShardKey(s string) string {
	k := h.DedupKey(s)
	if at := strings.LastIndexByte(k, '@'); at >= 0 && at < len(k)-1 {
		return k[at+1:]
	}
	return ""
}

func (hostService) NewProcessor(_ context.Context, in listservice.Input) (listservice.Processor, error) {
	return &hostProc{upperProc{col: in.EmailIndex, report: listservice.Reporting{}}}, nil
}

type hostProc struct{ upperProc }

func (p *hostProc) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	for i, r := range rows {
		out[i][2] = strconv.FormatBool(r.Repeat)
		if r.Repeat {
			p.report.Add("repeat", "true", 1)
		}
	}
	return p.upperProc.ProcessBatch(ctx, rows, out)
}

// runList prepares, runs and merges data with hostService under cfg.
func runList(t testing.TB, s *blobstore.Store, uid, name string, data []byte, d listfile.Dialect, cfg Config) result {
	t.Helper()
	return processWith(t, s, hostName, hostService{}, uid, name, data, d, cfg)
}

// domainLists are lists that stress what domain shards must keep.
func domainLists(t testing.TB) []struct {
	name, file string
	data       []byte
	d          listfile.Dialect
} {
	d2 := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	rng := rand.New(rand.NewPCG(3, 4))
	var mixed bytes.Buffer
	mixed.WriteString(bom + "id,email,note\r\n")
	domains := []string{"x.com", "Y.ORG", "bücher.DE", "xn--bcher-kva.de", "GMAIL.com", "gmail.com", "a.b.c.d.example"}
	var half []string
	for i := range 300 {
		var row string
		switch rng.IntN(12) {
		case 0:
			row = fmt.Sprintf("%d,no-at-sign-%d,x", i, i%7)
		case 1:
			row = fmt.Sprintf("%d,,\"empty, email\"", i)
		case 2:
			row = fmt.Sprintf("%d,\"Quoted%d@%s\",\"multi\r\nline, \"\"q\"\"\"", i, i%40, domains[rng.IntN(len(domains))])
		case 3:
			row = fmt.Sprintf("%d", i) // short: padded to the width
		default:
			row = fmt.Sprintf("%d, User%d@%s ,plain", i, i%50, domains[rng.IntN(len(domains))])
		}
		half = append(half, row)
	}
	mixed.WriteString(strings.Join(half, "\r\n") + "\r\n\r\n" + strings.Join(half, "\r\n")) // second half repeats; last line unterminated
	tab := listfile.Dialect{Delimiter: '\t', EmailColumn: 1}
	return []struct {
		name, file string
		data       []byte
		d          listfile.Dialect
	}{
		{"genList", "list.csv", genList(500), d2},
		{"mixed with repeats", "list.csv", mixed.Bytes(), d2},
		{"mixed zipped", "list.zip", makeZip(t, zipFile{name: "in.csv", data: mixed.String()}), d2},
		{"no header, tab, LF", "list.txt", []byte(strings.Repeat("a@x.com\tA\nb@y.org\nc@X.COM\tC\textra\nnoat\n\"q\"\"@z.net\"\t\"t\tab\"\n", 40)), tab},
		{"unterminated CR", "list.txt", []byte("a@x.com\nb@y.org\nc@z.net\nd@w.io\r"), tab},
	}
}

// Domain shards give the result of rows mode byte for byte, with the same
// reporting, for every list, shard count and memory budget; and in domain
// mode each domain's rows sit in one shard.
func TestDomainShardsSameResult(t *testing.T) {
	for _, list := range domainLists(t) {
		for _, tc := range []struct {
			name       string
			shardBytes int64
			maxShards  int
			distMem    int64
			wantRuns   bool
		}{
			{"1 shard", 1 << 20, 64, 0, false},
			{"4 shards", int64(len(list.data)/4 + 1), 64, 0, false},
			{"16 shards", int64(len(list.data)/16 + 1), 64, 0, false},
			{"300 shards, 2-byte route", 16, 300, 0, false},
			{"16 shards, many runs", int64(len(list.data)/16 + 1), 64, 256, true},
		} {
			t.Run(list.name+"/"+tc.name, func(t *testing.T) {
				cfg := testConfig()
				cfg.ShardBytes, cfg.MaxShards, cfg.DistributeMemory = tc.shardBytes, tc.maxShards, tc.distMem
				cfg.DedupMemory = 4 << 10 // spills too
				s := memStore(t)
				rows := runList(t, s, "rows", list.file, list.data, list.d, cfg)
				cfg.ShardBy = ShardByDomain
				dom := runList(t, s, "dom", list.file, list.data, list.d, cfg)
				if spilled := spilledRuns(dom.plan); (spilled > 1) != (tc.wantRuns && len(list.data) > 4*int(tc.distMem)) {
					t.Errorf("%d runs spilled", spilled)
				}
				if strings.HasSuffix(list.file, ".zip") {
					// The zip's entry carries the time it was written:
					// compare its name and content.
					z1, z2 := readZip(t, rows.data), readZip(t, dom.data)
					if len(z1) != 1 || !maps.Equal(z1, z2) {
						t.Fatalf("zipped results differ: %d entries by rows, %d by domain", len(z1), len(z2))
					}
				} else if !bytes.Equal(rows.data, dom.data) {
					t.Fatalf("results differ:\nrows:\n%q\ndomain:\n%q", firstDiff(rows.data, dom.data), firstDiff(dom.data, rows.data))
				}
				if !maps.EqualFunc(rows.out.Reporting, dom.out.Reporting, maps.Equal) || rows.out.Rows != dom.out.Rows {
					t.Errorf("reporting %v (%d rows) in rows mode, %v (%d) by domain", rows.out.Reporting, rows.out.Rows, dom.out.Reporting, dom.out.Rows)
				}
				if len(dom.plan.Shards) != len(rows.plan.Shards) && len(rows.plan.Shards) == shardCount(rows.plan.SizeBytes, tc.shardBytes, tc.maxShards) {
					t.Errorf("%d shards by domain, %d by rows", len(dom.plan.Shards), len(rows.plan.Shards))
				}
				if want := len(dom.plan.Shards) > 1; dom.plan.ByDomain() != want {
					t.Errorf("plan by domain %v with %d shards", dom.plan.ByDomain(), len(dom.plan.Shards))
				}
				if dom.plan.ByDomain() {
					checkDomainsApart(t, s, dom.plan, list.d)
				}
				noSpill(t, s, "lists/dom/spill/")
			})
		}
	}
}

func firstDiff(a, b []byte) []byte {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	start := max(0, i-80)
	return a[start:min(len(a), i+80)]
}

// checkDomainsApart reads each shard of the staged input and fails if a
// domain has rows in two shards.
func checkDomainsApart(t *testing.T, s *blobstore.Store, plan *Plan, d listfile.Dialect) {
	t.Helper()
	staged := get(t, s, plan.InputKey)
	where := map[string]int{}
	var total int64
	for i, sh := range plan.Shards {
		rd := listfile.NewRangeReader(bytes.NewReader(staged[sh.Start:sh.End]), plan.Dialect(), testConfig().Limits, sh.Start, 1)
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			total++
			key := hostService{}.ShardKey(rec.Field(d.EmailColumn.Index()))
			if key == "" {
				continue
			}
			if j, ok := where[key]; ok && j != i {
				t.Fatalf("domain %q in shards %d and %d", key, j, i)
			}
			where[key] = i
		}
	}
	if total != plan.Records || len(where) == 0 {
		t.Errorf("staged input holds %d rows (%d domains), the plan %d", total, len(where), plan.Records)
	}
}

// spilledRuns is the number of runs the plan's preparation spilled.
func spilledRuns(p *Plan) int {
	if p.Routing == nil {
		return 0
	}
	return p.Routing.Runs
}

// countObjects is the number of objects under prefix.
func countObjects(t *testing.T, s *blobstore.Store, prefix string) int {
	t.Helper()
	n, err := s.Count(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func noSpill(t *testing.T, s *blobstore.Store, prefix string) {
	t.Helper()
	if n := countObjects(t, s, prefix); n != 0 {
		t.Errorf("%d objects left behind under %s", n, prefix)
	}
}

// The shard of a domain is a fixed function of the key and the count.
func TestShardOfStable(t *testing.T) {
	for _, tc := range []struct {
		key  string
		row  int64
		n    int
		want int
	}{
		{"gmail.com", 0, 8, shardOf("gmail.com", 99, 8)},
		{"", 13, 8, 5},
		{"", 13, 1, 0},
		{"x.com", 0, 1, 0},
	} {
		if got := shardOf(tc.key, tc.row, tc.n); got != tc.want || got < 0 || got >= tc.n {
			t.Errorf("shardOf(%q, %d, %d) = %d, want %d", tc.key, tc.row, tc.n, got, tc.want)
		}
	}
	// Spread: 10,000 domains over 16 shards, none below half its share.
	counts := make([]int, 16)
	for i := range 10000 {
		counts[shardOf(fmt.Sprintf("d%d.com", i), 0, 16)]++
	}
	for s, c := range counts {
		if c < 10000/16/2 {
			t.Errorf("shard %d got %d of 10000 domains", s, c)
		}
	}
}

// checkingService is hostService whose Check is check, called after the
// scan, while preparation's spilled objects are still in the store.
type checkingService struct {
	hostService
	check func(listservice.Input) error
}

func (c checkingService) Check(in listservice.Input) error { return c.check(in) }

// A preparation that fails (here, the service refuses the input after the
// scan, with runs spilled) leaves no runs behind.
func TestDomainPrepareFailureLeavesNoRuns(t *testing.T) {
	s := memStore(t)
	data := genList(400)
	put(t, s, "up.csv", data)
	cfg := testConfig()
	cfg.ShardBy, cfg.ShardBytes, cfg.DistributeMemory = ShardByDomain, int64(len(data)/8), 1<<10
	keys := blobstore.ListKeys{UID: "f"}
	var runObjects int // a run is two objects: its rows and their numbers
	svc := checkingService{check: func(listservice.Input) error {
		runObjects = countObjects(t, s, keys.Spill("dist-"))
		return fmt.Errorf("no")
	}}
	_, err := Prepare(context.Background(), s, keys, Request{Source: Source{Key: "up.csv", Name: "up.csv"}, Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}, Service: hostName}, svc, cfg)
	if !IsBadInput(err) {
		t.Fatalf("Prepare = %v, want the service's refusal", err)
	}
	if runObjects < 2*2 {
		t.Errorf("%d run objects in the store when the service refused, want several runs", runObjects)
	}
	noSpill(t, s, "lists/f/")
}

// A service that is no HostSharder is cut by rows whatever ShardBy says.
func TestDomainNeedsHostSharder(t *testing.T) {
	cfg := testConfig()
	cfg.ShardBy, cfg.ShardBytes = ShardByDomain, 256
	r := process(t, memStore(t), "l1", "list.csv", genList(100), listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}, cfg)
	if r.plan.ByDomain() || r.plan.Version != PlanVersion || len(r.plan.Shards) < 2 {
		t.Errorf("plan version %d by domain %v, %d shards: want rows mode", r.plan.Version, r.plan.ByDomain(), len(r.plan.Shards))
	}
}

func TestCheckShardBy(t *testing.T) {
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"", true}, {ShardByRows, true}, {ShardByDomain, true}, {ShardByMX, true}, {"host", false}} {
		if err := CheckShardBy(tc.mode); (err == nil) != tc.ok {
			t.Errorf("CheckShardBy(%q) = %v", tc.mode, err)
		}
	}
}

// BenchmarkDomainShards measures Prepare + Merge (the shards' work is the
// same in both modes, bar the row numbers and lengths they stream; it is
// run but not timed) of lists of about 190k and 760k rows, by rows and by
// domain, on the file store. With the default 32 MiB DistributeMemory the
// small list is regrouped in memory (one run) and the large one spills
// three runs that are then concatenated.
func BenchmarkDomainShards(b *testing.B) {
	for _, size := range []int{16 << 20, 64 << 20} {
		data := benchList(size)
		rows := int64(bytes.Count(data, []byte{'\n'}) - 1)
		for _, mode := range []string{ShardByRows, ShardByDomain} {
			b.Run(fmt.Sprintf("MiB=%d/by=%s", size>>20, mode), func(b *testing.B) {
				s, err := blobstore.Open(context.Background(), "file://"+b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				benchDomain(b, s, data, rows, mode)
			})
		}
	}
}

func benchDomain(b *testing.B, s *blobstore.Store, data []byte, rows int64, mode string) {
	ctx := context.Background()
	put(b, s, "upload.csv", data)
	reg := listservice.NewRegistry()
	reg.Register(hostName, hostService{})
	keys := blobstore.ListKeys{UID: "bench"}
	cfg := DefaultConfig()
	cfg.ShardBy = mode
	req := Request{
		Source:  Source{Key: "upload.csv", Name: "upload.csv"},
		Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 4},
		Service: hostName,
	}
	var prepCPU, mergeCPU time.Duration
	var shards, runs int
	b.ReportAllocs()
	for b.Loop() {
		c0 := cputime.Self()
		plan, err := Prepare(ctx, s, keys, req, hostService{}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		c1 := cputime.Self()
		prepCPU += c1 - c0
		b.StopTimer()
		shards, runs = len(plan.Shards), runs+spilledRuns(plan)
		for i := range plan.Shards {
			if _, err := RunShard(ctx, s, keys, i, reg, cfg.Limits); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c2 := cputime.Self()
		if _, err := Merge(ctx, s, keys, plan, "upload-1-results.csv"); err != nil {
			b.Fatal(err)
		}
		mergeCPU += cputime.Self() - c2
	}
	n := float64(rows) * float64(b.N)
	b.ReportMetric(float64(prepCPU.Nanoseconds())/n, "prepare-cpu-ns/row")
	b.ReportMetric(float64(mergeCPU.Nanoseconds())/n, "merge-cpu-ns/row")
	b.ReportMetric(float64(shards), "shards")
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(runs)/float64(b.N), "runs")
}

// FuzzDomainShards: whatever the list, domain shards give rows mode's
// result, or both modes refuse it. The seeds run with the tests.
func FuzzDomainShards(f *testing.F) {
	for _, seed := range []string{
		"a@x.com\nb@y.org\nA@X.COM\n",
		"\"q\nx\"@x.com,1\r\nb@y.org\r\n\r\nc@z.net,\"a,b\"",
		"x\ny\nz@\n@\n\"\"\n",
		"a@x.com\rb@y.org\n",
	} {
		f.Add(seed, int64(8))
	}
	f.Fuzz(func(t *testing.T, data string, shardBytes int64) {
		cfg := testConfig()
		cfg.ShardBytes, cfg.MaxShards, cfg.DistributeMemory = max(shardBytes%512, 1), 40, 128
		d := listfile.Dialect{Delimiter: ',', EmailColumn: 1}
		s := memStore(t)
		res := map[string][]byte{}
		for _, mode := range []string{ShardByRows, ShardByDomain} {
			cfg.ShardBy = mode
			keys := blobstore.ListKeys{UID: mode}
			put(t, s, "up/"+mode, []byte(data))
			plan, err := Prepare(context.Background(), s, keys, Request{Source: Source{Key: "up/" + mode, Name: "l.csv"}, Dialect: d, Service: hostName}, hostService{}, cfg)
			if err != nil {
				res[mode] = []byte("refused")
				continue
			}
			reg := listservice.NewRegistry()
			reg.Register(hostName, hostService{})
			for i := range plan.Shards {
				if _, err := RunShard(context.Background(), s, keys, i, reg, cfg.Limits); err != nil {
					t.Fatalf("%s: RunShard(%d): %v", mode, i, err)
				}
			}
			var buf bytes.Buffer
			if _, err := WriteResult(context.Background(), s, keys, plan, "l.csv", &buf, nil); err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			res[mode] = buf.Bytes()
		}
		if !bytes.Equal(res[ShardByRows], res[ShardByDomain]) {
			t.Fatalf("rows mode:\n%q\ndomain mode:\n%q", res[ShardByRows], res[ShardByDomain])
		}
	})
}

// Repeat values carry the shard above the row: they stay positive for the
// last possible shard and sort by shard, then row.
func TestRepeatValueOrder(t *testing.T) {
	vals := []struct {
		shard int
		row   int64
	}{{0, 5}, {0, rowMask}, {1, 0}, {32767, 9}, {32768, 0}, {listfile.MaxShards - 1, rowMask}}
	prev := int64(-1)
	for _, v := range vals {
		x := v.row | int64(v.shard)<<shardShift
		if x <= prev || int(x>>shardShift) != v.shard || x&rowMask != v.row {
			t.Errorf("shard %d row %d encodes as %d (after %d)", v.shard, v.row, x, prev)
		}
		prev = x
	}
}

// LoadPlan takes contiguous plans at version 2 and domain plans at
// version 3 only, with routing for every shard.
func TestLoadPlanVersions(t *testing.T) {
	routing := &Routing{Rows: make([]ByteRange, 2)}
	two := []listfile.Shard{{Index: 0}, {Index: 1}}
	for _, tc := range []struct {
		name string
		plan Plan
		ok   bool
	}{
		{"rows", Plan{Version: PlanVersion, Shards: two}, true},
		{"domain", Plan{Version: PlanVersionDomain, Shards: two, Routing: routing}, true},
		{"domain at version 2", Plan{Version: PlanVersion, Shards: two, Routing: routing}, false},
		{"version 3 without routing", Plan{Version: PlanVersionDomain, Shards: two}, false},
		{"routing for too few shards", Plan{Version: PlanVersionDomain, Shards: two, Routing: &Routing{Rows: make([]ByteRange, 1)}}, false},
		{"version 1", Plan{Version: 1, Shards: two}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memStore(t)
			keys := blobstore.ListKeys{UID: "v"}
			if err := s.WriteJSON(context.Background(), keys.Plan(), tc.plan); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadPlan(context.Background(), s, keys); (err == nil) != tc.ok {
				t.Errorf("LoadPlan = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// By domain, a shard run twice gives the same result, and a merge missing
// a part's row lengths fails instead of writing rows out of place.
func TestDomainRerunAndMissingLengths(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	data := genList(300)
	cfg := testConfig()
	cfg.ShardBy, cfg.ShardBytes = ShardByDomain, int64(len(data)/4+1)
	r := runList(t, s, "d", "list.csv", data, listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}, cfg)
	if !r.plan.ByDomain() {
		t.Fatal("not sharded by domain")
	}
	keys := blobstore.ListKeys{UID: "d"}
	reg := listservice.NewRegistry()
	reg.Register(hostName, hostService{})
	if _, err := RunShard(ctx, s, keys, 1, reg, cfg.Limits); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := WriteResult(ctx, s, keys, r.plan, "list-7-results.csv", &buf, nil); err != nil || !bytes.Equal(buf.Bytes(), r.data) {
		t.Fatalf("after a rerun: %v, same result %v", err, bytes.Equal(buf.Bytes(), r.data))
	}
	if err := s.Delete(ctx, keys.PartLengths(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteResult(ctx, s, keys, r.plan, "list-7-results.csv", io.Discard, nil); err == nil || !strings.Contains(err.Error(), "row lengths of part 2") {
		t.Errorf("merge without part 2's lengths: %v", err)
	}
}
