package evlist

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// seenKeys plays the pipeline's duplicate search for processBatch: the
// keys each processor's rows had so far.
var seenKeys = map[listservice.Processor]map[string]bool{}

// processBatch runs a batch as the pipeline does: Row.Repeat set from the
// service's DedupKey (exactly, in a map), ProcessBatch, then FinishBatch
// in row order.
func processBatch(ctx context.Context, p listservice.Processor, rows []listservice.Row, out [][]string) error {
	proc := p.(*processor)
	seen := seenKeys[p]
	if seen == nil {
		seen = map[string]bool{}
		seenKeys[p] = seen
	}
	for i := range rows {
		k := proc.svc.DedupKey(rows[i].Field(proc.col))
		rows[i].Repeat = k != "" && seen[k]
		seen[k] = true
	}
	if err := p.ProcessBatch(ctx, rows, out); err != nil {
		return err
	}
	p.(listservice.Streamer).FinishBatch(rows, out)
	return nil
}

func rowsOf(col int, addrs ...string) []listservice.Row {
	rows := make([]listservice.Row, len(addrs))
	for i, a := range addrs {
		fields := make([]string, col+1)
		fields[0] = "name"
		fields[col] = a
		rows[i] = listservice.Row{Number: int64(i), Fields: fields}
	}
	return rows
}

func newOut(n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = make([]string, len(columns))
	}
	return out
}

func TestColumns(t *testing.T) {
	s := New(SyntaxOnly)
	want := []string{"ev_status", "ev_status_code", "ev_domain_type", "ev_role_account", "ev_correction", "ev_duplicate", "ev_valid", "ev_from_history"}
	got := s.Columns()
	if !slices.Equal(got, want) {
		t.Fatalf("Columns() = %q, want %q", got, want)
	}
	got[0] = "changed" // callers get a copy
	if s.Columns()[0] != "ev_status" {
		t.Error("Columns() returned the package's slice")
	}
	if err := s.Check(listservice.Input{}); err != nil {
		t.Errorf("Check(no header) = %v", err)
	}
	if err := s.Check(listservice.Input{Header: []string{"a", "b"}, EmailIndex: 1}); err != nil {
		t.Errorf("Check(header) = %v", err)
	}
}

func TestSyntaxOnlyRows(t *testing.T) {
	tests := []struct {
		addr string
		want []string // ev_status, ev_status_code, ev_domain_type, ev_role_account, ev_correction, ev_duplicate, ev_valid, ev_from_history
	}{
		{"john@example.com", []string{"valid", "10", "", "false", "", "false", "true", "false"}},
		{"John.Doe@EXAMPLE.COM", []string{"valid", "10", "", "false", "", "false", "true", "false"}},
		{"user@bücher.de", []string{"valid", "10", "", "false", "", "false", "true", "false"}},
		{"info@example.com", []string{"valid", "10", "", "false", "", "false", "true", "false"}}, // role accounts come with the list stage
		{"", []string{"invalid", "100", "", "false", "", "false", "false", "false"}},
		{"john.example.com", []string{"invalid", "150", "", "false", "", "false", "false", "false"}},
		{"a@b@example.com", []string{"invalid", "155", "", "false", "", "false", "false", "false"}}, // corrections come with the engine
		{"@example.com", []string{"invalid", "140", "", "false", "", "false", "false", "false"}},
		{"john@", []string{"invalid", "145", "", "false", "", "false", "false", "false"}},
		{"john@example.invalidtld", []string{"invalid", "200", "", "false", "", "false", "false", "false"}},
		// The first row's address, padded: the trimmed address's verdict,
		// and a duplicate.
		{" john@example.com ", []string{"valid", "10", "", "false", "", "true", "true", "false"}},
		{"jo hn@example.com", []string{"invalid", "215", "", "false", "", "false", "false", "false"}},
		{"\xff@example.com", []string{"invalid", "110", "", "false", "", "false", "false", "false"}},
	}
	ctx := context.Background()
	p, err := New(SyntaxOnly).NewProcessor(ctx, listservice.Input{Header: []string{"name", "email"}, EmailIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addrs := make([]string, len(tests))
	for i, tt := range tests {
		addrs[i] = tt.addr
	}
	out := newOut(len(tests))
	if err := processBatch(ctx, p, rowsOf(1, addrs...), out); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		if !slices.Equal(out[i], tt.want) {
			t.Errorf("%q: got %q, want %q", tt.addr, out[i], tt.want)
		}
	}
	wantReport := listservice.Reporting{
		"status": {"valid": 5, "invalid": 8},
		"status_code": {
			"10": 5, "100": 1, "110": 1, "140": 1, "145": 1, "150": 1, "155": 1, "200": 1, "215": 1,
		},
		"duplicate": {"true": 1},
	}
	if got := p.Reporting(); !maps.EqualFunc(got, wantReport, maps.Equal) {
		t.Errorf("Reporting() = %v, want %v", got, wantReport)
	}
}

func TestReportingAcrossBatchesAndShortRows(t *testing.T) {
	ctx := context.Background()
	p, err := New(SyntaxOnly).NewProcessor(ctx, listservice.Input{EmailIndex: 2})
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]listservice.Row{
		rowsOf(2, "a@example.com", "b@example.org", "bad"),
		{{Number: 3, Fields: []string{"only one field"}}}, // short row: empty email
		rowsOf(2, "c@example.net"),
	}
	var all [][]string
	for _, b := range batches {
		out := newOut(len(b))
		if err := processBatch(ctx, p, b, out); err != nil {
			t.Fatal(err)
		}
		all = append(all, out...)
	}
	if got := all[3]; !slices.Equal(got, []string{"invalid", "100", "", "false", "", "false", "false", "false"}) {
		t.Errorf("short row: %q", got)
	}
	if got := all[4]; !slices.Equal(got, []string{"valid", "10", "", "false", "", "false", "true", "false"}) {
		t.Errorf("row after a smaller batch: %q", got)
	}
	want := listservice.Reporting{
		"status":      {"valid": 3, "invalid": 2},
		"status_code": {"10": 3, "150": 1, "100": 1},
	}
	if got := p.Reporting(); !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("Reporting() = %v, want %v", got, want)
	}

	// Each processor counts its own rows.
	p2, _ := New(SyntaxOnly).NewProcessor(ctx, listservice.Input{EmailIndex: 0})
	if len(p2.Reporting()) != 0 {
		t.Errorf("new processor reports %v", p2.Reporting())
	}
}

func TestCustomChecker(t *testing.T) {
	ctx := context.Background()
	check := func(_ context.Context, addrs []string, res []verify.Result, _ verify.Options) error {
		for i, a := range addrs {
			r := verify.Result{Address: a}
			switch {
			case strings.HasPrefix(a, "info@"):
				r.SetCode(verify.CodeDeliverable)
				r.RoleAccount = true
				r.DomainType = "biz"
			case strings.HasSuffix(a, "@mailinator.com"):
				r.SetCode(verify.CodeSpamTrap)
				r.DomainType = "disposable"
			case strings.HasSuffix(a, "@gmail.com"):
				r.SetCode(verify.CodeCatchAll)
				r.DomainType = "freeisp"
			case strings.HasSuffix(a, "@gmial.com"):
				r.SetCode(verify.CodeDomainNotAccepted)
				r.DomainType = "freeisp"
				r.Corrections = []string{"z@gmail.com", "z@gmx.com"} // the first one is reported
			default:
				r.SetCode(verify.CodeTimeout)
			}
			res[i] = r
		}
		return nil
	}
	p, err := New(check).NewProcessor(ctx, listservice.Input{EmailIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	rows := []listservice.Row{
		{Fields: []string{"info@acme.com"}},
		{Fields: []string{"x@mailinator.com"}},
		{Fields: []string{"y@gmail.com"}},
		{Fields: []string{"z@gmial.com"}},
		{Fields: []string{"z@slow.example"}},
	}
	out := newOut(len(rows))
	if err := processBatch(ctx, p, rows, out); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"safetosend", "50", "biz", "true", "", "false", "true", "false"},
		{"trap", "525", "disposable", "false", "", "false", "false", "false"},
		{"valid", "45", "freeisp", "false", "", "false", "true", "false"},
		{"invalid", "505", "freeisp", "false", "z@gmail.com", "false", "false", "false"},
		{"unknown", "5", "", "false", "", "false", "false", "false"},
	}
	for i := range want {
		if !slices.Equal(out[i], want[i]) {
			t.Errorf("row %d: %q, want %q", i, out[i], want[i])
		}
	}
	wantRep := listservice.Reporting{
		"status":      {"safetosend": 1, "trap": 1, "valid": 1, "invalid": 1, "unknown": 1},
		"status_code": {"50": 1, "525": 1, "45": 1, "505": 1, "5": 1},
		"correction":  {"true": 1},
	}
	if got := p.Reporting(); !maps.EqualFunc(got, wantRep, maps.Equal) {
		t.Errorf("Reporting() = %v, want %v", got, wantRep)
	}
}

func TestCheckerError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("dns down")
	p, _ := New(func(context.Context, []string, []verify.Result, verify.Options) error { return boom }).NewProcessor(ctx, listservice.Input{})
	out := newOut(1)
	if err := processBatch(ctx, p, rowsOf(0, "a@example.com"), out); !errors.Is(err, boom) {
		t.Errorf("ProcessBatch = %v, want %v", err, boom)
	}
	if len(p.Reporting()) != 0 || out[0][0] != "" {
		t.Errorf("a failed batch was counted: %v %q", p.Reporting(), out[0])
	}
}

// A Checker gets zeroed results: nothing from an earlier batch leaks into
// the next one, even when a checker only sets what it found.
func TestResultsZeroedBetweenBatches(t *testing.T) {
	ctx := context.Background()
	check := func(_ context.Context, addrs []string, res []verify.Result, _ verify.Options) error {
		for i, a := range addrs {
			res[i].Address = a
			if strings.HasPrefix(a, "info@") {
				res[i].RoleAccount = true
				res[i].DomainType = "biz"
				res[i].SetCode(verify.CodeDeliverable)
				if a == "info@acme.org" {
					res[i].Corrections = []string{"info@acme.com"}
				}
			} else if res[i].Code == 0 {
				res[i].SetCode(verify.CodeValidSyntax)
			}
		}
		return nil
	}
	p, _ := New(check).NewProcessor(ctx, listservice.Input{EmailIndex: 0})
	out := newOut(2)
	if err := processBatch(ctx, p, rowsOf(0, "info@acme.com", "info@acme.org"), out); err != nil {
		t.Fatal(err)
	}
	out = newOut(2)
	if err := processBatch(ctx, p, rowsOf(0, "jane@acme.com", "info@acme.net"), out); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"valid", "10", "", "false", "", "false", "true", "false"},
		{"safetosend", "50", "biz", "true", "", "false", "true", "false"},
	}
	for i := range want {
		if !slices.Equal(out[i], want[i]) {
			t.Errorf("second batch row %d: %q, want %q", i, out[i], want[i])
		}
	}
}

// ev_duplicate flags an address seen earlier in the list, compared
// trimmed and lower-cased (DedupKey); its first occurrence and empty
// addresses are never duplicates. The pipeline finds the repeats from
// DedupKey and hands them over in Row.Repeat (processBatch plays the
// pipeline's part).
func TestDuplicate(t *testing.T) {
	ctx := context.Background()
	svc := New(SyntaxOnly)
	p, err := svc.NewProcessor(ctx, listservice.Input{EmailIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	batches := []struct {
		addrs []string
		want  []string // ev_duplicate
	}{
		{
			[]string{"ann@example.com", "bob@example.com", "", "Bob@Example.COM"},
			[]string{"false", "false", "false", "true"},
		},
		{
			[]string{" ANN@Example.com\t", "ann@example.com", "", "carol@example.com", "bob@example.com", "ann@example.org", "\u00a0\ufeffcarol@EXAMPLE.com\u200b"},
			[]string{"true", "true", "false", "false", "true", "false", "true"},
		},
		{
			[]string{"Carol@example.com ", "dave@example.com", "  \t"},
			[]string{"true", "false", "false"},
		},
	}
	for bi, b := range batches {
		rows := rowsOf(0, b.addrs...)
		out := newOut(len(b.addrs))
		if err := processBatch(ctx, p, rows, out); err != nil {
			t.Fatal(err)
		}
		for i, a := range b.addrs {
			if got := out[i][5]; got != b.want[i] {
				t.Errorf("batch %d row %d %q: ev_duplicate %q, want %q", bi, i, a, got, b.want[i])
			}
		}
		if bi == 1 {
			// A duplicate keeps its own verdict: the padded copy gets the
			// trimmed address's, the exact repeat its own.
			if out[0][0] != "valid" || out[0][1] != "10" || out[0][6] != "true" {
				t.Errorf("padded duplicate: %q", out[0])
			}
			if out[1][0] != "valid" || out[1][6] != "true" {
				t.Errorf("exact duplicate: %q", out[1])
			}
		}
	}
	// Rows are counted in the reporting whether or not they repeat.
	if got := p.Reporting()["status"]; got["valid"]+got["invalid"] != 14 {
		t.Errorf("Reporting() status = %v, want 14 rows", got)
	}
	// The duplicates are counted as the rows flag them (6 above).
	if got := p.Reporting()["duplicate"]["true"]; got != 6 {
		t.Errorf("Reporting() duplicate = %d, want 6", got)
	}
	for in, want := range map[string]string{"": "", " \t ": "", "A@B.C": "a@b.c", "\ufeffÄ@b.c ": "ä@b.c"} {
		if got := svc.DedupKey(in); got != want {
			t.Errorf("DedupKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// The engine's checker fills every column: list classification (domain
// type, role accounts) and typo corrections, the first one reported.
func TestEngineChecker(t *testing.T) {
	ctx := context.Background()
	e := &verify.Engine{Lists: emaillists.Default, Typos: typo.Default()} // offline: no DNS, no SMTP
	p, err := New(EngineChecker(e)).NewProcessor(ctx, listservice.Input{EmailIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr string
		want []string
	}{
		{"ann@example.com", []string{"valid", "10", "biz", "false", "", "false", "true", "false"}},
		{"info@example.com", []string{"valid", "10", "biz", "true", "", "false", "true", "false"}},
		{"john@gmail.com", []string{"valid", "10", "freeisp", "false", "", "false", "true", "false"}},
		{"x@mailinator.com", []string{"trap", "525", "disposable", "false", "", "false", "false", "false"}},
		{"abuse@example.com", []string{"invalid", "500", "biz", "true", "", "false", "false", "false"}},
		// Corrections: a syntax error with a fix, and a provider's typo,
		// which is invalid even though its syntax is fine.
		{"b@@example.org", []string{"invalid", "155", "", "false", "b@example.org", "false", "false", "false"}},
		{"john@gmial.com", []string{"invalid", "505", "freeisp", "false", "john@gmail.com", "false", "false", "false"}},
		{"john@gmail.con", []string{"invalid", "200", "", "false", "john@gmail.com", "false", "false", "false"}},
		{" John@Gmail.com ", []string{"valid", "10", "freeisp", "false", "", "true", "true", "false"}},
		// A typo whose correction would be a spreadsheet formula: the
		// verdict is the typo's, the correction is not offered (issue 30).
		{"=2+3@gmial.com", []string{"invalid", "505", "freeisp", "false", "", "false", "false", "false"}},
		{"-x@gmial.com", []string{"invalid", "505", "freeisp", "false", "", "false", "false", "false"}},
	}
	addrs := make([]string, len(tests))
	for i, tt := range tests {
		addrs[i] = tt.addr
	}
	out := newOut(len(tests))
	if err := processBatch(ctx, p, rowsOf(1, addrs...), out); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		if !slices.Equal(out[i], tt.want) {
			t.Errorf("%q: got %q, want %q", tt.addr, out[i], tt.want)
		}
	}
}

// The list's maximum age and history tenant reach the checker with SMTP
// on, and verdicts from the history are marked in their column and counted.
func TestMaxAgeAndFromHistory(t *testing.T) {
	ctx := context.Background()
	week := 7 * 24 * time.Hour
	var got []verify.Options
	check := func(_ context.Context, addrs []string, res []verify.Result, o verify.Options) error {
		got = append(got, o)
		for i, a := range addrs {
			res[i] = verify.Result{Address: a}
			res[i].SetCode(verify.CodeDeliverable)
			res[i].FromHistory = strings.HasPrefix(a, "old")
		}
		return nil
	}
	for _, maxAge := range []*time.Duration{nil, &week} {
		got = nil
		p, err := New(check).NewProcessor(ctx, listservice.Input{EmailIndex: 0, MaxAge: maxAge, HistoryTenant: "namespace/team-a"})
		if err != nil {
			t.Fatal(err)
		}
		out := newOut(3)
		if err := processBatch(ctx, p, rowsOf(0, "old1@example.com", "new@example.com", "old2@example.com"), out); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].SMTP || got[0].MaxAge != maxAge || got[0].Tenant != "namespace/team-a" {
			t.Errorf("checker options %+v, want SMTP, max age %v and the list's tenant", got, maxAge)
		}
		if col := len(columns) - 1; out[0][col] != "true" || out[1][col] != "false" || out[2][col] != "true" {
			t.Errorf("ev_from_history: %q %q %q", out[0][col], out[1][col], out[2][col])
		}
		if n := p.Reporting()["from_history"]["true"]; n != 2 {
			t.Errorf("reporting from_history = %v, want 2", p.Reporting())
		}
	}
}

// ShardKey is the domain of DedupKey's form, so that every spelling of
// one domain (and every repeat of an address) goes to one shard.
func TestShardKey(t *testing.T) {
	var _ listservice.HostSharder = New(SyntaxOnly)
	for _, tc := range []struct{ in, want string }{
		{"Foo@GMAIL.com", "gmail.com"},
		{"  foo@gmail.com ", "gmail.com"},
		{"a@b@Example.ORG", "example.org"},
		{"x@BÜCHER.de", "xn--bcher-kva.de"},
		{"x@xn--bcher-kva.DE", "xn--bcher-kva.de"},
		{"no-at-sign", ""},
		{"trailing@", ""},
		{"", ""},
	} {
		if got := New(SyntaxOnly).ShardKey(tc.in); got != tc.want {
			t.Errorf("ShardKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
