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

// TestJobsVariant: ours-jobs:v sets the shard-by setting and gives the
// run a key prefix of its own.
func TestJobsVariant(t *testing.T) {
	for _, tc := range []struct {
		name, fleetURL, v, wantBy, wantURL string
	}{
		{"no variant", "redis://127.0.0.1:6379/0?prefix=j1:", "", "", "redis://127.0.0.1:6379/0?prefix=j1:"},
		{"domain", "redis://127.0.0.1:6379/0?prefix=j1:", "domain", "domain", "redis://127.0.0.1:6379/0?prefix=j1%3Adomain%3A"},
		{"no prefix", "redis://127.0.0.1:6379/2", "rows", "rows", "redis://127.0.0.1:6379/2?prefix=rows%3A"},
		{"no fleet", "", "rows", "rows", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := jobsSettings{fleetURL: tc.fleetURL}.variant(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if js.shardBy != tc.wantBy || js.fleetURL != tc.wantURL {
				t.Errorf("got shard-by %q, URL %q; want %q, %q", js.shardBy, js.fleetURL, tc.wantBy, tc.wantURL)
			}
		})
	}
}
