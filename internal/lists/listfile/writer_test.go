package listfile

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestWriteFields(t *testing.T) {
	tests := []struct {
		name   string
		delim  byte
		crlf   bool
		fields []string
		want   string
	}{
		{"plain", ',', false, []string{"a", "b", "c"}, "a,b,c\n"},
		{"crlf", ',', true, []string{"a", "b"}, "a,b\r\n"},
		{"delimiter quoted", ',', false, []string{"Smith, John", "x"}, "\"Smith, John\",x\n"},
		{"quote doubled", ',', false, []string{`say "hi"`, `"`}, `"say ""hi""",""""` + "\n"},
		{"LF and CR quoted", ',', false, []string{"a\nb", "c\rd"}, "\"a\nb\",\"c\rd\"\n"},
		{"other delimiter not quoted", '|', false, []string{"a,b", "c|d"}, "a,b|\"c|d\"\n"},
		{"tab", '\t', false, []string{"a b", "c\td"}, "a b\t\"c\td\"\n"},
		{"empty fields", ',', false, []string{"", "", ""}, ",,\n"},
		{"single empty field", ',', false, []string{""}, "\"\"\n"},
		{"no fields", ',', false, nil, "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, tt.delim, tt.crlf)
			if err := w.WriteFields(tt.fields); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got %q, want %q", buf.String(), tt.want)
			}
			if len(tt.fields) == 0 {
				return
			}
			// What we write reads back to the same fields.
			rec, err := NewReader(&buf, Dialect{Delimiter: tt.delim, EmailColumn: 1}, Limits{}).Next()
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Fields(); !reflect.DeepEqual(got, tt.fields) {
				t.Errorf("read back %q, want %q", got, tt.fields)
			}
		})
	}
}

func TestWriteRaw(t *testing.T) {
	tests := []struct {
		name    string
		delim   byte
		crlf    bool
		raw     string
		nfields int
		width   int
		extra   []string
		want    string
	}{
		{"append", ',', false, "a,b", 2, 2, []string{"valid", "0.9"}, "a,b,valid,0.9\n"},
		{"pad short row", ',', false, "a", 1, 3, []string{"valid"}, "a,,,valid\n"},
		{"wider row not padded", ',', false, "a,b,c,d", 4, 3, []string{"x"}, "a,b,c,d,x\n"},
		{"raw kept verbatim", ',', true, `"a ""q""",b"c`, 2, 2, []string{"x"}, `"a ""q""",b"c,x` + "\r\n"},
		{"extra quoted", '|', false, "a|b", 2, 2, []string{"x|y", `"`, "a,b"}, `a|b|"x|y"|""""|a,b` + "\n"},
		{"no extra", '\t', false, "a\tb", 2, 4, nil, "a\tb\t\t\n"},
		{"empty record stays a record", ',', false, "", 1, 1, nil, "\"\"\n"},
		{"empty record padded", ',', false, "", 1, 2, []string{"x"}, ",,x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, tt.delim, tt.crlf)
			if err := w.WriteRaw([]byte(tt.raw), tt.nfields, tt.width, tt.extra); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got %q, want %q", buf.String(), tt.want)
			}
		})
	}
}

type failWriter struct{}

var errFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errFull }

func TestWriterError(t *testing.T) {
	w := NewWriter(failWriter{}, ',', false)
	big := strings.Repeat("x", 100<<10)
	err := w.WriteRaw([]byte(big), 1, 1, nil)
	if !errors.Is(err, errFull) {
		t.Fatalf("err = %v", err)
	}
	if err := w.WriteFields([]string{"a"}); !errors.Is(err, errFull) {
		t.Fatalf("error not sticky: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, errFull) {
		t.Fatalf("Flush: %v", err)
	}
}

func TestSynthesizeHeader(t *testing.T) {
	tests := []struct {
		width, email int
		want         []string
	}{
		{3, 2, []string{"column_1", "email", "column_3"}},
		{1, 1, []string{"email"}},
		{2, 3, []string{"column_1", "column_2", "email"}},
	}
	for _, tt := range tests {
		if got := SynthesizeHeader(tt.width, tt.email); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SynthesizeHeader(%d, %d) = %q, want %q", tt.width, tt.email, got, tt.want)
		}
	}
	if got, want := PadHeader([]string{"id", "email"}, 4), []string{"id", "email", "column_3", "column_4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("PadHeader = %q", got)
	}
	if got := PadHeader([]string{"a", "b"}, 1); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("PadHeader narrower = %q", got)
	}
}
