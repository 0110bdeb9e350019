package listfile

import "testing"

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
