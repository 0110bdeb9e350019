package people

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Record is one person of the reference data. Email is the key: it is kept
// normalised (see NormalizeEmail). Every demographic field is either empty
// (unknown) or one of the values that Buckets lists for it.
type Record struct {
	Email       string `json:"email"`
	First       string `json:"first,omitempty"`
	Middle      string `json:"middle,omitempty"`
	Last        string `json:"last,omitempty"`
	Street      string `json:"street,omitempty"`
	City        string `json:"city,omitempty"`
	State       string `json:"state,omitempty"`
	Zip         string `json:"zip,omitempty"`
	HouseholdID string `json:"household_id,omitempty"`

	Age                string `json:"age,omitempty"`
	Gender             string `json:"gender,omitempty"`
	HouseholdIncome    string `json:"household_income,omitempty"`
	NetWorth           string `json:"net_worth,omitempty"`
	HomeMarketValue    string `json:"home_market_value,omitempty"`
	HomeOwnerStatus    string `json:"home_owner_status,omitempty"`
	LengthOfResidence  string `json:"length_of_residence,omitempty"`
	MaritalStatus      string `json:"marital_status,omitempty"`
	PresenceOfChildren string `json:"presence_of_children,omitempty"`
	Education          string `json:"education,omitempty"`
	Occupation         string `json:"occupation,omitempty"`
	LifeStageSegment   string `json:"life_stage_segment,omitempty"`
	LifeStageGroup     string `json:"life_stage_group,omitempty"`
	FinancialSegment   string `json:"financial_segment,omitempty"`
	FinancialGroup     string `json:"financial_group,omitempty"`

	// Purchase behaviour (recency, frequency, monetary): average days
	// between offline and between online orders (whole days), average
	// dollars per order ("42" or "42.50") and the date of the last order
	// (YYYY-MM-DD). Each is empty when unknown.
	RFMOfflineAvgDays string `json:"rfm_offline_avg_days,omitempty"`
	RFMOnlineAvgDays  string `json:"rfm_online_avg_days,omitempty"`
	RFMAvgDollars     string `json:"rfm_avg_dollars,omitempty"`
	RFMLastOrder      string `json:"rfm_last_order,omitempty"`

	Interests Interests `json:"interests,omitempty"`

	// AltEmails are the person's other addresses, normalised, each valid,
	// none equal to Email or repeated, at most MaxAltEmails. A lookup by
	// any of them (or its MD5 or SHA-1) finds the person; Email stays the
	// key. In files (column alt_emails) they are joined with ';'.
	AltEmails []string `json:"alt_emails,omitempty"`
}

// MaxAltEmails is the most other addresses a person may have.
const MaxAltEmails = 10

// Column (CSV header and JSON) names of the Record fields, in the order
// Columns returns them.
const (
	ColEmail              = "email"
	ColFirst              = "first"
	ColMiddle             = "middle"
	ColLast               = "last"
	ColStreet             = "street"
	ColCity               = "city"
	ColState              = "state"
	ColZip                = "zip"
	ColHouseholdID        = "household_id"
	ColAge                = "age"
	ColGender             = "gender"
	ColHouseholdIncome    = "household_income"
	ColNetWorth           = "net_worth"
	ColHomeMarketValue    = "home_market_value"
	ColHomeOwnerStatus    = "home_owner_status"
	ColLengthOfResidence  = "length_of_residence"
	ColMaritalStatus      = "marital_status"
	ColPresenceOfChildren = "presence_of_children"
	ColEducation          = "education"
	ColOccupation         = "occupation"
	ColLifeStageSegment   = "life_stage_segment"
	ColLifeStageGroup     = "life_stage_group"
	ColFinancialSegment   = "financial_segment"
	ColFinancialGroup     = "financial_group"
	ColRFMOfflineAvgDays  = "rfm_offline_avg_days"
	ColRFMOnlineAvgDays   = "rfm_online_avg_days"
	ColRFMAvgDollars      = "rfm_avg_dollars"
	ColRFMLastOrder       = "rfm_last_order"
	ColInterests          = "interests"
	ColAltEmails          = "alt_emails"
)

// MaxFieldLen is the longest value, in bytes, a text field may hold.
const MaxFieldLen = 200

// field describes one string field of Record. values, when set, is the
// closed set of allowed values (the buckets); a value's stored code in the
// embedded store is its index + 1, so the lists may only ever be appended to.
// check, when set, validates a free-form value (the rfm fields) and
// returns the reason it is not valid.
type field struct {
	name   string
	get    func(*Record) *string
	values []string
	canon  map[string]uint8 // value -> index
	index  map[string]uint8 // lower-cased value -> index
	check  func(string) string
}

var (
	textFields = []field{
		{name: ColEmail, get: func(r *Record) *string { return &r.Email }},
		{name: ColFirst, get: func(r *Record) *string { return &r.First }},
		{name: ColMiddle, get: func(r *Record) *string { return &r.Middle }},
		{name: ColLast, get: func(r *Record) *string { return &r.Last }},
		{name: ColStreet, get: func(r *Record) *string { return &r.Street }},
		{name: ColCity, get: func(r *Record) *string { return &r.City }},
		{name: ColState, get: func(r *Record) *string { return &r.State }},
		{name: ColZip, get: func(r *Record) *string { return &r.Zip }},
		{name: ColHouseholdID, get: func(r *Record) *string { return &r.HouseholdID }},
	}
	demoFields = []field{
		{name: ColAge, get: func(r *Record) *string { return &r.Age }, values: []string{
			"18-20", "21-24", "25-34", "35-44", "45-54", "55-64", "65+"}},
		{name: ColGender, get: func(r *Record) *string { return &r.Gender }, values: []string{
			"Male", "Female"}},
		{name: ColHouseholdIncome, get: func(r *Record) *string { return &r.HouseholdIncome }, values: []string{
			"0-15k", "15k-25k", "25k-35k", "35k-50k", "50k-75k", "75k-100k", "100k-125k",
			"125k-150k", "150k-175k", "175k-200k", "200k-250k", "250k+"}},
		{name: ColNetWorth, get: func(r *Record) *string { return &r.NetWorth }, values: []string{
			"0-5k", "5k-10k", "10k-25k", "25k-50k", "50k-100k", "100k-250k", "250k-500k",
			"500k-750k", "750k-1mm", "1mm+"}},
		{name: ColHomeMarketValue, get: func(r *Record) *string { return &r.HomeMarketValue }, values: []string{
			"1k-25k", "25k-50k", "50k-75k", "75k-100k", "100k-150k", "150k-200k", "200k-250k",
			"250k-300k", "300k-350k", "350k-500k", "500k-1mm", "1mm+"}},
		{name: ColHomeOwnerStatus, get: func(r *Record) *string { return &r.HomeOwnerStatus }, values: []string{
			"Own", "Rent"}},
		{name: ColLengthOfResidence, get: func(r *Record) *string { return &r.LengthOfResidence }, values: lengthOfResidence()},
		{name: ColMaritalStatus, get: func(r *Record) *string { return &r.MaritalStatus }, values: []string{
			"Single", "Married"}},
		{name: ColPresenceOfChildren, get: func(r *Record) *string { return &r.PresenceOfChildren }, values: []string{
			"Yes", "No"}},
		{name: ColEducation, get: func(r *Record) *string { return &r.Education }, values: []string{
			"Completed High School", "Attended College", "Completed College",
			"Completed Graduate School", "Attended Vocational/Technical"}},
		{name: ColOccupation, get: func(r *Record) *string { return &r.Occupation }, values: []string{
			"Blue Collar", "White Collar", "Professional", "Technical", "Sales",
			"Clerical/Office", "Management", "Business Owner", "Health Care", "Education",
			"Military", "Civil Service", "Homemaker", "Student", "Retired"}},
		// Appended after the first eleven: stored codes are positional.
		{name: ColLifeStageSegment, get: func(r *Record) *string { return &r.LifeStageSegment }, values: LifeStageSegments()},
		{name: ColLifeStageGroup, get: func(r *Record) *string { return &r.LifeStageGroup }, values: lifeStageGroups},
		{name: ColFinancialSegment, get: func(r *Record) *string { return &r.FinancialSegment }, values: FinancialSegments()},
		{name: ColFinancialGroup, get: func(r *Record) *string { return &r.FinancialGroup }, values: financialGroups},
	}
	// rfmFields are free-form but checked; stored as text.
	rfmFields = []field{
		{name: ColRFMOfflineAvgDays, get: func(r *Record) *string { return &r.RFMOfflineAvgDays }, check: checkDays},
		{name: ColRFMOnlineAvgDays, get: func(r *Record) *string { return &r.RFMOnlineAvgDays }, check: checkDays},
		{name: ColRFMAvgDollars, get: func(r *Record) *string { return &r.RFMAvgDollars }, check: checkDollars},
		{name: ColRFMLastOrder, get: func(r *Record) *string { return &r.RFMLastOrder }, check: checkDate},
	}
	// allFields is textFields, demoFields, then rfmFields; Interests is not
	// in it.
	allFields   = slices.Concat(textFields, demoFields, rfmFields)
	fieldByName map[string]*field
)

func lengthOfResidence() []string {
	v := []string{"Less than 1 year", "1 Year"}
	for i := 2; i <= 19; i++ {
		v = append(v, fmt.Sprintf("%d Years", i))
	}
	return append(v, "20+ Years")
}

func init() {
	fieldByName = make(map[string]*field, len(allFields))
	for i := range allFields {
		f := &allFields[i]
		if f.values != nil {
			f.canon = make(map[string]uint8, len(f.values))
			f.index = make(map[string]uint8, len(f.values))
			for j, v := range f.values {
				f.canon[v] = uint8(j)
				f.index[strings.ToLower(v)] = uint8(j)
			}
		}
		fieldByName[f.name] = f
	}
	for i := range demoFields {
		demoFields[i].canon = allFields[len(textFields)+i].canon
		demoFields[i].index = allFields[len(textFields)+i].index
	}
}

// DemographicColumns returns the demographic column names (bucketed and
// rfm), in Columns order, without interests.
func DemographicColumns() []string {
	c := make([]string, 0, len(demoFields)+len(rfmFields))
	for _, f := range demoFields {
		c = append(c, f.name)
	}
	for _, f := range rfmFields {
		c = append(c, f.name)
	}
	return c
}

// Value returns the value of a column of r (Columns names; interests in
// alt_emails in their CSV form), or "" for an unknown column.
func (r *Record) Value(column string) string {
	switch column {
	case ColInterests:
		return r.Interests.String()
	case ColAltEmails:
		return strings.Join(r.AltEmails, ";")
	}
	if f := fieldByName[column]; f != nil {
		return *f.get(r)
	}
	return ""
}

// Getter returns a function reading a text column of a Record (any
// Columns name but interests), or nil: for callers that read the same
// columns of many records.
func Getter(column string) func(*Record) string {
	f := fieldByName[column]
	if f == nil {
		return nil
	}
	get := f.get
	return func(r *Record) string { return *get(r) }
}

// maxRFMDays bounds the average days between orders (100 years).
const maxRFMDays = 36500

func checkDays(s string) string {
	if len(s) > 5 || !isDigits(s) {
		return "not a whole number of days"
	}
	if n, _ := strconv.Atoi(s); n > maxRFMDays {
		return "more than 36500 days"
	}
	return ""
}

// checkDollars accepts whole dollars or dollars and two-digit cents, up to
// 9 digits of dollars.
func checkDollars(s string) string {
	whole, cents, dot := strings.Cut(s, ".")
	if len(whole) > 9 || !isDigits(whole) || dot && (len(cents) != 2 || !isDigits(cents)) {
		return "not whole dollars, or dollars and two-digit cents"
	}
	return ""
}

func checkDate(s string) string {
	if len(s) != 10 {
		return "not a YYYY-MM-DD date"
	}
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return "not a YYYY-MM-DD date"
	}
	return ""
}

// Columns returns the column names of a Record in their canonical order:
// the CSV header that WriteCSV writes and Import understands.
func Columns() []string {
	c := make([]string, 0, len(allFields)+1)
	for _, f := range allFields {
		c = append(c, f.name)
	}
	return append(c, ColInterests, ColAltEmails)
}

// Buckets returns the allowed values of a demographic column (for example
// "age" or "household_income"), in order, or nil for a column without a
// closed value set. For "interests" it returns the interest names.
func Buckets(column string) []string {
	if column == ColInterests {
		return slices.Clone(interestNames)
	}
	if f := fieldByName[column]; f != nil {
		return slices.Clone(f.values)
	}
	return nil
}

// NormalizeEmail trims surrounding white space and lower-cases the address:
// the form that is stored, compared and hashed.
func NormalizeEmail(s string) string {
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf {
			return strings.ToLower(s)
		}
	}
	return s
}

// ValidEmail reports whether s, already normalised, looks like an email
// address: one '@', a non-empty local part of at most 64 bytes, a domain of
// dot-separated labels with at least two labels, no white space or control
// characters, at most 254 bytes in all.
func ValidEmail(s string) bool {
	if len(s) < 3 || len(s) > 254 {
		return false
	}
	at := strings.IndexByte(s, '@')
	if at <= 0 || at > 64 || at == len(s)-1 || strings.IndexByte(s[at+1:], '@') >= 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == ',' || c == '"' || c == '<' || c == '>' {
			return false
		}
	}
	local, domain := s[:at], s[at+1:]
	if local[0] == '.' || local[len(local)-1] == '.' {
		return false
	}
	dots := 0
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		dots++
	}
	return dots >= 2
}

// EmailMD5 returns the lower-case hex MD5 of the normalised address.
func EmailMD5(email string) string {
	sum := md5.Sum([]byte(NormalizeEmail(email)))
	return hex.EncodeToString(sum[:])
}

// EmailSHA1 returns the lower-case hex SHA-1 of the normalised address.
func EmailSHA1(email string) string {
	sum := sha1.Sum([]byte(NormalizeEmail(email)))
	return hex.EncodeToString(sum[:])
}

// FieldError reports an invalid field. It never carries the value itself,
// only the column name and a reason, so that it can be logged.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// ErrInvalid is matched (errors.Is) by every FieldError.
var ErrInvalid = errors.New("people: invalid record")

func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Normalize puts r into its stored form: every text field trimmed, the email
// normalised, the state upper-cased, and each demographic value replaced by
// its canonical spelling when it matches a bucket regardless of case. It
// does not check anything; see Validate.
func (r *Record) Normalize() {
	for i := range allFields {
		f := &allFields[i]
		p := f.get(r)
		*p = strings.TrimSpace(*p)
		if f.index != nil && *p != "" {
			if _, ok := f.canon[*p]; ok {
				continue
			}
			if j, ok := f.index[strings.ToLower(*p)]; ok {
				*p = f.values[j]
			}
		}
	}
	r.Email = NormalizeEmail(r.Email)
	r.State = strings.ToUpper(r.State)
	r.normalizeAltEmails()
}

// normalizeAltEmails normalises the other addresses and drops empty ones,
// the primary one and repeats, keeping the first occurrence's place.
func (r *Record) normalizeAltEmails() {
	if len(r.AltEmails) == 0 {
		r.AltEmails = nil
		return
	}
	out := r.AltEmails[:0:0]
	for _, e := range r.AltEmails {
		if e = NormalizeEmail(e); e != "" && e != r.Email && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		out = nil
	}
	r.AltEmails = out
}

// ParseAltEmails splits the CSV form of alt_emails: addresses separated by
// ';' (so an address with a ';' cannot be listed), blanks ignored.
func ParseAltEmails(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ";") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Validate checks a normalised record: a valid email, text fields without
// control characters and at most MaxFieldLen bytes, a two-letter state, a
// zip of 5 digits (optionally followed by 4 more, with or without '-'),
// demographic values from their buckets, rfm values in their forms (whole
// days up to 36500, dollars like 42 or 42.50, a YYYY-MM-DD date) and known
// interests. The error is a *FieldError.
func (r *Record) Validate() error {
	if !ValidEmail(r.Email) {
		return &FieldError{ColEmail, "not an email address"}
	}
	for i := range allFields {
		f := &allFields[i]
		v := *f.get(r)
		if v == "" {
			continue
		}
		if f.values != nil {
			if _, ok := f.canon[v]; !ok {
				return &FieldError{f.name, "not one of the allowed values"}
			}
			continue
		}
		if f.check != nil {
			if why := f.check(v); why != "" {
				return &FieldError{f.name, why}
			}
			continue
		}
		if len(v) > MaxFieldLen {
			return &FieldError{f.name, "too long"}
		}
		if !utf8.ValidString(v) {
			return &FieldError{f.name, "not valid UTF-8"}
		}
		for _, c := range v {
			if c < ' ' || c == 0x7f {
				return &FieldError{f.name, "contains a control character"}
			}
		}
	}
	if r.State != "" && !(len(r.State) == 2 && isUpperAlpha(r.State)) {
		return &FieldError{ColState, "not a two-letter state code"}
	}
	if r.Zip != "" && !validZip(r.Zip) {
		return &FieldError{ColZip, "not a 5 or 9 digit zip code"}
	}
	if r.Interests&^allInterests != 0 {
		return &FieldError{ColInterests, "unknown interest"}
	}
	if len(r.AltEmails) > MaxAltEmails {
		return &FieldError{ColAltEmails, fmt.Sprintf("more than %d addresses", MaxAltEmails)}
	}
	for i, e := range r.AltEmails {
		if !ValidEmail(e) {
			return &FieldError{ColAltEmails, "not an email address"}
		}
		if e == r.Email || slices.Contains(r.AltEmails[:i], e) {
			return &FieldError{ColAltEmails, "repeats an address"}
		}
	}
	return nil
}

func isUpperAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func validZip(z string) bool {
	switch len(z) {
	case 5, 9:
		return isDigits(z)
	case 10:
		return z[5] == '-' && isDigits(z[:5]) && isDigits(z[6:])
	}
	return false
}

// Interests is the set of a person's interests, one bit per name in the
// order Buckets("interests") lists them (append-only: the bit positions are
// stored).
type Interests uint64

var interestNames = []string{
	"arts", "automotive", "books", "cooking", "crafts", "diy", "fashion", "fitness",
	"gaming", "gardening", "golf", "health", "home_decor", "movies", "music",
	"outdoors", "pets", "photography", "sports", "technology", "travel", "wine",
}

var (
	interestIndex = func() map[string]int {
		m := make(map[string]int, len(interestNames))
		for i, n := range interestNames {
			m[n] = i
		}
		return m
	}()
	allInterests = Interests(1)<<len(interestNames) - 1
)

// InterestsOf returns the set holding the given names; it fails on an
// unknown name. Names are matched case-insensitively.
func InterestsOf(names ...string) (Interests, error) {
	var s Interests
	for _, n := range names {
		i, ok := interestIndex[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			return 0, &FieldError{ColInterests, "unknown interest"}
		}
		s |= 1 << i
	}
	return s, nil
}

// ParseInterests parses the CSV form: names separated by ';' or '|' (an
// empty string is the empty set).
func ParseInterests(s string) (Interests, error) {
	var set Interests
	for n := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ';' || r == '|' }) {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		i, err := InterestsOf(n)
		if err != nil {
			return 0, err
		}
		set |= i
	}
	return set, nil
}

// Has reports whether the set holds the named interest.
func (s Interests) Has(name string) bool {
	i, ok := interestIndex[name]
	return ok && s&(1<<i) != 0
}

// Names returns the names in the set, in Buckets("interests") order.
func (s Interests) Names() []string {
	var out []string
	for i, n := range interestNames {
		if s&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Map returns the set as the API's object of booleans: every known
// interest, true when held.
func (s Interests) Map() map[string]bool {
	m := make(map[string]bool, len(interestNames))
	for i, n := range interestNames {
		m[n] = s&(1<<i) != 0
	}
	return m
}

// String is the CSV form: the names joined with ';'.
func (s Interests) String() string { return strings.Join(s.Names(), ";") }

// MarshalText writes the CSV form, so JSON carries it as a string.
func (s Interests) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses the CSV form.
func (s *Interests) UnmarshalText(b []byte) error {
	v, err := ParseInterests(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
