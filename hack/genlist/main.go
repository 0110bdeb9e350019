// Command genlist writes large generated lists for the offline-scale
// benchmarks (docs/benchmarks.md), and checks a result's duplicate flags
// against a single-pass reference.
//
//	go run ./hack/genlist -rows 8000000 -repeat 0.2 -out /tmp/list.csv
//	go run ./hack/genlist -check -in /tmp/list.csv -result /tmp/result.csv
//	go run ./hack/genlist -engine -in /tmp/list.csv
//	go run ./hack/genlist -stages -in /tmp/list.csv
//
// -engine measures the verification engine alone, offline as `worker run
// --dns-server off` builds it, over the list's addresses (read into memory
// first): VerifyBatch on batches of 1,000 in one goroutine, timed in CPU
// (user + system) of this process.
//
// -stages times the manager's two steps on -in through a file store in a
// temporary directory: Prepare (scan, plan, duplicate search) and Merge
// (the parts, already written by running every shard one after the other
// with the syntax-only service, into one result object with its SHA-256).
//
// A list has a header (id,name,email). Row i's address is its own
// (user<i>@ one of a few domains: valid, typo, disposable; every 13th is
// not an address, every 11th a role account shared by many rows), except
// that a -repeat share of rows repeat the address of a row drawn uniformly
// from all rows before it, as is or upper-cased or padded with spaces, so
// repeats span the whole list and every shard boundary. Every 7th row has
// a quoted name holding the delimiter.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
	"github.com/emaildata/emaildata/internal/platform/cputime"
	"github.com/emaildata/emaildata/internal/wiring"
)

func main() {
	rows := flag.Int64("rows", 1_000_000, "data rows to write")
	repeat := flag.Float64("repeat", 0.2, "share of rows that repeat an earlier row's address")
	seed := flag.Uint64("seed", 1, "random seed")
	out := flag.String("out", "", "list file to write (default stdout)")
	check := flag.Bool("check", false, "check -result's ev_duplicate column against a single-pass reference over -in")
	engine := flag.Bool("engine", false, "measure the offline engine alone over -in's addresses")
	stages := flag.Bool("stages", false, "time Prepare and Merge over -in")
	in := flag.String("in", "", "input list (-check, -engine, -stages)")
	result := flag.String("result", "", "result file (-check)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of -engine or -stages here")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "genlist:", err)
			os.Exit(1)
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var err error
	switch {
	case *check:
		err = checkResult(*in, *result)
	case *engine:
		err = engineOnly(*in)
	case *stages:
		err = timeStages(*in)
	default:
		err = generate(*out, *rows, *repeat, *seed)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "genlist:", err)
		os.Exit(1)
	}
}

var domains = []string{"example.com", "example.org", "gmial.com", "mailinator.com", "yahoo.com", "example.net", "gmail.com"}

// address appends row i's own address.
func address(b []byte, i int64) []byte {
	switch {
	case i%13 == 5:
		return strconv.AppendInt(append(b, "not-an-email-"...), i, 10)
	case i%11 == 3:
		b = append(b, "info@d"...)
		b = strconv.AppendInt(b, i%1000, 10)
		return append(b, ".example.com"...)
	}
	b = strconv.AppendInt(append(b, "user"...), i, 10)
	return append(append(b, '@'), domains[i%int64(len(domains))]...)
}

func generate(path string, rows int64, repeat float64, seed uint64) error {
	w := io.Writer(os.Stdout)
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	bw.WriteString("id,name,email\n")
	var b []byte
	for i := int64(0); i < rows; i++ {
		b = strconv.AppendInt(b[:0], i, 10)
		if i%7 == 0 {
			b = strconv.AppendInt(append(b, ",\"Doe, "...), i, 10)
			b = append(b, "\","...)
		} else {
			b = strconv.AppendInt(append(b, ",name "...), i, 10)
			b = append(b, ',')
		}
		if i > 0 && rng.Float64() < repeat {
			j := rng.Int64N(i)
			start := len(b)
			switch j % 3 {
			case 0:
				b = address(b, j)
			case 1:
				b = address(b, j)
				copy(b[start:], strings.ToUpper(string(b[start:])))
			case 2:
				b = append(address(append(b, "  "...), j), ' ')
			}
		} else {
			b = address(b, i)
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// checkResult compares the result's ev_duplicate column with the simplest
// reference there is: one map of every normalised address seen so far
// (evlist's DedupKey), over the input in order.
func checkResult(inPath, resultPath string) error {
	in, err := os.Open(inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	res, err := os.Open(resultPath)
	if err != nil {
		return err
	}
	defer res.Close()
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 3}
	ri := listfile.NewReader(bufio.NewReaderSize(in, 1<<20), d, listfile.Limits{})
	rr := listfile.NewReader(bufio.NewReaderSize(res, 1<<20), d, listfile.Limits{})
	hdr, err := rr.Next()
	if err != nil {
		return err
	}
	dupCol := -1
	for i, f := range hdr.Fields() {
		if f == "ev_duplicate" {
			dupCol = i
		}
	}
	if dupCol < 0 {
		return fmt.Errorf("%s has no ev_duplicate column", resultPath)
	}
	if _, err := ri.Next(); err != nil { // header
		return err
	}
	svc := evlist.New(evlist.SyntaxOnly)
	seen := map[string]struct{}{}
	var rows, repeats, wrong int64
	for ; ; rows++ {
		a, errA := ri.Next()
		b, errB := rr.Next()
		if errA == io.EOF && errB == io.EOF {
			break
		}
		if errA != nil || errB != nil {
			return fmt.Errorf("row %d: input %v, result %v", rows+1, errA, errB)
		}
		want := "false"
		if k := svc.DedupKey(string(a.FieldBytes(2))); k != "" {
			if _, ok := seen[k]; ok {
				want = "true"
				repeats++
			} else {
				seen[k] = struct{}{}
			}
		}
		if got := string(b.FieldBytes(dupCol)); got != want {
			if wrong++; wrong <= 10 {
				fmt.Fprintf(os.Stderr, "row %d: ev_duplicate %s, want %s\n", rows+1, got, want)
			}
		}
	}
	fmt.Printf("%d rows, %d repeats (single-pass reference), %d rows flagged differently\n", rows, repeats, wrong)
	if wrong > 0 {
		return fmt.Errorf("%d rows differ", wrong)
	}
	return nil
}

func engineOnly(inPath string) error {
	f, err := os.Open(inPath)
	if err != nil {
		return err
	}
	defer f.Close()
	rd := listfile.NewReader(bufio.NewReaderSize(f, 1<<20), listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 3}, listfile.Limits{})
	if _, err := rd.Next(); err != nil {
		return err
	}
	var addrs []string
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		addrs = append(addrs, rec.Field(2))
	}
	vc := wiring.DefaultVerifyConfig()
	vc.DNSServer = "off"
	e, err := wiring.NewEngine(context.Background(), vc)
	if err != nil {
		return err
	}
	res := make([]verify.Result, 1000)
	cpu0, t0 := cputime.Self(), time.Now()
	for i := 0; i < len(addrs); i += len(res) {
		batch := addrs[i:min(i+len(res), len(addrs))]
		clear(res)
		if err := e.VerifyBatch(context.Background(), batch, res[:len(batch)], verify.Options{SMTP: true}); err != nil {
			return err
		}
	}
	cpu := cputime.Self() - cpu0
	fmt.Printf("engine alone: %d addresses, CPU %.2f s (wall %.2f s): %.0f addresses per CPU-second\n",
		len(addrs), cpu.Seconds(), time.Since(t0).Seconds(), float64(len(addrs))/cpu.Seconds())
	return nil
}

func timeStages(inPath string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp(filepath.Dir(inPath), "stages-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Link(inPath, filepath.Join(dir, "in.csv")); err != nil {
		return err
	}
	store, err := blobstore.Open(ctx, "file://"+dir)
	if err != nil {
		return err
	}
	defer store.Close()
	size, err := store.Size(ctx, "in.csv")
	if err != nil {
		return err
	}
	svc := evlist.New(evlist.SyntaxOnly)
	reg := listservice.NewRegistry()
	reg.Register(evlist.Name, svc)
	keys := blobstore.ListKeys{UID: "stages"}
	cfg := pipeline.DefaultConfig()
	mb := float64(size) / 1e6
	cpu0, t0 := cputime.Self(), time.Now()
	plan, err := pipeline.Prepare(ctx, store, keys, pipeline.Request{
		Source:  pipeline.Source{Key: "in.csv", Name: "in.csv"},
		Dialect: listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 3},
		Service: evlist.Name,
	}, svc, cfg)
	if err != nil {
		return err
	}
	cpu, wall := cputime.Self()-cpu0, time.Since(t0)
	fmt.Printf("prepare: %.0f MB, %d rows, %d shards: CPU %.2f s (%.0f MB per CPU-second), wall %.2f s (%.0f MB/s)\n",
		mb, plan.Records, len(plan.Shards), cpu.Seconds(), mb/cpu.Seconds(), wall.Seconds(), mb/wall.Seconds())
	for i := range plan.Shards {
		if _, err := pipeline.RunShard(ctx, store, keys, i, reg, cfg.Limits); err != nil {
			return err
		}
	}
	var parts int64
	for i := range plan.Shards {
		n, err := store.Size(ctx, keys.Part(i))
		if err != nil {
			return err
		}
		parts += n
	}
	mb = float64(parts) / 1e6
	cpu0, t0 = cputime.Self(), time.Now()
	res, err := pipeline.Merge(ctx, store, keys, plan, "in-1-results.csv")
	if err != nil {
		return err
	}
	cpu, wall = cputime.Self()-cpu0, time.Since(t0)
	fmt.Printf("merge: %.0f MB of parts -> %d bytes: CPU %.2f s (%.0f MB per CPU-second), wall %.2f s (%.0f MB/s)\n",
		mb, res.Bytes, cpu.Seconds(), mb/cpu.Seconds(), wall.Seconds(), mb/wall.Seconds())
	return nil
}
