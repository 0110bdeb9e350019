package main

import (
	"slices"
	"testing"
)

// TestAnswersInOrder: the result file's rows are scored against the input
// rows they answer, whatever their order, and a missing row is an error.
func TestAnswersInOrder(t *testing.T) {
	hdr := []string{"email", "ev_status", "ev_status_code", "ev_domain_type", "ev_role_account", "ev_correction"}
	rec := func(a, code, corr string) []string { return []string{a, "x", code, "biz", "false", corr} }
	rows := []string{"a@x.test", "b@y.test", "a@x.test", "c@gmial.com"}
	for _, tc := range []struct {
		name    string
		recs    [][]string
		want    []string
		wantErr bool
	}{
		{"input order", [][]string{hdr, rec("a@x.test", "50", ""), rec("b@y.test", "400", ""), rec("a@x.test", "50", ""), rec("c@gmial.com", "400", "c@gmail.com")},
			[]string{truthDeliverable, truthMissing, truthDeliverable, truthTypo}, false},
		{"another order, duplicates in turn", [][]string{hdr, rec("b@y.test", "400", ""), rec("c@gmial.com", "400", "c@gmail.com"), rec("a@x.test", "50", ""), rec("a@x.test", "45", "")},
			[]string{truthDeliverable, truthMissing, truthCatchAll, truthTypo}, false},
		{"a row missing", [][]string{hdr, rec("a@x.test", "50", ""), rec("b@y.test", "400", ""), rec("c@gmial.com", "400", "c@gmail.com"), rec("b@y.test", "400", "")},
			nil, true},
		{"no status column", [][]string{{"email"}, {"a@x.test"}, {"b@y.test"}, {"a@x.test"}, {"c@gmial.com"}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pred, _, err := answersInOrder(tc.recs, rows)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(pred, tc.want) {
				t.Errorf("pred = %v, want %v", pred, tc.want)
			}
		})
	}
}
