package fraud

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// zipFormats are the postal code formats by country (upper-cased input,
// surrounding spaces removed).
var zipFormats = map[string]*regexp.Regexp{
	"US": regexp.MustCompile(`^\d{5}(-?\d{4})?$`),
	"CA": regexp.MustCompile(`^[ABCEGHJ-NPRSTVXY]\d[ABCEGHJ-NPRSTV-Z] ?\d[ABCEGHJ-NPRSTV-Z]\d$`),
	"GB": regexp.MustCompile(`^([A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}|GIR ?0AA)$`),
	"DE": regexp.MustCompile(`^\d{5}$`),
	"FR": regexp.MustCompile(`^\d{5}$`),
	"IT": regexp.MustCompile(`^\d{5}$`),
	"ES": regexp.MustCompile(`^\d{5}$`),
	"MX": regexp.MustCompile(`^\d{5}$`),
	"NL": regexp.MustCompile(`^\d{4} ?[A-Z]{2}$`),
	"AU": regexp.MustCompile(`^\d{4}$`),
	"AT": regexp.MustCompile(`^\d{4}$`),
	"BE": regexp.MustCompile(`^\d{4}$`),
	"CH": regexp.MustCompile(`^\d{4}$`),
	"DK": regexp.MustCompile(`^\d{4}$`),
	"NO": regexp.MustCompile(`^\d{4}$`),
	"SE": regexp.MustCompile(`^\d{3} ?\d{2}$`),
	"PL": regexp.MustCompile(`^\d{2}-\d{3}$`),
	"PT": regexp.MustCompile(`^\d{4}-\d{3}$`),
	"JP": regexp.MustCompile(`^\d{3}-?\d{4}$`),
	"IN": regexp.MustCompile(`^\d{6}$`),
	"BR": regexp.MustCompile(`^\d{5}-?\d{3}$`),
}

// validZip reports whether zip has the format of country; countries
// without a known format accept anything.
func validZip(country, zip string) bool {
	re := zipFormats[country]
	return re == nil || re.MatchString(strings.ToUpper(strings.TrimSpace(zip)))
}

//go:embed data/us-zip3.txt
var usZip3Data string

// usZip3 maps a three-digit prefix (0-999) to its states; nil when the
// prefix is not assigned.
var usZip3 = mustZip3(usZip3Data)

func mustZip3(data string) *[1000][]string {
	t, err := parseZip3(data)
	if err != nil {
		panic("fraud: data/us-zip3.txt: " + err.Error())
	}
	return t
}

func parseZip3(data string) (*[1000][]string, error) {
	var t [1000][]string
	for n, line := range strings.Split(data, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("line %d: want \"range STATE\"", n+1)
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b > 999 || a > b {
			return nil, fmt.Errorf("line %d: bad range %q", n+1, f[0])
		}
		for _, st := range f[1:] {
			if _, ok := usStates[st]; !ok {
				return nil, fmt.Errorf("line %d: unknown state %q", n+1, st)
			}
		}
		for p := a; p <= b; p++ {
			if t[p] != nil {
				return nil, fmt.Errorf("line %d: prefix %03d listed twice", n+1, p)
			}
			t[p] = f[1:]
		}
	}
	return &t, nil
}

// usZipStates returns the states of a (valid format) US ZIP code and
// whether its prefix is assigned.
func usZipStates(zip string) ([]string, bool) {
	z := strings.TrimSpace(zip)
	if len(z) < 3 {
		return nil, false
	}
	p, err := strconv.Atoi(z[:3])
	if err != nil || p < 0 || p > 999 {
		return nil, false
	}
	st := usZip3[p]
	return st, st != nil
}

// usStates maps USPS state codes (states, DC, territories, military) to
// their names; normState accepts either.
var usStates = map[string]string{
	"AL": "alabama", "AK": "alaska", "AZ": "arizona", "AR": "arkansas", "CA": "california",
	"CO": "colorado", "CT": "connecticut", "DE": "delaware", "DC": "district of columbia",
	"FL": "florida", "GA": "georgia", "HI": "hawaii", "ID": "idaho", "IL": "illinois",
	"IN": "indiana", "IA": "iowa", "KS": "kansas", "KY": "kentucky", "LA": "louisiana",
	"ME": "maine", "MD": "maryland", "MA": "massachusetts", "MI": "michigan", "MN": "minnesota",
	"MS": "mississippi", "MO": "missouri", "MT": "montana", "NE": "nebraska", "NV": "nevada",
	"NH": "new hampshire", "NJ": "new jersey", "NM": "new mexico", "NY": "new york",
	"NC": "north carolina", "ND": "north dakota", "OH": "ohio", "OK": "oklahoma", "OR": "oregon",
	"PA": "pennsylvania", "RI": "rhode island", "SC": "south carolina", "SD": "south dakota",
	"TN": "tennessee", "TX": "texas", "UT": "utah", "VT": "vermont", "VA": "virginia",
	"WA": "washington", "WV": "west virginia", "WI": "wisconsin", "WY": "wyoming",
	"PR": "puerto rico", "VI": "virgin islands", "GU": "guam", "AS": "american samoa",
	"MP": "northern mariana islands", "FM": "micronesia", "MH": "marshall islands", "PW": "palau",
	"AA": "armed forces americas", "AE": "armed forces europe", "AP": "armed forces pacific",
}

var usStateByName = func() map[string]string {
	m := make(map[string]string, len(usStates))
	for code, name := range usStates {
		m[name] = code
	}
	m["washington dc"] = "DC"
	m["washington d c"] = "DC"
	m["us virgin islands"] = "VI"
	return m
}()

// normState returns the USPS code of a US state given as code or name.
func normState(s string) (string, bool) {
	t := strings.ToUpper(strings.TrimSpace(strings.ReplaceAll(s, ".", "")))
	if _, ok := usStates[t]; ok {
		return t, true
	}
	name := strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(s, ".", " "))), " ")
	c, ok := usStateByName[name]
	return c, ok
}

var (
	poBoxRE    = regexp.MustCompile(`(?i)\b(p\.?\s*o\.?\s*box|post\s+office\s+box|postfach|boite\s+postale)\b`)
	militaryRE = regexp.MustCompile(`(?i)\b(psc|unit|cmr)\s+\d+`)
)

// postalSignals checks the postal fields: country known, postal code format,
// US ZIP prefix against state, and the *_match fields against the
// reference record.
func (a *assessor) postalSignals() {
	in := a.in
	if in.First == "" && in.Last == "" && in.Street == "" && in.City == "" && in.State == "" && in.Zip == "" {
		return
	}
	p := &PostalInfo{FirstNameMatch: NoData, LastNameMatch: NoData, StreetMatch: NoData, CityMatch: NoData, ZipMatch: NoData}
	a.out.Risk.Postal = p

	hasAddress := strings.TrimSpace(in.Street+in.City+in.State+in.Zip) != ""
	if hasAddress {
		p.Deliverability = "unverified"
		if strings.TrimSpace(in.Country) != "" && a.country == "" {
			p.DeliverabilitySubstatus = "country_unknown"
		}
	}
	country := a.country
	state, stateOK := "", false
	if strings.TrimSpace(in.State) != "" {
		state, stateOK = normState(in.State)
		if country == "" && stateOK && strings.TrimSpace(in.Country) == "" {
			country = "US" // a US state and no country: read as US
		}
		if country == "US" && !stateOK {
			a.add(ReasonStateUnknown)
			p.DeliverabilitySubstatus = "state_unknown"
		}
	}
	if zip := strings.TrimSpace(in.Zip); zip != "" && country != "" {
		switch {
		case !validZip(country, zip):
			a.add(ReasonZipInvalid)
			p.Deliverability, p.DeliverabilitySubstatus = "undeliverable", "zip_invalid"
		case country == "US":
			states, assigned := usZipStates(zip)
			if !assigned {
				a.add(ReasonZipInvalid)
				p.Deliverability, p.DeliverabilitySubstatus = "undeliverable", "zip_invalid"
			} else if stateOK && !contains(states, state) {
				a.add(ReasonZipStateMismatch)
				p.DeliverabilitySubstatus = "zip_state_mismatch"
			}
		}
	}
	if street := strings.TrimSpace(in.Street); street != "" {
		switch {
		case poBoxRE.MatchString(street):
			p.AddressType = "po_box"
		case militaryRE.MatchString(street) || state == "AA" || state == "AE" || state == "AP":
			p.AddressType = "military"
		default:
			p.AddressType = "street"
		}
	}

	if a.deps.People == nil || strings.TrimSpace(in.Email) == "" {
		return
	}
	first, last, street, city, zip, ok := a.deps.People.Lookup(a.ctx, strings.TrimSpace(in.Email))
	if !ok {
		return
	}
	p.FirstNameMatch = a.matchField(in.First, first, foldName, ReasonFirstNameMatch, ReasonFirstNameNoMatch)
	p.LastNameMatch = a.matchField(in.Last, last, foldName, ReasonLastNameMatch, ReasonLastNameNoMatch)
	p.StreetMatch = a.matchField(in.Street, street, normStreet, ReasonStreetMatch, ReasonStreetNoMatch)
	p.CityMatch = a.matchField(in.City, city, normCity, ReasonCityMatch, ReasonCityNoMatch)
	p.ZipMatch = a.matchField(in.Zip, zip, normZip, ReasonZipMatch, ReasonZipNoMatch)
}

// matchField compares one input field with the reference record.
func (a *assessor) matchField(in, ref string, norm func(string) string, match, noMatch string) string {
	x, y := norm(in), norm(ref)
	switch {
	case x == "" || y == "":
		return NoData
	case x == y:
		a.add(match)
		return Match
	default:
		a.add(noMatch)
		return NoMatch
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// streetWords are the usual abbreviations (USPS style) so "123 Main
// Street" matches "123 main st.".
var streetWords = map[string]string{
	"street": "st", "avenue": "ave", "av": "ave", "road": "rd", "boulevard": "blvd",
	"drive": "dr", "lane": "ln", "court": "ct", "place": "pl", "apartment": "apt",
	"suite": "ste", "north": "n", "south": "s", "east": "e", "west": "w",
	"highway": "hwy", "parkway": "pkwy", "circle": "cir", "terrace": "ter",
	"square": "sq", "trail": "trl", "way": "way", "number": "", "no": "", "unit": "apt", "#": "apt",
	"strasse": "str",
}

// normStreet lower-cases and folds the street, drops punctuation and
// abbreviates common words.
func normStreet(s string) string {
	var words []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return r == ' ' || r == ',' || r == '.' || r == '\t' || r == '-'
	}) {
		w = strings.ReplaceAll(w, "ß", "ss")
		if r, ok := streetWords[w]; ok {
			w = r
		} else if strings.HasSuffix(w, "strasse") {
			w = strings.TrimSuffix(w, "strasse") + "str"
		}
		var b strings.Builder
		for _, r := range w {
			r = foldRune(r)
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 {
				b.WriteRune(r)
			}
		}
		if b.Len() > 0 {
			words = append(words, b.String())
		}
	}
	return strings.Join(words, " ")
}

// normCity folds the city name; "saint" and "st" are the same.
func normCity(s string) string {
	f := strings.Fields(strings.ToLower(strings.ReplaceAll(s, ".", " ")))
	for i, w := range f {
		if w == "saint" {
			f[i] = "st"
		}
	}
	return foldName(strings.Join(f, ""))
}

// normZip keeps letters and digits, upper-cased; a US ZIP+4 compares by
// its first five digits.
func normZip(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	z := b.String()
	if len(z) == 9 && strings.Trim(z, "0123456789") == "" {
		z = z[:5]
	}
	return z
}

// US postal address problems USPostal reports.
const (
	USPostalState    = "state"     // not a US state, by USPS code or name
	USPostalZip      = "zip"       // not 5 digits (optionally and 4), or an unassigned prefix
	USPostalZipState = "zip_state" // the ZIP's prefix is not one of the state's
)

// USPostal checks a US state (a USPS code or a name) and ZIP code, each
// only when given, with the tables GET /fr uses. It returns the state's
// USPS code (or "") and "" when they can be a US address, else the
// problem (USPostalState, USPostalZip or USPostalZipState).
func USPostal(state, zip string) (code, problem string) {
	ok := false
	if strings.TrimSpace(state) != "" {
		if code, ok = normState(state); !ok {
			return "", USPostalState
		}
	}
	if z := strings.TrimSpace(zip); z != "" {
		if !validZip("US", z) {
			return code, USPostalZip
		}
		states, assigned := usZipStates(z)
		switch {
		case !assigned:
			return code, USPostalZip
		case ok && !contains(states, code):
			return code, USPostalZipState
		}
	}
	return code, ""
}
