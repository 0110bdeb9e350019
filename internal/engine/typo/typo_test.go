package typo

import (
	"reflect"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	tests := []struct {
		in   string
		want []string // nil: no suggestion
	}{
		// misspelt provider domains
		{"john@gmail.con", []string{"john@gmail.com"}},
		{"john@gmial.com", []string{"john@gmail.com"}},
		{"john@hotmial.com", []string{"john@hotmail.com"}},
		{"john@yaho.com", []string{"john@yahoo.com"}},
		{"john@gmail.co", []string{"john@gmail.com"}},
		{"john@gmai.com", []string{"john@gmail.com"}},
		{"john@gmaill.com", []string{"john@gmail.com"}},
		{"john@gmail.cm", []string{"john@gmail.com"}},
		{"john@gmail.comm", []string{"john@gmail.com"}},
		{"john@gmial.con", []string{"john@gmail.com"}},
		{"john@outlok.com", []string{"john@outlook.com"}},
		{"john@hotmail.cmo", []string{"john@hotmail.com"}},
		{"john@icluod.com", []string{"john@icloud.com"}},
		{"john@hotmial.co.uk", []string{"john@hotmail.co.uk"}},
		{"john@yahoo.co.ukk", []string{"john@yahoo.co.uk"}},
		{"john@oal.com", []string{"john@aol.com"}},
		{"john@aol.con", []string{"john@aol.com"}},
		{"john@comcast.nte", []string{"john@comcast.net"}},
		{"John.Smith@Gmial.COM", []string{"John.Smith@gmail.com"}},
		{"john@yahoo.cm", []string{"john@yahoo.com"}},
		{"john@gmail.om", []string{"john@gmail.com"}},
		{"john@comcast.ne", []string{"john@comcast.net"}},
		{"john@yahoo.fe", []string{"john@yahoo.fr", "john@yahoo.de"}},
		{"john@hotmal.con", []string{"john@hotmail.com"}},
		{"john@gmal.cim", []string{"john@gmail.com"}},
		// never changed: known providers and plausible distinct domains
		{"john@gmail.com", nil},
		{"John@GMAIL.COM", nil},
		{"john@mail.com", nil},
		{"john@email.com", nil},
		{"john@ymail.com", nil},
		{"john@gmx.de", nil},
		{"john@gmx.at", nil},
		{"john@gmx.net", nil},
		{"john@web.de", nil},
		{"john@me.com", nil},
		{"john@mac.com", nil},
		{"john@live.com", nil},
		{"john@hotmail.de", nil},
		{"john@cloud.com", nil},
		{"john@all.com", nil},
		{"john@ao.com", nil},
		{"john@msm.com", nil},
		{"john@136.com", nil},
		{"john@gmx.es", nil},
		{"john@outlook.de", nil},
		{"john@gnail.co", nil},
		{"john@hotmail.be", nil},
		{"john@yahoo.ie", nil},
		{"john@yahoo.gr", nil},
		{"john@yahoo.com.ar", nil},
		{"john@gmx.it", nil},
		{"john@gmail.com.br", nil},
		{"john@example.com", nil},
		{"john@company.de", nil},
		{"john@bbc.co.uk", nil},
		{"john@example.xyz", nil},
		{"john@mail.example.com", nil},
		// more than one @
		{"john@@gmail.com", []string{"john@gmail.com"}},
		{"john@@@example.com", []string{"john@example.com"}},
		{"john@gmail@com", []string{"john@gmail.com"}},
		{"john@@gmial.com", []string{"john@gmail.com"}},
		{"john@yahoo@co.uk", []string{"john@yahoo.co.uk"}},
		{"john@doe@gmail.com", nil},
		{"john@gmail@notatld", nil},
		{"@gmail.com", nil},
		{"john@", nil},
		{"johngmail.com", nil},
		{"", nil},
		// comma for dot, only in the domain
		{"john@gmail,com", []string{"john@gmail.com"}},
		{"john@example,co,uk", []string{"john@example.co.uk"}},
		{"john@gmial,com", []string{"john@gmail.com"}},
		{"john,doe@example.com", nil},
		{"john,doe@gmial.com", nil},
		{"\"john doe\"@gmial.com", nil},
		{"john@gmail..com", []string{"john@gmail.com"}},
		// missing dot before the TLD
		{"john@gmailcom", []string{"john@gmail.com"}},
		{"john@yahoocouk", []string{"john@yahoo.co.uk"}},
		{"john@hotmailcouk", []string{"john@hotmail.co.uk"}},
		{"john@examplecom", []string{"john@example.com"}},
		{"john@examplecouk", []string{"john@example.co.uk"}},
		{"john@example-shopnet", []string{"john@example-shop.net"}},
		{"john@gmialcom", []string{"john@gmail.com"}},
		{"john@gmai.lcom", []string{"john@gmail.com"}},
		{"john@yahoo.couk", []string{"john@yahoo.co.uk"}},
		{"john@gmail", []string{"john@gmail.com"}},
		{"john@yahoo", []string{"john@yahoo.com", "john@yahoo.co.uk", "john@yahoo.fr"}},
		{"john@bosch", nil},
		{"john@localhost", nil},
		{"john@com", nil},
		// leading and trailing junk, alone or with the above
		{" <john@gmail.con>, ", []string{"john@gmail.com"}},
		{"mailto:john@gmail.com", []string{"john@gmail.com"}},
		{"MAILTO:<john@example.com>", []string{"john@example.com"}},
		{"john@gmail.com.", []string{"john@gmail.com"}},
		{"'john@example.com';", []string{"john@example.com"}},
		{"(john@gmailcom)", []string{"john@gmail.com"}},
		{"john @gmail.com", []string{"john@gmail.com"}},
		{"john@gmail .com", []string{"john@gmail.com"}},
		{"john@ gmial.com", []string{"john@gmail.com"}},
		// an unknown TLD one edit from a common one
		{"john@example.con", []string{"john@example.com"}},
		{"john@example.ogr", []string{"john@example.org"}},
		{"john@example.nte", []string{"john@example.net"}},
		{"john@example.local", nil},
	}
	c := Default()
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := c.Suggest(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Suggest(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if len(got) > MaxSuggestions {
				t.Errorf("%d suggestions", len(got))
			}
			for _, s := range got {
				if strings.Count(s, "@") != 1 || s == tt.in {
					t.Errorf("bad suggestion %q", s)
				}
			}
		})
	}
}

func TestSuggestCustomProviders(t *testing.T) {
	c := New([]string{" Example.ORG. ", "example.org", "", "nodot", "acme.co.uk"})
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"a@exmaple.org", []string{"a@example.org"}},
		{"a@acme.co.uj", []string{"a@acme.co.uk"}},
		{"a@gmial.com", nil}, // not a provider of this corrector
		{"a@nodot", nil},
	} {
		if got := c.Suggest(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := len(c.providers); got != 2 {
		t.Errorf("%d providers", got)
	}
}

func TestDefaultProviders(t *testing.T) {
	p := DefaultProviders()
	if len(p) < 50 {
		t.Errorf("%d default providers", len(p))
	}
	p[0] = "changed"
	if DefaultProviders()[0] != "gmail.com" {
		t.Error("DefaultProviders returned the package's slice")
	}
	// No default provider is corrected into another one.
	c := Default()
	for _, d := range DefaultProviders() {
		if got := c.Suggest("a@" + d); got != nil {
			t.Errorf("provider %s corrected to %q", d, got)
		}
	}
}

func TestDist(t *testing.T) {
	for _, tt := range []struct {
		a, b string // as typed, intended
		max  int
		want int
	}{
		{"gmail", "gmail", 2, 0},
		{"gmial", "gmail", 2, 1},  // swap
		{"gmal", "gmail", 2, 1},   // missing letter
		{"gmaill", "gmail", 2, 1}, // repeated letter
		{"gmaik", "gmail", 2, 1},  // neighbour key
		{"gnail", "gmail", 2, 1},  // neighbour key
		{"gmaio", "gmail", 2, 1},  // o is next to l
		{"gmaiz", "gmail", 2, 2},  // z is not
		{"gmai1", "gmail", 2, 1},  // look-alike
		{"qmail", "gmail", 2, 2},  // not a neighbour
		{"gmasil", "gmail", 2, 1}, // extra neighbour key
		{"gmaxil", "gmail", 2, 2}, // extra key elsewhere
		{"3mail", "email", 2, 2},  // digits do not neighbour letters
		{"hotmial", "hotmail", 2, 1},
		{"htomial", "hotmail", 2, 2},
		{"ab", "ba", 1, 1},
		{"abdc", "abcd", 1, 1},
		{"abc", "xyz", 1, 2},
		{"a", "abcd", 1, 2},
		{"", "abc", 3, 3},
		{"con", "com", 1, 1},
		{"cpm", "com", 1, 1},
		{"ckm", "com", 1, 1},
		{"cm", "com", 1, 1},
		{"xom", "com", 1, 1},
		{"cam", "com", 1, 2},
	} {
		if got := dist(tt.a, tt.b, tt.max); got != tt.want {
			t.Errorf("dist(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.max, got, tt.want)
		}
	}
}

func TestSuggestNoAllocs(t *testing.T) {
	c := Default()
	for _, in := range []string{"john.smith@acme-corp.com", "jane@gmail.com", "x@bbc.co.uk", "Info@company.de", "a@mail.example.com"} {
		if n := testing.AllocsPerRun(100, func() { c.Suggest(in) }); n != 0 {
			t.Errorf("Suggest(%q): %v allocations", in, n)
		}
	}
}

var benchInputs = []string{
	"john.smith@acme-corp.com",
	"jane@gmail.com",
	"info@company.de",
	"someone@bbc.co.uk",
	"m.mueller@web.de",
	"sales@startup.io",
	"user123@hotmail.com",
	"x@mail.example.com",
	"john@gmial.com",   // typo
	"jane@yahoo.con",   // typo
	"bob@gmailcom",     // missing dot
	"amy@example,com",  // comma
	"tom@@outlook.com", // doubled @
	"lee@company.org",
	"kim@university.edu",
	"max@firma.at",
}

// BenchmarkSuggest runs a mix: mostly valid addresses (no suggestion), one in
// three with a typo.
func BenchmarkSuggest(b *testing.B) {
	c := Default()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Suggest(benchInputs[i%len(benchInputs)])
	}
}

// BenchmarkSuggestValid runs only addresses with nothing to suggest.
func BenchmarkSuggestValid(b *testing.B) {
	c := Default()
	valid := []string{"john.smith@acme-corp.com", "jane@gmail.com", "info@company.de", "someone@bbc.co.uk",
		"sales@startup.io", "lee@company.org", "kim@university.edu", "x@mail.example.com"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Suggest(valid[i%len(valid)])
	}
}

func FuzzSuggest(f *testing.F) {
	for _, s := range []string{"john@gmail.con", "a@@b", "x@yahoocouk", "<a@b,c>", "@", "mailto:", "a@b@c@d", "é@exämple.con"} {
		f.Add(s)
	}
	c := Default()
	f.Fuzz(func(t *testing.T, in string) {
		got := c.Suggest(in)
		if len(got) > MaxSuggestions {
			t.Fatalf("%d suggestions", len(got))
		}
		for _, s := range got {
			if strings.Count(s, "@") != 1 || s == in {
				t.Fatalf("Suggest(%q): bad suggestion %q", in, s)
			}
		}
	})
}
