package v1alpha1

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/emaildata/emaildata/internal/lists/listfile"
)

func TestListFormatDialect(t *testing.T) {
	cases := []struct {
		name   string
		f      ListFormat
		delim  byte
		header bool
		col    listfile.Column
	}{
		{"defaults: tab, no header, first column", ListFormat{Name: "a.csv"}, '\t', false, 1},
		{"comma with header, column 4", ListFormat{Name: "a.csv", Delimiter: DelimiterComma, Header: ptr.To(true), EmailColumn: 4}, ',', true, 4},
		{"pipe, explicit false header, last allowed column", ListFormat{Name: "a.csv", Delimiter: DelimiterPipe, Header: ptr.To(false), EmailColumn: listfile.MaxColumn}, '|', false, listfile.MaxColumn},
	}
	for _, tc := range cases {
		d, err := tc.f.Dialect()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if d.Delimiter != tc.delim || d.Header != tc.header || d.EmailColumn != tc.col {
			t.Errorf("%s: got %q/%v/%d, want %q/%v/%d", tc.name, d.Delimiter, d.Header, d.EmailColumn, tc.delim, tc.header, tc.col)
		}
		// Checked once here: Validated must hand back the same value.
		if again, err := d.Validated(); err != nil || again != d {
			t.Errorf("%s: Validated() = %+v, %v; want the same checked dialect", tc.name, again, err)
		}
	}
}
