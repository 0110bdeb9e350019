package pipeline

import (
	"context"
	"testing"

	"github.com/emaildata/emaildata/internal/blobstore"
)

// TestRestrict: fields keep only the chosen service columns; IndividualOnly
// blanks household matches of email_append.
func TestRestrict(t *testing.T) {
	ctx := context.Background()
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	keys := blobstore.ListKeys{UID: "u"}
	plan := &Plan{Delimiter: ',', OutputHeader: []string{"first", "last", "zip", "email", "email_match_type"}, Columns: []string{"email", "email_match_type"}}
	src := "first,last,zip,email,email_match_type\n" +
		"Ann,Lee,02138,ann@x.test,Individual\n" +
		"Bob,Lee,02138,carl@x.test,Household\n" +
		"Dee,Roe,10001,,\n"
	if err := store.WriteAll(ctx, "lists/u/result/l-1-results.csv", []byte(src), nil); err != nil {
		t.Fatal(err)
	}
	res := &Outcome{Key: "lists/u/result/l-1-results.csv", FileName: "l-1-results.csv"}
	for _, tc := range []struct {
		name string
		d    Delivery
		want string
	}{
		{"individual only", Delivery{IndividualOnly: true}, "first,last,zip,email,email_match_type\nAnn,Lee,02138,ann@x.test,Individual\nBob,Lee,02138,,\nDee,Roe,10001,,\n"},
		{"fields", Delivery{Fields: []string{"email_match_type"}}, "first,last,zip,email_match_type\nAnn,Lee,02138,Individual\nBob,Lee,02138,Household\nDee,Roe,10001,\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Restrict(ctx, store, keys, plan, res, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := store.ReadAll(ctx, out.Key)
			if string(got) != tc.want || out.Rows != 3 || out.Bytes != int64(len(got)) {
				t.Errorf("got %q (%d rows), want %q", got, out.Rows, tc.want)
			}
		})
	}
}
