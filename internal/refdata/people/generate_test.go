package people

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestGenerateDeterministic(t *testing.T) {
	a := GenerateSlice(5, 3000)
	b := GenerateSlice(5, 3000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different output")
	}
	if prefix := GenerateSlice(5, 1001); !reflect.DeepEqual(prefix, a[:1001]) {
		t.Fatal("a shorter run is not a prefix of a longer one")
	}
	if c := GenerateSlice(6, 3000); reflect.DeepEqual(a[:10], c[:10]) {
		t.Fatal("different seeds, same output")
	}
	var w1, w2 bytes.Buffer
	if err := WriteCSV(&w1, Generate(5, 500)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&w2, Generate(5, 500)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
		t.Fatal("CSV differs between runs")
	}
	if first, _, _ := strings.Cut(w1.String(), "\n"); first != strings.Join(Columns(), ",") {
		t.Fatalf("header %q", first)
	}
	n := 0
	for range Generate(5, 100) {
		if n++; n == 10 {
			break
		}
	}
	if n != 10 {
		t.Fatal("early break")
	}
}

func TestGenerateRealistic(t *testing.T) {
	const n = 20000
	recs := GenerateSlice(1, n)
	if len(recs) != n {
		t.Fatalf("%d records", len(recs))
	}
	zip3 := map[string]map[string]bool{} // state -> zip prefixes
	for _, s := range states {
		zip3[s.code] = map[string]bool{}
		for _, c := range s.cities {
			zip3[s.code][c.zip3] = true
		}
	}
	fakeDomain := func(e string) bool {
		d := e[strings.IndexByte(e, '@')+1:]
		return d == "example.com" || d == "example.net" || d == "example.org" || strings.HasSuffix(d, ".test")
	}
	seen := map[string]bool{}
	households := map[string][]Record{}
	var order []string
	filled := map[string]int{}
	for i := range recs {
		r := recs[i]
		if err := r.Validate(); err != nil {
			t.Fatalf("record %d invalid: %v", i, err)
		}
		if seen[r.Email] {
			t.Fatalf("duplicate email at %d", i)
		}
		seen[r.Email] = true
		if !fakeDomain(r.Email) {
			t.Fatalf("email domain of record %d is not a reserved one", i)
		}
		if !zip3[r.State][r.Zip[:3]] {
			t.Fatalf("record %d: zip prefix %s is not of state %s", i, r.Zip[:3], r.State)
		}
		if r.First == "" || r.Last == "" || r.Street == "" || r.City == "" || r.HouseholdID == "" {
			t.Fatalf("record %d lacks a name or address", i)
		}
		if _, ok := households[r.HouseholdID]; !ok {
			order = append(order, r.HouseholdID)
		}
		households[r.HouseholdID] = append(households[r.HouseholdID], r)
		for _, f := range slices.Concat(demoFields, rfmFields) {
			if *f.get(&r) != "" {
				filled[f.name]++
			}
		}
		if r.LifeStageSegment != "" && SegmentGroup(r.LifeStageSegment) != r.LifeStageGroup ||
			r.FinancialSegment != "" && SegmentGroup(r.FinancialSegment) != r.FinancialGroup {
			t.Fatalf("record %d: a segment outside its group", i)
		}
	}
	// Households: contiguous, 2 to 5 people (the last may be cut), one address.
	sameLast, members := 0, 0
	sizes := map[int]int{}
	for i, id := range order {
		hh := households[id]
		if (len(hh) < 2 && i != len(order)-1) || len(hh) > 5 {
			t.Fatalf("household of %d", len(hh))
		}
		sizes[len(hh)]++
		for _, m := range hh[1:] {
			if m.Street != hh[0].Street || m.City != hh[0].City || m.State != hh[0].State || m.Zip != hh[0].Zip ||
				m.HouseholdIncome != hh[0].HouseholdIncome && m.HouseholdIncome != "" && hh[0].HouseholdIncome != "" {
				t.Fatalf("household %s members differ in address or household data", id)
			}
			members++
			if m.Last == hh[0].Last {
				sameLast++
			}
		}
	}
	if f := float64(sameLast) / float64(members); f < 0.7 || f > 0.95 {
		t.Errorf("%.2f of members share the first member's last name", f)
	}
	for size := 2; size <= 5; size++ {
		if sizes[size] == 0 {
			t.Errorf("no household of %d", size)
		}
	}
	// Demographics: mostly known, with every bucket of the small fields used.
	for _, f := range slices.Concat(demoFields, rfmFields) {
		if f.name == ColHomeMarketValue { // owners only, checked below
			continue
		}
		if min := 0.5; float64(filled[f.name])/n < min {
			t.Errorf("%s known for only %d of %d", f.name, filled[f.name], n)
		}
	}
	for _, col := range []string{ColAge, ColGender, ColHomeOwnerStatus, ColMaritalStatus, ColPresenceOfChildren, ColEducation,
		ColLifeStageSegment, ColLifeStageGroup, ColFinancialSegment, ColFinancialGroup} {
		used := map[string]bool{}
		for i := range recs {
			used[*fieldByName[col].get(&recs[i])] = true
		}
		for _, v := range Buckets(col) {
			if !used[v] {
				t.Errorf("%s: bucket %q never drawn", col, v)
			}
		}
	}
	// Plausibility: owners are older than renters on average, and retirees
	// are 65+.
	var ownAge, rentAge, owners, renters, ownValue, ownAll int
	ages := Buckets(ColAge)
	for _, r := range recs {
		if r.HomeOwnerStatus == "Own" {
			ownAll++
		}
		if r.HomeMarketValue != "" {
			if r.HomeOwnerStatus == "Rent" {
				t.Fatal("a renter with a home market value")
			}
			if r.HomeOwnerStatus == "Own" {
				ownValue++
			}
		}
		a := slices.Index(ages, r.Age)
		if a < 0 {
			continue
		}
		switch r.HomeOwnerStatus {
		case "Own":
			ownAge, owners = ownAge+a, owners+1
		case "Rent":
			rentAge, renters = rentAge+a, renters+1
		}
		if r.Occupation == "Retired" && r.Age != "65+" {
			t.Fatalf("a retiree aged %s", r.Age)
		}
	}
	if f := float64(ownValue) / float64(ownAll); f < 0.8 {
		t.Errorf("only %.2f of owners have a home market value", f)
	}
	if float64(ownAge)/float64(owners) <= float64(rentAge)/float64(renters) {
		t.Errorf("owners are not older than renters")
	}
	if f := float64(owners) / float64(owners+renters); f < 0.4 || f > 0.85 {
		t.Errorf("home ownership %.2f", f)
	}
}

// TestGenerateAltEmails: about one person in four has other addresses,
// valid, unique across the run and never another person's email.
func TestGenerateAltEmails(t *testing.T) {
	recs := GenerateSlice(1, 20000)
	primary := map[string]bool{}
	for _, r := range recs {
		primary[r.Email] = true
	}
	seen := map[string]bool{}
	with, two := 0, 0
	for i, r := range recs {
		if len(r.AltEmails) > 0 {
			with++
		}
		if len(r.AltEmails) == 2 {
			two++
		}
		for _, a := range r.AltEmails {
			if !ValidEmail(a) || primary[a] || seen[a] || !slices.Contains(altDomains, a[strings.IndexByte(a, '@')+1:]) {
				t.Fatalf("record %d: other address %q is invalid, repeated or not on an alt domain", i, a)
			}
			seen[a] = true
		}
	}
	if with < 4000 || with > 6000 || two < 800 || two > 1600 {
		t.Errorf("%d of %d people have other addresses, %d two of them", with, len(recs), two)
	}
}
