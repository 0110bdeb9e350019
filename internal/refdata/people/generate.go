package people

import (
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Generate returns n synthetic people made from seed: the same seed and n
// give the same records, and a shorter run is a prefix of a longer one.
// People come in households of 2 to 5 (only the last household may be cut
// short by n), which share a household id ("HH" and 9 digits), street,
// city, state and zip, and mostly a last name. Names come from small
// built-in lists, emails are unique within the run and use reserved example
// domains (example.com/.net/.org) or the .test top-level domain; about one
// person in four has one or two other addresses (AltEmails, at work.test,
// office.test or alumni.test, domains no primary address uses); states and
// cities come with a zip prefix of that city, and demographics are drawn
// from plausible, correlated distributions with some fields left unknown.
// All of it is made up.
//
// The generator keeps every email it made in memory (about 100 bytes a
// person) to keep them unique.
func Generate(seed uint64, n int) iter.Seq[Record] {
	return func(yield func(Record) bool) {
		g := newGenerator(seed)
		for made := 0; made < n; {
			for _, r := range g.household() {
				if made == n || !yield(r) {
					return
				}
				made++
			}
		}
	}
}

// GenerateSlice collects Generate(seed, n).
func GenerateSlice(seed uint64, n int) []Record {
	out := make([]Record, 0, n)
	for r := range Generate(seed, n) {
		out = append(out, r)
	}
	return out
}

// WriteCSV writes recs as CSV with a header row of Columns, the format
// Import reads.
func WriteCSV(w io.Writer, recs iter.Seq[Record]) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns()); err != nil {
		return err
	}
	row := make([]string, len(allFields)+2)
	for r := range recs {
		for i := range allFields {
			row[i] = *allFields[i].get(&r)
		}
		row[len(allFields)] = r.Interests.String()
		row[len(allFields)+1] = strings.Join(r.AltEmails, ";")
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

type weighted struct {
	cum []int
}

func newWeighted(w []int) weighted {
	c := make([]int, len(w))
	t := 0
	for i, x := range w {
		t += x
		c[i] = t
	}
	return weighted{c}
}

func (w weighted) pick(r *rand.Rand) int {
	return sort.SearchInts(w.cum, r.IntN(w.cum[len(w.cum)-1])+1)
}

// zipf gives the i-th of n items a weight falling with its rank.
func zipf(n int) weighted {
	w := make([]int, n)
	for i := range w {
		w[i] = 100000 / (i + 8)
	}
	return newWeighted(w)
}

var (
	wMale       = zipf(len(maleFirst))
	wFemale     = zipf(len(femaleFirst))
	wLast       = zipf(len(lastNames))
	wStreet     = zipf(len(streetNames))
	wSuffix     = newWeighted(streetSuffixWeights)
	wDomain     = newWeighted(emailDomainWeights)
	wState      = newWeighted(stateWeights())
	wHHSize     = newWeighted([]int{0, 0, 45, 25, 20, 10}) // index = size
	wHeadAge    = newWeighted([]int{0, 5, 20, 21, 21, 17, 16})
	wIncome     = newWeighted([]int{6, 8, 9, 12, 17, 14, 10, 7, 5, 4, 4, 4})
	wEducation  = newWeighted([]int{28, 25, 28, 12, 7})
	wOccupation = newWeighted([]int{16, 18, 14, 9, 10, 9, 8, 5, 8, 5, 2, 4, 6, 0, 0}) // not Student/Retired
	wInterest   = newWeighted([]int{5, 6, 9, 10, 5, 6, 6, 9, 7, 7, 3, 8, 6, 10, 10, 7, 9, 4, 9, 8, 10, 4})
	wLocal      = newWeighted([]int{30, 15, 20, 8, 7, 10, 5, 5})
)

func stateWeights() []int {
	w := make([]int, len(states))
	for i, s := range states {
		w[i] = s.weight
	}
	return w
}

// bucket indexes used by the generator (positions in demoFields' values).
const (
	age18, age21, age25, age35, age45, age55, age65 = 0, 1, 2, 3, 4, 5, 6
	occStudent, occRetired                          = 13, 14
)

type generator struct {
	r *rand.Rand
	// x draws the fields added later (life stage, financial, rfm) from a
	// stream of its own, so that adding them left every earlier field of a
	// seed's people unchanged.
	x *rand.Rand
	// a draws the other addresses (AltEmails), on a stream of its own for
	// the same reason.
	a       *rand.Rand
	hh      int
	used    map[string]uint32 // email -> last counter used for it as a base
	altUsed map[string]bool
}

func newGenerator(seed uint64) *generator {
	return &generator{
		r:       rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		x:       rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d)),
		a:       rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d)),
		used:    make(map[string]uint32),
		altUsed: make(map[string]bool),
	}
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

func bucket(col string, i int) string {
	f := fieldByName[col]
	return f.values[clamp(i, 0, len(f.values)-1)]
}

// maybe returns v, or "" with probability missing.
func (g *generator) maybe(missing float64, v string) string {
	if g.chance(missing) {
		return ""
	}
	return v
}

// household makes the people of the next household.
func (g *generator) household() []Record {
	r := g.r
	g.hh++
	size := wHHSize.pick(r)
	st := &states[wState.pick(r)]
	c := st.cities[r.IntN(len(st.cities))]
	headAge := wHeadAge.pick(r)
	income := clamp(wIncome.pick(r)+incomeShift(headAge), 0, 11)
	own := g.chance(min(0.92, max(0.1, 0.15+0.09*float64(headAge-1)+0.03*float64(income))))
	street := fmt.Sprintf("%d %s %s", 1+r.IntN(9899), streetNames[wStreet.pick(r)], streetSuffixes[wSuffix.pick(r)])
	if !own && g.chance(0.5) {
		street += fmt.Sprintf(" Apt %d", 1+r.IntN(40))
	}
	last := lastNames[wLast.pick(r)]
	base := Record{
		Street:      street,
		City:        c.name,
		State:       st.code,
		Zip:         fmt.Sprintf("%s%02d", c.zip3, r.IntN(100)),
		HouseholdID: fmt.Sprintf("HH%09d", g.hh),
	}
	base.HouseholdIncome = g.maybe(0.08, bucket(ColHouseholdIncome, income))
	base.NetWorth = g.maybe(0.10, bucket(ColNetWorth, income*9/11+(headAge-3)/2+r.IntN(5)-2))
	if own {
		base.HomeOwnerStatus = g.maybe(0.05, "Own")
		base.HomeMarketValue = g.maybe(0.10, bucket(ColHomeMarketValue, income+r.IntN(5)-1))
		base.LengthOfResidence = g.maybe(0.08, bucket(ColLengthOfResidence, r.IntN(3+3*headAge)))
	} else {
		base.HomeOwnerStatus = g.maybe(0.05, "Rent")
		base.LengthOfResidence = g.maybe(0.08, bucket(ColLengthOfResidence, r.IntN(6)))
	}
	kids := 0.12
	if headAge >= age25 && headAge <= age45 {
		kids = 0.5
	}
	base.PresenceOfChildren = g.maybe(0.10, pick2(g.chance(kids), "Yes", "No"))

	headMale := g.chance(0.5)
	partner := g.chance(0.8)
	g.segments(&base, headAge, income, own, partner)
	out := make([]Record, 0, size)
	for i := 0; i < size; i++ {
		p := base
		male, age, married, sameLast := headMale, headAge, partner, true
		switch {
		case i == 0:
		case i == 1 && partner:
			male = !headMale
			if g.chance(0.05) {
				male = headMale
			}
			age = clamp(headAge+[]int{0, 0, 0, -1, 1}[r.IntN(5)], age21, age65)
			sameLast = g.chance(0.85)
		case headAge >= age45:
			male, married = g.chance(0.5), false
			age = clamp(headAge-4+r.IntN(2), age18, age25)
			sameLast = g.chance(0.92)
		default:
			male, married = g.chance(0.5), g.chance(0.15)
			age = []int{age21, age25, age35, age65, age65}[r.IntN(5)]
			sameLast = g.chance(0.6)
		}
		g.person(&p, male, age, married)
		g.purchases(&p)
		p.Last = last
		if !sameLast {
			p.Last = lastNames[wLast.pick(r)]
		}
		p.Email = g.email(p.First, p.Last)
		p.AltEmails = g.altEmails(p.First, p.Last)
		out = append(out, p)
	}
	return out
}

// segments sets the household's life stage and financial segments and
// groups (from the extension stream), consistent with the head's age, the
// presence of children, a partner, home ownership and income.
func (g *generator) segments(p *Record, headAge, income int, own, partner bool) {
	x := g.x
	kids := p.PresenceOfChildren == "Yes"
	var ls int // index into LifeStageSegments
	switch {
	case headAge >= age65:
		ls = 10 + b2i(income < 5 || x.IntN(4) == 0)
	case headAge >= age45:
		if kids {
			ls = 6 + x.IntN(2)
		} else {
			ls = 8 + b2i(income >= 6)
		}
	case kids:
		ls = 4 + b2i(headAge >= age35)
		if headAge >= age35 && x.IntN(2) == 0 {
			ls = 6
		}
	case partner:
		ls = 2 + b2i(own)
	default:
		ls = b2i(headAge >= age25 || x.IntN(2) == 0)
	}
	if x.Float64() >= 0.10 {
		seg := LifeStageSegments()[ls]
		p.LifeStageSegment, p.LifeStageGroup = seg, SegmentGroup(seg)
	}
	fg := 0
	switch {
	case income >= 10:
		fg = 4
	case income >= 8:
		fg = 3
	case income >= 5:
		fg = 2
	case income >= 2:
		fg = 1
	}
	if x.Float64() >= 0.10 {
		seg := FinancialSegments()[2*fg+b2i(own == (x.IntN(4) != 0))]
		p.FinancialSegment, p.FinancialGroup = seg, SegmentGroup(seg)
	}
}

// purchases sets a person's rfm fields (from the extension stream): about
// three in four are known buyers, most of them both offline and online;
// online buyers order more often.
func (g *generator) purchases(p *Record) {
	x := g.x
	if x.Float64() < 0.25 {
		return
	}
	if x.Float64() < 0.75 {
		p.RFMOfflineAvgDays = strconv.Itoa(20 + x.IntN(300))
	}
	if x.Float64() < 0.75 {
		p.RFMOnlineAvgDays = strconv.Itoa(5 + x.IntN(120))
	}
	p.RFMAvgDollars = fmt.Sprintf("%d.%02d", 8+x.IntN(240), x.IntN(100))
	// A last order between 2023-01-01 and 2025-12-31.
	p.RFMLastOrder = time.Date(2023, 1, 1+x.IntN(1095), 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pick2(c bool, yes, no string) string {
	if c {
		return yes
	}
	return no
}

func incomeShift(age int) int {
	return []int{-4, -3, -1, 0, 1, 0, -2}[age]
}

func (g *generator) person(p *Record, male bool, age int, married bool) {
	r := g.r
	if male {
		p.First = maleFirst[wMale.pick(r)]
		p.Gender = g.maybe(0.02, "Male")
	} else {
		p.First = femaleFirst[wFemale.pick(r)]
		p.Gender = g.maybe(0.02, "Female")
	}
	switch x := r.IntN(100); {
	case x < 45:
		p.Middle = string(rune('A' + r.IntN(26)))
	case x < 60:
		if male {
			p.Middle = maleFirst[wMale.pick(r)]
		} else {
			p.Middle = femaleFirst[wFemale.pick(r)]
		}
	}
	p.Age = g.maybe(0.03, bucket(ColAge, age))
	p.MaritalStatus = g.maybe(0.10, pick2(married, "Married", "Single"))
	switch {
	case age == age18:
		p.Education = g.maybe(0.15, bucket(ColEducation, r.IntN(2)))
	default:
		p.Education = g.maybe(0.15, bucket(ColEducation, wEducation.pick(r)))
	}
	occ := wOccupation.pick(r)
	switch {
	case age <= age21 && g.chance(0.5):
		occ = occStudent
	case age == age65 && g.chance(0.7):
		occ = occRetired
	}
	p.Occupation = g.maybe(0.25, bucket(ColOccupation, occ))
	p.Interests = 0
	for k := r.IntN(6); k > 0; k-- {
		p.Interests |= 1 << wInterest.pick(r)
	}
}

// altDomains are the domains of other addresses; no primary address uses
// them, so the two kinds never collide.
var altDomains = []string{"work.test", "office.test", "alumni.test"}

// altEmails draws a person's other addresses: none for about three in
// four, else one (or, rarely, two), unique within the run.
func (g *generator) altEmails(first, last string) []string {
	n := 0
	switch x := g.a.Float64(); {
	case x < 0.06:
		n = 2
	case x < 0.25:
		n = 1
	}
	var out []string
	f, l := strings.ToLower(first), strings.ToLower(last)
	for range n {
		local := []string{f + "." + l, f[:1] + l, f + "_" + l, l + "." + f}[g.a.IntN(4)]
		domain := altDomains[g.a.IntN(len(altDomains))]
		e := local + "@" + domain
		for k := 2; g.altUsed[e]; k++ {
			e = local + strconv.Itoa(k) + "@" + domain
		}
		g.altUsed[e] = true
		out = append(out, e)
	}
	return out
}

// email makes an address unique within the run from the person's name.
func (g *generator) email(first, last string) string {
	f, l := strings.ToLower(first), strings.ToLower(last)
	var local string
	switch wLocal.pick(g.r) {
	case 0:
		local = f + "." + l
	case 1:
		local = f + l
	case 2:
		local = f[:1] + l
	case 3:
		local = f + "_" + l
	case 4:
		local = f + l[:1]
	case 5:
		local = f + "." + l + strconv.Itoa(50+g.r.IntN(50))
	case 6:
		local = f
	default:
		local = l + f[:1]
	}
	base := local + "@" + emailDomains[wDomain.pick(g.r)]
	e := base
	if n, dup := g.used[base]; dup {
		at := len(local)
		for n++; ; n++ {
			e = base[:at] + strconv.Itoa(int(n)) + base[at:]
			if _, taken := g.used[e]; !taken {
				break
			}
		}
		g.used[base] = n
	}
	g.used[e] = 0
	return e
}
