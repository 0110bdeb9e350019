package listfile

import (
	"errors"
	"strings"
	"testing"
)

func TestParseColumn(t *testing.T) {
	tests := []struct {
		in        string
		want      Column
		wantIndex int
		wantErr   bool
	}{
		{in: "1", want: 1, wantIndex: 0},
		{in: "3", want: 3, wantIndex: 2},
		{in: "1000", want: 1000, wantIndex: 999},
		{in: "0", wantErr: true},
		{in: "1001", wantErr: true},
		{in: "-2", wantErr: true},
		{in: "x", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseColumn(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseColumn(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && (got != tt.want || got.Index() != tt.wantIndex) {
			t.Errorf("ParseColumn(%q) = %d (index %d), want %d (index %d)", tt.in, got, got.Index(), tt.want, tt.wantIndex)
		}
	}
}

func TestNewDialectChecksOnce(t *testing.T) {
	tests := []struct {
		name   string
		delim  byte
		col    Column
		errMsg string // "" when valid
	}{
		{name: "comma", delim: ',', col: 1},
		{name: "tab, column 1000", delim: '\t', col: MaxColumn},
		{name: "bad delimiter", delim: ';', col: 1, errMsg: `unsupported delimiter ';': use comma, pipe or tab`},
		{name: "column 0", delim: '|', col: 0, errMsg: "email column must be 1 or greater, got 0"},
	}
	for _, tt := range tests {
		d, err := NewDialect(tt.delim, true, tt.col)
		if tt.errMsg != "" {
			// The same error Validate gives for the same settings.
			if !errors.Is(err, ErrInvalidDialect) || err.Error() != tt.errMsg {
				t.Errorf("%s: NewDialect error %v, want %q", tt.name, err, tt.errMsg)
			}
			continue
		}
		if err != nil || !d.trusted() || d.check() != nil {
			t.Errorf("%s: NewDialect = %+v, %v; want a trusted dialect", tt.name, d, err)
		}
		// A field changed after the check is not trusted any more.
		d.EmailColumn = 0
		if d.trusted() || !errors.Is(d.check(), ErrInvalidDialect) {
			t.Errorf("%s: changed column still trusted", tt.name)
		}
		if _, err := Scan(strings.NewReader("a\n"), d, Limits{}, 0, 1); !errors.Is(err, ErrInvalidDialect) {
			t.Errorf("%s: Scan with a changed column: %v, want ErrInvalidDialect", tt.name, err)
		}
	}
}
