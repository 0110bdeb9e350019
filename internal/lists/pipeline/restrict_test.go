package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
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

// A zipped result is read and delivered zipped, streaming both ways.
func TestRestrictZip(t *testing.T) {
	ctx := context.Background()
	store := memStore(t)
	keys := blobstore.ListKeys{UID: "z"}
	plan := &Plan{Delimiter: ',', Zip: true, ZipEntry: "in.csv", OutputHeader: []string{"email", "x", "y"}, Columns: []string{"x", "y"}}
	var src strings.Builder
	src.WriteString("email,x,y\n")
	var want strings.Builder
	want.WriteString("email,y\n")
	for i := range 20000 {
		fmt.Fprintf(&src, "u%d@x.test,%d,\"a, %d\"\n", i, i, i)
		fmt.Fprintf(&want, "u%d@x.test,\"a, %d\"\n", i, i)
	}
	put(t, store, "lists/z/result/l-1-results.zip", makeZip(t, zipFile{name: "l-1-results.csv", data: src.String()}))
	out, err := Restrict(ctx, store, keys, plan, &Outcome{Key: "lists/z/result/l-1-results.zip", FileName: "l-1-results.zip"}, Delivery{Fields: []string{"y"}})
	if err != nil {
		t.Fatal(err)
	}
	data := get(t, store, out.Key)
	sum := sha256.Sum256(data)
	if out.Rows != 20000 || out.Bytes != int64(len(data)) || out.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("outcome %+v for %d bytes", out, len(data))
	}
	if got := readZip(t, data); got["l-1-results.csv"] != want.String() || len(got) != 1 {
		t.Errorf("delivered zip holds %d entries, want the narrowed rows in l-1-results.csv", len(got))
	}
}
