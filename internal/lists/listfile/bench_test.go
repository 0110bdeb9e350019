package listfile

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// cpuMeter reports MB per CPU-second of the process (user+system, GC
// included), which unlike b.SetBytes' MB/s does not drop when other
// processes compete for the cores. Run with -cpu=1 so it means one core.
type cpuMeter struct{ start time.Duration }

func startCPU(b *testing.B) cpuMeter {
	b.Helper()
	return cpuMeter{cputime.Self()}
}

func (m cpuMeter) report(b *testing.B, bytesPerOp int) {
	b.Helper()
	t := cputime.Self()
	if m.start == 0 || t <= m.start {
		return
	}
	b.ReportMetric(float64(bytesPerOp)*float64(b.N)/1e6/(t-m.start).Seconds(), "MB/cpu-s")
}

var (
	benchOnce sync.Once
	benchData []byte
)

// benchCSV returns a realistic ~16 MB list: a header and 8 columns (id,
// first, last, email, street, city, state, zip), some quoted with commas
// and doubled quotes, CRLF line endings.
func benchCSV() []byte {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		first := []string{"James", "Mary", "Robert", "Patricia", "John", "Jennifer", "Michael", "Linda", "William", "Élodie"}
		last := []string{"Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "O'Brien", "Rodriguez"}
		streets := []string{"Main St", "Oak Ave", "Pine Rd", "Maple Dr", "Cedar Ln", "Elm St", "Washington Blvd"}
		cities := []string{"Springfield", "Riverside", "Franklin", "Greenville", "Bristol", "Clinton", "Salem"}
		states := []string{"CA", "TX", "NY", "FL", "IL", "PA", "OH"}
		domains := []string{"gmail.com", "yahoo.com", "example.org", "outlook.com", "company.co.uk"}
		var b bytes.Buffer
		b.WriteString("id,first_name,last_name,email,street,city,state,zip\r\n")
		for id := 1; b.Len() < 16<<20; id++ {
			f, l := first[rng.IntN(len(first))], last[rng.IntN(len(last))]
			fmt.Fprintf(&b, "%d,%s,", id, f)
			switch rng.IntN(10) {
			case 0:
				fmt.Fprintf(&b, "\"%s, Jr.\",", l)
			case 1:
				fmt.Fprintf(&b, "\"%s \"\"The Rock\"\"\",", l)
			default:
				fmt.Fprintf(&b, "%s,", l)
			}
			fmt.Fprintf(&b, "%s.%s%d@%s,", f, l, rng.IntN(1000), domains[rng.IntN(len(domains))])
			if rng.IntN(4) == 0 {
				fmt.Fprintf(&b, "\"%d %s, Apt %d\",", rng.IntN(9999), streets[rng.IntN(len(streets))], rng.IntN(300))
			} else {
				fmt.Fprintf(&b, "%d %s,", rng.IntN(9999), streets[rng.IntN(len(streets))])
			}
			fmt.Fprintf(&b, "%s,%s,%05d\r\n", cities[rng.IntN(len(cities))], states[rng.IntN(len(states))], rng.IntN(100000))
		}
		benchData = b.Bytes()
	})
	return benchData
}

var benchDialect = Dialect{Delimiter: ',', Header: true, EmailColumn: 4}

// BenchmarkPipeline measures read → no-op service (look at the email
// field) → write with two appended columns, on one core.
func BenchmarkPipeline(b *testing.B) {
	data := benchCSV()
	extra := []string{"deliverable", "0.97"}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	m := startCPU(b)
	defer m.report(b, len(data))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), benchDialect, Limits{})
		w := NewWriter(io.Discard, ',', true)
		n := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(rec.FieldBytes(3))
			if err := w.WriteRaw(rec.Raw, rec.NumFields(), 8, extra); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatal("no emails")
		}
	}
}

// BenchmarkReader is the read side alone.
func BenchmarkReader(b *testing.B) {
	data := benchCSV()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	m := startCPU(b)
	defer m.report(b, len(data))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), benchDialect, Limits{})
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			_ = rec.FieldBytes(3)
		}
	}
}

// BenchmarkScan measures the controller's validation and shard planning.
func BenchmarkScan(b *testing.B) {
	data := benchCSV()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	m := startCPU(b)
	defer m.report(b, len(data))
	for b.Loop() {
		p, err := Scan(bytes.NewReader(data), benchDialect, Limits{}, 1<<20, 64)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Shards) != 16 {
			b.Fatalf("%d shards", len(p.Shards))
		}
	}
}

// BenchmarkWriteZip measures compressing a result file.
func BenchmarkWriteZip(b *testing.B) {
	data := benchCSV()
	b.SetBytes(int64(len(data)))
	m := startCPU(b)
	defer m.report(b, len(data))
	for b.Loop() {
		if err := WriteZip(io.Discard, "result.csv", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteRaw is the write side alone: every record of benchCSV
// with the four columns worker run appends (one needing quotes in 1 of 8).
func BenchmarkWriteRaw(b *testing.B) {
	data := benchCSV()
	var raws [][]byte
	var widths []int
	r := NewReader(bytes.NewReader(data), benchDialect, Limits{})
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, bytes.Clone(rec.Raw))
		widths = append(widths, rec.NumFields())
	}
	extras := [][]string{{"deliverable", "0.97", "", "false"}, {"risky", "0.5", "did you mean \"x\", y", "true"}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	m := startCPU(b)
	defer m.report(b, len(data))
	for b.Loop() {
		w := NewWriter(io.Discard, ',', false)
		for i, raw := range raws {
			if err := w.WriteRaw(raw, widths[i], 8, extras[min(i%8, 1)]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
