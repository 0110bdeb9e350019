package people

import (
	"context"
	"errors"
	"io"
	"testing"
)

// matchPeople: two households and a person without one.
func matchPeople() []Record {
	h1 := func(email, first, middle, last string) Record {
		r := person(email, first, last, "H1")
		r.Middle, r.Street, r.City, r.State, r.Zip = middle, "12 Oak Street", "Denver", "CO", "80203"
		return r
	}
	h2 := func(email, first, last string) Record {
		r := person(email, first, last, "H2")
		r.Street, r.City, r.State, r.Zip = "400 Elm Ave Apt 3", "Austin", "TX", "78701"
		return r
	}
	solo := person("solo@example.org", "Sam", "Solo", "")
	return []Record{
		h1("ann.lee@example.com", "Ann", "Q", "Lee"),
		h1("bob.lee@example.com", "Robert", "J", "Lee"),
		h1("cy.lee@example.com", "Cyrus", "", "Lee"),
		h2("dana@example.net", "Dana", "Kim"),
		h2("eve.park@example.net", "Eve", "Park"),
		h2("mj@example.net", "Mary-Jo", "O'Neil"),
		solo,
	}
}

type matchCase struct {
	name   string
	in     Input
	level  Level
	email  string // the matched record
	conf   int
	ev     Evidence
	groups []string // for the ordering checks
}

func matchCases() []matchCase {
	ann := "ann.lee@example.com"
	annMD5, annSHA1 := EmailMD5(ann), EmailSHA1(ann)
	postal := func(in Input) Input {
		in.Street, in.City, in.State, in.Zip = "12 Oak St.", "denver", "co", "80203-1111"
		return in
	}
	full := Evidence{KeyEmail, NameFull, PostalFull}
	return []matchCase{
		// Individual, plain text.
		{"email+name+postal", postal(Input{Email: ann, First: "Ann", Last: "Lee"}), LevelIndividual, ann, 98, full, []string{"plain/full"}},
		{"email+name", Input{Email: ann, First: "Ann", Last: "Lee"}, LevelIndividual, ann, 92, Evidence{KeyEmail, NameFull, PostalNotCompared}, []string{"plain/name"}},
		{"email only", Input{Email: ann}, LevelIndividual, ann, 72, Evidence{KeyEmail, NameNotCompared, PostalNotCompared}, []string{"plain/email"}},
		{"email not normalised", Input{Email: "  Ann.Lee@EXAMPLE.com "}, LevelIndividual, ann, 72, Evidence{KeyEmail, NameNotCompared, PostalNotCompared}, nil},
		{"email+first", Input{Email: ann, First: "ann"}, LevelIndividual, ann, 84, Evidence{KeyEmail, NamePartial, PostalNotCompared}, nil},
		{"email+initial+last", Input{Email: ann, First: "A.", Last: "LEE"}, LevelIndividual, ann, 86, Evidence{KeyEmail, NamePartial, PostalNotCompared}, nil},
		{"email+name+zip", Input{Email: ann, First: "Ann", Last: "Lee", Zip: "80203"}, LevelIndividual, ann, 95, Evidence{KeyEmail, NameFull, PostalPartial}, nil},
		{"email+name+street", Input{Email: ann, First: "Ann", Last: "Lee", Street: "12 oak street"}, LevelIndividual, ann, 95, Evidence{KeyEmail, NameFull, PostalPartial}, nil},
		{"email+name+street with unit+city/state", Input{Email: ann, First: "Ann", Last: "Lee", Street: "12 Oak St #4", City: "Denver", State: "CO"}, LevelIndividual, ann, 98, full, nil},
		{"email+name, moved (zip differs)", Input{Email: ann, First: "Ann", Last: "Lee", Zip: "10001"}, LevelIndividual, ann, 88, Evidence{KeyEmail, NameFull, PostalConflict}, nil},
		{"email+postal, no name", postal(Input{Email: ann}), LevelIndividual, ann, 78, Evidence{KeyEmail, NameNotCompared, PostalFull}, nil},
		{"name punctuation and case", Input{Email: "mj@example.net", First: "MARYJO", Last: "oneil"}, LevelIndividual, "mj@example.net", 92, Evidence{KeyEmail, NameFull, PostalNotCompared}, nil},
		{"middle initial agrees", Input{Email: "bob.lee@example.com", First: "Robert", Middle: "John", Last: "Lee"}, LevelIndividual, "bob.lee@example.com", 92, Evidence{KeyEmail, NameFull, PostalNotCompared}, nil},

		// Individual, hashed: the same evidence scores 5 less, MD5 = SHA-1.
		{"md5+name+postal", postal(Input{MD5Email: annMD5, First: "Ann", Last: "Lee"}), LevelIndividual, ann, 93, Evidence{KeyMD5, NameFull, PostalFull}, []string{"md5/full"}},
		{"sha1+name+postal", postal(Input{SHA1Email: annSHA1, First: "Ann", Last: "Lee"}), LevelIndividual, ann, 93, Evidence{KeySHA1, NameFull, PostalFull}, []string{"sha1/full"}},
		{"md5+name", Input{MD5Email: annMD5, First: "Ann", Last: "Lee"}, LevelIndividual, ann, 87, Evidence{KeyMD5, NameFull, PostalNotCompared}, []string{"md5/name"}},
		{"sha1+name", Input{SHA1Email: annSHA1, First: "Ann", Last: "Lee"}, LevelIndividual, ann, 87, Evidence{KeySHA1, NameFull, PostalNotCompared}, []string{"sha1/name"}},
		{"md5 only", Input{MD5Email: annMD5}, LevelIndividual, ann, 67, Evidence{KeyMD5, NameNotCompared, PostalNotCompared}, []string{"md5/email"}},
		{"sha1 only", Input{SHA1Email: annSHA1}, LevelIndividual, ann, 67, Evidence{KeySHA1, NameNotCompared, PostalNotCompared}, []string{"sha1/email"}},
		{"md5 in the email field, upper-case", Input{Email: toUpper(annMD5)}, LevelIndividual, ann, 67, Evidence{KeyMD5, NameNotCompared, PostalNotCompared}, nil},
		{"sha1 in the email field", Input{Email: annSHA1, First: "Ann", Last: "Lee"}, LevelIndividual, ann, 87, Evidence{KeySHA1, NameFull, PostalNotCompared}, nil},
		{"plain and md5 given: plain wins", Input{Email: ann, MD5Email: annMD5}, LevelIndividual, ann, 72, Evidence{KeyEmail, NameNotCompared, PostalNotCompared}, nil},
		{"unknown plain, known md5", Input{Email: "gone@example.com", MD5Email: annMD5}, LevelIndividual, ann, 67, Evidence{KeyMD5, NameNotCompared, PostalNotCompared}, nil},

		// Household: the email's owner is someone else in the household.
		{"household member by name", Input{Email: ann, First: "Robert", Last: "Lee"}, LevelHousehold, "bob.lee@example.com", 54, Evidence{KeyEmail, NameFull, PostalNotCompared}, []string{"household"}},
		{"household member by name+postal", postal(Input{Email: ann, First: "Robert", Last: "Lee"}), LevelHousehold, "bob.lee@example.com", 60, Evidence{KeyEmail, NameFull, PostalFull}, []string{"household"}},
		{"household member via md5", Input{MD5Email: annMD5, First: "Robert", Last: "Lee"}, LevelHousehold, "bob.lee@example.com", 49, Evidence{KeyMD5, NameFull, PostalNotCompared}, []string{"household"}},
		{"household member by initial", Input{Email: ann, First: "C", Last: "Lee"}, LevelHousehold, "cy.lee@example.com", 51, Evidence{KeyEmail, NamePartial, PostalNotCompared}, []string{"household"}},
		{"household member with another last name", Input{Email: "dana@example.net", First: "Eve", Last: "Park"}, LevelHousehold, "eve.park@example.net", 54, Evidence{KeyEmail, NameFull, PostalNotCompared}, []string{"household"}},
		{"household by last name only", Input{Email: ann, First: "Zed", Last: "Lee"}, LevelHousehold, ann, 30, Evidence{KeyEmail, NameConflict, PostalNotCompared}, []string{"household"}},
		{"household by a member's last name", Input{Email: "dana@example.net", First: "Zed", Last: "Park"}, LevelHousehold, "dana@example.net", 30, Evidence{KeyEmail, NameConflict, PostalNotCompared}, []string{"household"}},
		{"household by address only", Input{Email: "dana@example.net", First: "Zed", Last: "Zulu", Zip: "78701", City: "Austin", State: "TX"}, LevelHousehold, "dana@example.net", 29, Evidence{KeyEmail, NameConflict, PostalPartial}, []string{"household"}},
		{"middle initial differs", Input{Email: "bob.lee@example.com", First: "Robert", Middle: "X", Last: "Lee"}, LevelHousehold, "bob.lee@example.com", 30, Evidence{KeyEmail, NameConflict, PostalNotCompared}, []string{"household"}},

		// By name and postal address alone: the email append rules.
		{"name+postal, no email", postal(Input{First: "Ann", Last: "Lee"}), LevelIndividual, ann, 66, Evidence{KeyNamePostal, NameFull, PostalFull}, nil},
		{"name+zip4", Input{First: "Cyrus", Last: "Lee", Zip4: "80203-1234"}, LevelIndividual, "cy.lee@example.com", 63, Evidence{KeyNamePostal, NameFull, PostalPartial}, nil},
		{"name+street, city, state", Input{First: "eve", Last: "PARK", Street: "400 Elm Avenue", City: "Austin", State: "tx"}, LevelIndividual, "eve.park@example.net", 66, Evidence{KeyNamePostal, NameFull, PostalFull}, nil},
		{"unknown email, then name+postal", postal(Input{Email: "nobody@example.com", First: "Ann", Last: "Lee"}), LevelIndividual, ann, 66, Evidence{KeyNamePostal, NameFull, PostalFull}, nil},
		{"household by street, no email", Input{First: "Zed", Last: "Lee", Street: "12 Oak St", Zip: "80203"}, LevelHousehold, ann, 36, Evidence{KeyNamePostal, NamePartial, PostalFull}, []string{"household"}},
		{"name+zip, nobody of that name, no street", Input{First: "Zed", Last: "Lee", Zip: "80203"}, LevelNone, "", 0, Evidence{}, nil},

		// None.
		{"different person, no link to the household", Input{Email: "dana@example.net", First: "Zed", Last: "Zulu"}, LevelNone, "", 0, Evidence{}, nil},
		{"different person, address differs", Input{Email: "dana@example.net", First: "Zed", Last: "Zulu", Zip: "10001"}, LevelNone, "", 0, Evidence{}, nil},
		{"different person, no household", Input{Email: "solo@example.org", First: "Zed", Last: "Solo2"}, LevelNone, "", 0, Evidence{}, nil},
		{"unknown email", Input{Email: "nobody@example.com", First: "Ann", Last: "Lee"}, LevelNone, "", 0, Evidence{}, nil},
		{"non-email value", Input{Email: "n/a", First: "Ann", Last: "Lee"}, LevelNone, "", 0, Evidence{}, nil},
		{"phone number in email", Input{Email: "555-0100"}, LevelNone, "", 0, Evidence{}, nil},
		{"name only", Input{First: "Ann", Last: "Lee"}, LevelNone, "", 0, Evidence{}, nil},
		{"bad md5", Input{MD5Email: "xyz"}, LevelNone, "", 0, Evidence{}, nil},
		{"empty", Input{}, LevelNone, "", 0, Evidence{}, nil},
	}
}

func TestMatch(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := b.openStore(t)
			ctx := context.Background()
			if err := s.Upsert(ctx, matchPeople()); err != nil {
				t.Fatal(err)
			}
			cases := matchCases()
			items := make([]Input, len(cases))
			for i, c := range cases {
				items[i] = c.in
			}
			got, err := Match(ctx, s, items) // all in one batch
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(cases) {
				t.Fatalf("%d results for %d items", len(got), len(cases))
			}
			for i, c := range cases {
				g := got[i]
				email := ""
				if g.Record != nil {
					email = g.Record.Email
				}
				if g.Level != c.level || email != c.email || g.Confidence != c.conf || g.Evidence != c.ev {
					t.Errorf("%s:\n got %v %q %d %+v\nwant %v %q %d %+v", c.name,
						g.Level, email, g.Confidence, g.Evidence, c.level, c.email, c.conf, c.ev)
				}
				// One item alone gives the same result as in the batch.
				one, err := Match(ctx, s, []Input{c.in})
				if err != nil || one[0].Level != g.Level || one[0].Confidence != g.Confidence {
					t.Errorf("%s alone: %+v, %v", c.name, one[0], err)
				}
			}
		})
	}
}

// TestConfidenceOrdering checks the documented ordering on the table's
// expectations: email+name+postal > email+name > email alone for each key
// kind, plain > MD5 = SHA-1 for the same evidence, and every Individual
// match above every Household match.
func TestConfidenceOrdering(t *testing.T) {
	conf := map[string]int{}
	minIndividual, maxHousehold := 101, -1
	for _, c := range matchCases() {
		for _, g := range c.groups {
			conf[g] = c.conf
		}
		switch c.level {
		case LevelIndividual:
			minIndividual = min(minIndividual, c.conf)
		case LevelHousehold:
			maxHousehold = max(maxHousehold, c.conf)
		}
	}
	for _, k := range []string{"plain", "md5", "sha1"} {
		if !(conf[k+"/full"] > conf[k+"/name"] && conf[k+"/name"] > conf[k+"/email"] && conf[k+"/email"] > 0) {
			t.Errorf("%s: full %d, name %d, email %d", k, conf[k+"/full"], conf[k+"/name"], conf[k+"/email"])
		}
	}
	for _, ev := range []string{"full", "name", "email"} {
		if !(conf["plain/"+ev] > conf["md5/"+ev] && conf["md5/"+ev] == conf["sha1/"+ev]) {
			t.Errorf("%s: plain %d, md5 %d, sha1 %d", ev, conf["plain/"+ev], conf["md5/"+ev], conf["sha1/"+ev])
		}
	}
	if maxHousehold >= minIndividual {
		t.Errorf("a Household match (%d) scores at least an Individual one (%d)", maxHousehold, minIndividual)
	}
	// The bounds of the bands, from the scoring constants.
	lo := scoreIndividual + pointsPostalConflict - penaltyHashed
	hi := scoreHouseholdMember + (pointsFirstExact+pointsLast)/2 + pointsPostalFull
	if hi >= lo {
		t.Errorf("the bands overlap: household up to %d, individual from %d", hi, lo)
	}
	if onlyHi := scoreHouseholdOnly + pointsHouseholdLast + pointsPostalFull; onlyHi >= scoreHouseholdMember+pointsFirstInitial/2+pointsPostalConflict-penaltyHashed {
		t.Errorf("household-only (up to %d) reaches the member band", onlyHi)
	}
}

type errStore struct {
	Store
	lookup, household error
}

func (s errStore) LookupBatch(ctx context.Context, k []Key) ([]*Record, error) {
	if s.lookup != nil {
		return nil, s.lookup
	}
	return s.Store.LookupBatch(ctx, k)
}

func (s errStore) HouseholdBatch(ctx context.Context, ids []string) ([][]Record, error) {
	if s.household != nil {
		return nil, s.household
	}
	return s.Store.HouseholdBatch(ctx, ids)
}

type finderErrStore struct {
	Store
	err error
}

func (s finderErrStore) FindByNamePostal(context.Context, []NamePostalKey) ([][]Record, error) {
	return nil, s.err
}

func TestMatchErrors(t *testing.T) {
	ctx := context.Background()
	s := openURL(t, boltURL(t))
	if err := s.Upsert(ctx, matchPeople()); err != nil {
		t.Fatal(err)
	}
	if _, err := Match(ctx, errStore{Store: s, lookup: io.ErrUnexpectedEOF}, []Input{{Email: "ann.lee@example.com"}}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("lookup error: %v", err)
	}
	// HouseholdBatch is called only for a name conflict.
	hs := errStore{Store: s, household: io.ErrUnexpectedEOF}
	if _, err := Match(ctx, hs, []Input{{Email: "ann.lee@example.com", First: "Ann"}}); err != nil {
		t.Errorf("household lookup without a conflict: %v", err)
	}
	if _, err := Match(ctx, hs, []Input{{Email: "ann.lee@example.com", First: "Bob"}}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("household error: %v", err)
	}
	// The name/postal lookup runs only for items left unmatched.
	fs := finderErrStore{Store: s, err: io.ErrUnexpectedEOF}
	if _, err := Match(ctx, fs, []Input{{Email: "ann.lee@example.com", First: "Ann", Last: "Lee", Zip: "80203"}}); err != nil {
		t.Errorf("name/postal lookup for a matched item: %v", err)
	}
	if _, err := Match(ctx, fs, []Input{{First: "Ann", Last: "Lee", Zip: "80203"}}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("name/postal lookup error: %v", err)
	}
	// No keys: the store is not called at all.
	if res, err := Match(ctx, errStore{Store: s, lookup: io.ErrUnexpectedEOF}, []Input{{Email: "n/a"}, {}}); err != nil || len(res) != 2 {
		t.Errorf("no keys: %v, %v", res, err)
	}
}

func TestLevelString(t *testing.T) {
	for l, want := range map[Level]string{LevelNone: "None", LevelIndividual: "Individual", LevelHousehold: "Household"} {
		if b, _ := l.MarshalText(); string(b) != want {
			t.Errorf("%d: %s", l, b)
		}
	}
}

func TestNormStreetZip(t *testing.T) {
	for _, tc := range [][2]string{
		{"12 Oak Street", "12 oak st"},
		{"12 OAK ST.", "12 oak st"},
		{"400 Elm Ave Apt 3", "400 elm ave"},
		{"400 Elm Avenue, #3", "400 elm ave"},
		{"9 North Main Road Suite 100", "9 n main rd"},
	} {
		if got := normStreet(tc[0]); got != tc[1] {
			t.Errorf("normStreet(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
	for _, tc := range [][2]string{{"02138", "02138"}, {"2138", "02138"}, {"02138-1234", "02138"}, {"021381234", "02138"}, {"21", ""}, {"abcde", ""}, {"", ""}} {
		if got := zip5(tc[0]); got != tc[1] {
			t.Errorf("zip5(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}
