package evlist_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// singlePass is the reference for duplicate flags: the email_validation
// service with the duplicate search done the simplest way, one map of
// every key seen so far, shared by the shards, which run one after the
// other in order. It is not a Deduper, so the pipeline finds no repeats
// for it; its processors set Row.Repeat themselves from the exact keys
// (no fingerprints), as the shards did before the search moved to
// preparation.
type singlePass struct {
	*evlist.Service
	mu   sync.Mutex
	seen map[string]bool
}

func (s *singlePass) NewProcessor(ctx context.Context, in listservice.Input) (listservice.Processor, error) {
	p, err := s.Service.NewProcessor(ctx, in)
	if err != nil {
		return nil, err
	}
	return &singlePassProc{Processor: p, s: s, col: in.EmailIndex}, nil
}

type singlePassProc struct {
	listservice.Processor
	s   *singlePass
	col int
}

func (p *singlePassProc) RowsInFlight() int { return p.Processor.(listservice.Streamer).RowsInFlight() }
func (p *singlePassProc) BatchSize() int    { return p.Processor.(listservice.BatchSizer).BatchSize() }

func (p *singlePassProc) FinishBatch(rows []listservice.Row, out [][]string) {
	p.s.mu.Lock()
	for i := range rows {
		k := p.s.DedupKey(rows[i].Field(p.col))
		rows[i].Repeat = k != "" && p.s.seen[k]
		p.s.seen[k] = true
	}
	p.s.mu.Unlock()
	p.Processor.(listservice.Streamer).FinishBatch(rows, out)
}

// runList prepares, runs (shards in order) and merges a list, returning
// the result file and the plan.
func runList(t *testing.T, svc listservice.Service, data []byte, name string, d listfile.Dialect, cfg pipeline.Config) ([]byte, *pipeline.Plan) {
	t.Helper()
	ctx := context.Background()
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.WriteAll(ctx, "in", data, nil); err != nil {
		t.Fatal(err)
	}
	reg := listservice.NewRegistry()
	reg.Register(evlist.Name, svc)
	keys := blobstore.ListKeys{UID: "l"}
	plan, err := pipeline.Prepare(ctx, store, keys, pipeline.Request{Source: pipeline.Source{Key: "in", Name: name}, Dialect: d, Service: evlist.Name}, svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range plan.Shards {
		if _, err := pipeline.RunShard(ctx, store, keys, i, reg, cfg.Limits); err != nil {
			t.Fatal(err)
		}
	}
	out, err := pipeline.Merge(ctx, store, keys, plan, "r-1-results"+name[strings.LastIndexByte(name, '.'):])
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.ReadAll(ctx, out.Key)
	if err != nil {
		t.Fatal(err)
	}
	// The duplicate search leaves no spilled runs behind.
	it := store.List(&blob.ListOptions{Prefix: keys.Spill("")})
	if obj, err := it.Next(ctx); err != io.EOF {
		t.Errorf("spilled run left in the store: %v %v", obj, err)
	}
	return res, plan
}

// halfRepeated is a list of n distinct addresses followed by the same
// addresses again in another order, with case and padding changed, plus
// empty and padding-only addresses (never duplicates) and quoted fields
// (with the delimiter and line breaks) around them.
func halfRepeated(n int, header bool, crlf bool) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var b bytes.Buffer
	if header {
		b.WriteString("id,note,email" + eol)
	}
	addr := func(i int) string { return fmt.Sprintf("user%d@Example%d.com", i, i%7) }
	row := func(id int, email string) {
		note := "plain"
		switch id % 5 {
		case 1:
			note = "\"Doe, J.\""
		case 2:
			note = "\"two" + eol + "lines\""
		}
		fmt.Fprintf(&b, "%d,%s,%s%s", id, note, email, eol)
	}
	for i := range n {
		switch {
		case i%97 == 0:
			row(i, "")
		case i%89 == 0:
			row(i, "\" \t \"")
		default:
			row(i, addr(i))
		}
	}
	for j, i := range rng.Perm(n) {
		a := addr(i)
		switch j % 4 {
		case 1:
			a = strings.ToUpper(a)
		case 2:
			a = "\"  " + a + "\u00a0\""
		case 3:
			a = "\ufeff" + strings.ToLower(a)
		}
		row(n+j, a)
	}
	return b.Bytes()
}

func zipped(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRepeatsMatchSinglePass: lists whose second half repeats the first
// (so every repeat is in a later shard than its first occurrence), with
// and without a header, plain and zipped, in one shard or many, with the
// duplicate search in memory or spilling sorted runs (and merging them in
// rounds): the result file is byte-identical to the single-pass
// reference's.
func TestRepeatsMatchSinglePass(t *testing.T) {
	type tc struct {
		name      string
		n         int
		header    bool
		crlf      bool
		zip       bool
		shard     int64 // Config.ShardBytes
		dedupMem  int64
		minShards int
	}
	var cases []tc
	for _, header := range []bool{false, true} {
		for _, z := range []bool{false, true} {
			cases = append(cases,
				tc{fmt.Sprintf("header=%v/zip=%v/one shard", header, z), 3000, header, !header, z, 1 << 30, 0, 1},
				tc{fmt.Sprintf("header=%v/zip=%v/many shards", header, z), 3000, header, header, z, 8 << 10, 0, 8},
				tc{fmt.Sprintf("header=%v/zip=%v/many shards, spilled", header, z), 3000, header, !header, z, 8 << 10, 1, 8},
			)
		}
	}
	// 2×6000 keys in runs of 64: about 190 runs, merged in rounds of 64.
	cases = append(cases, tc{"spilled, merged in rounds", 6000, true, false, false, 16 << 10, 1, 8})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, name := halfRepeated(c.n, c.header, c.crlf), "list.csv"
			if c.zip {
				data, name = zipped(t, "inner.csv", data), "list.zip"
			}
			d := listfile.Dialect{Delimiter: ',', Header: c.header, EmailColumn: 3}
			cfg := pipeline.DefaultConfig()
			cfg.ShardBytes, cfg.DedupMemory = c.shard, c.dedupMem
			got, plan := runList(t, evlist.New(evlist.SyntaxOnly), data, name, d, cfg)
			if len(plan.Shards) < c.minShards {
				t.Fatalf("%d shards, want at least %d", len(plan.Shards), c.minShards)
			}
			var repeats int64
			for _, r := range plan.Repeats {
				repeats += r
			}
			if repeats < int64(c.n)*9/10 {
				t.Errorf("%d repeats, want about %d", repeats, c.n)
			}
			ref := &singlePass{Service: evlist.New(evlist.SyntaxOnly), seen: map[string]bool{}}
			want, _ := runList(t, ref, data, name, d, cfg)
			if c.zip { // compare the entries: a zip also holds its time of writing
				got, want = unzipped(t, got), unzipped(t, want)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("result differs from the single-pass reference (%d vs %d bytes)", len(got), len(want))
			}
			if !bytes.Contains(want, []byte(",true,")) {
				t.Fatal("the reference flags no duplicates: the test proves nothing")
			}
		})
	}
}

func unzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(zr.File) != 1 {
		t.Fatalf("zipped result: %v", err)
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
