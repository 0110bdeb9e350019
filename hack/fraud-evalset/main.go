// Command fraud-evalset writes the labelled synthetic evaluation set of the
// fraud scorer (internal/refdata/fraud) and the fixtures it needs: a GeoIP network
// table and the IP lists (Tor, VPN, proxy, hosting).
//
//	go run ./hack/fraud-evalset            # writes internal/refdata/fraud/testdata/
//	go run ./hack/fraud-evalset -n 3000 -seed 1 -out internal/refdata/fraud/testdata
//
// The output is deterministic for a given -n and -seed. Every row is one
// query in time order, labelled "fraud" or "legit", with the verification
// verdict the scorer is to be given, the reference person record (when the
// lookup would find one) and the kind of case it was drawn from. All data is
// made up: names come from short lists of common names, addresses, phone
// numbers and IP addresses are generated, domains of "companies" are
// invented and the IP ranges are used only as labels of a test GeoIP
// database.
//
// The population mixes clean and noisy cases on purpose: legitimate users
// on VPNs, in offices sharing one IP, with random-looking nicknames or
// mistyped postal codes, and fraud that looks clean (a stolen identity used
// from a residential IP in the right country). See docs/fraud.md.
//
// Every row belongs to one of six tenants (the clients asking /fr), and
// some rows are reported by their tenant as fraud some time later, as
// honest feedback does: most fraud rows, a few legitimate ones by mistake.
// Two kinds cross tenants: serial fraud (one stolen identity used at
// several tenants in turn) and returning customers (a legitimate person
// signing up at another tenant). Tenants, reports and these two kinds are
// drawn from a random stream of their own, so that the other rows are
// those the single-tenant set had, in the same order.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"
)

// Case is one row of evalset.jsonl.
type Case struct {
	ID     int       `json:"id"`
	Label  string    `json:"label"` // "fraud" or "legit"
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Tenant string    `json:"tenant"` // the client that asked
	Input  Input     `json:"input"`
	Verify Verify    `json:"verify"`
	Person *Person   `json:"person,omitempty"`
	// Report is the tenant's fraud report of this row (its address, IP and
	// phone), when it sends one.
	Report *Report `json:"report,omitempty"`
}

// Report is a tenant's report of a row, sent at At.
type Report struct {
	At   time.Time `json:"at"`
	Type string    `json:"type"`
}

// Input mirrors fraud.Input.
type Input struct {
	Email       string `json:"email"`
	ReferenceID string `json:"reference_id,omitempty"`
	First       string `json:"first,omitempty"`
	Last        string `json:"last,omitempty"`
	Street      string `json:"street,omitempty"`
	City        string `json:"city,omitempty"`
	State       string `json:"state,omitempty"`
	Zip         string `json:"zip,omitempty"`
	Country     string `json:"country,omitempty"`
	Phone       string `json:"phone,omitempty"`
	IP          string `json:"ip,omitempty"`
	UserAgent   string `json:"user_agent,omitempty"`
}

// Verify is the verification verdict to give the scorer.
type Verify struct {
	Code        int      `json:"code"`
	DomainType  string   `json:"domain_type,omitempty"`
	Role        bool     `json:"role,omitempty"`
	Corrections []string `json:"corrections,omitempty"`
}

// Person is the reference record the person lookup returns for the email.
type Person struct {
	First  string `json:"first"`
	Last   string `json:"last"`
	Street string `json:"street"`
	City   string `json:"city"`
	Zip    string `json:"zip"`
}

// GeoNet is one network of the test GeoIP database.
type GeoNet struct {
	CIDR    string  `json:"cidr"`
	Country string  `json:"country"`
	Lat     float64 `json:"lat"`
	Lon     float64 `json:"lon"`
	Org     string  `json:"org"`
}

var (
	residential = map[string][]GeoNet{
		"US": {{"73.0.0.0/8", "US", 39.74, -104.99, "Comcast Cable"}, {"98.0.0.0/9", "US", 40.71, -74.0, "Charter Communications"}},
		"CA": {{"142.112.0.0/12", "CA", 43.65, -79.38, "Bell Canada"}},
		"GB": {{"81.96.0.0/12", "GB", 51.51, -0.13, "Virgin Media"}, {"86.0.0.0/11", "GB", 53.48, -2.24, "BT"}},
		"DE": {{"91.0.0.0/10", "DE", 52.52, 13.40, "Deutsche Telekom"}},
		"FR": {{"90.0.0.0/9", "FR", 48.86, 2.35, "Orange"}},
	}
	hostingNets = []GeoNet{
		{"104.131.0.0/16", "US", 40.71, -74.0, "DigitalOcean"},
		{"138.68.0.0/16", "DE", 50.11, 8.68, "DigitalOcean"},
		{"3.0.0.0/9", "US", 39.04, -77.49, "Amazon"},
		{"35.180.0.0/16", "FR", 48.86, 2.35, "Amazon"},
	}
	// unlistedHosting is a data centre the lists do not know: fraud from
	// there is only caught by other signals.
	unlistedHosting = GeoNet{"45.32.0.0/16", "US", 47.6, -122.3, "Vultr"}
	vpnNets         = []GeoNet{{"89.187.160.0/19", "GB", 51.51, -0.13, "DataCamp"}, {"146.70.0.0/16", "NL", 52.37, 4.9, "M247"}}
	torNets         = []GeoNet{{"185.220.100.0/22", "DE", 51.3, 9.49, "Tor exit operators"}}
	proxyNets       = []GeoNet{{"45.95.147.0/24", "NL", 52.37, 4.9, "Open proxies"}, {"193.32.162.0/24", "RU", 55.75, 37.62, "Open proxies"}}
)

var (
	firstNames = strings.Fields(`james mary robert patricia john jennifer michael linda david elizabeth william barbara richard susan
		joseph jessica thomas sarah christopher karen daniel nancy matthew lisa anthony betty mark sandra steven ashley
		paul emily andrew donna joshua michelle kevin amanda brian melissa george deborah timothy stephanie edward rebecca
		oliver amelia harry isla jack ava charlie mia leo grace lukas hannah felix lena jonas marie leon sophie maximilian
		emma louis jade gabriel chloe hugo lea arthur manon liam olivia noah zoe ethan nora lucas claire mohammed aisha
		wei mei raj priya carlos sofia diego valentina`)
	lastNames = strings.Fields(`smith johnson williams brown jones garcia miller davis rodriguez martinez hernandez lopez
		wilson anderson thomas taylor moore jackson martin lee thompson white harris clark lewis robinson walker young
		allen king wright scott hill green adams baker nelson campbell mitchell evans roberts turner phillips parker
		muller schmidt schneider fischer weber meyer wagner becker hoffmann schulz dubois durand leroy moreau lefebvre
		bernard petit richard nguyen patel khan singh chen wang kim tremblay gagnon roy cote bouchard murphy kelly walsh`)
	freeDomains = map[string][]string{
		"US": {"gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "icloud.com", "aol.com"},
		"CA": {"gmail.com", "hotmail.com", "yahoo.ca", "outlook.com"},
		"GB": {"gmail.com", "hotmail.co.uk", "yahoo.co.uk", "btinternet.com", "outlook.com"},
		"DE": {"gmail.com", "gmx.de", "web.de", "t-online.de", "outlook.de"},
		"FR": {"gmail.com", "orange.fr", "free.fr", "laposte.net", "hotmail.fr"},
	}
	disposableDomains = []string{"mailinator.com", "guerrillamail.com", "10minutemail.com", "temp-mail.org", "yopmail.com", "trashmail.com"}
	companyWords      = strings.Fields(`acme globex initech umbrella stark wayne hooli vandelay soylent cyberdyne tyrell wonka
		oscorp nakatomi gringotts monarch dunder pied piper massive dynamic aperture black mesa`)
	companySuffix = []string{"-corp.com", "-inc.com", ".co", "-group.com", "-labs.io", "-gmbh.de", "-ltd.co.uk", "-sa.fr"}
	nickWords     = strings.Fields(`sunny skater gamer dragon ninja tiger wolf shadow angel star rocket pixel coffee
		music happy lucky cool storm blue red panda mango cookie`)
	streetNames = strings.Fields(`Main Oak Pine Maple Cedar Elm Washington Lake Hill Park Church High Station Victoria
		Mill School Garden Bahnhof Schiller Goethe Republique Victor-Hugo Pasteur`)
	streetTypes = []string{"Street", "St", "Avenue", "Ave", "Road", "Rd", "Lane", "Drive", "Court", "Boulevard"}
	browserUAs  = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36 Edg/123.0",
	}
	botUAs = []string{
		"curl/8.5.0", "python-requests/2.31.0", "Go-http-client/1.1", "Wget/1.21.4",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Selenium/4.18",
		"Mozilla/5.0 (X11; Linux x86_64) Playwright/1.43 Chrome/124.0",
	}
	// appUAs are legitimate mobile apps posting through an HTTP library:
	// the UA signal gets them wrong.
	appUAs = []string{"okhttp/4.12.0", "MyShopApp/3.2 CFNetwork/1494.0.7 Darwin/23.4.0"}
)

type usState struct {
	code   string
	lo, hi int // zip3 prefix range
	cities []string
}

var usStates = []usState{
	{"NY", 100, 149, []string{"New York", "Buffalo", "Albany"}},
	{"CA", 900, 961, []string{"Los Angeles", "San Francisco", "San Diego"}},
	{"TX", 750, 799, []string{"Houston", "Dallas", "Austin"}},
	{"IL", 600, 629, []string{"Chicago", "Springfield"}},
	{"FL", 320, 339, []string{"Miami", "Orlando", "Tampa"}},
	{"WA", 980, 994, []string{"Seattle", "Spokane"}},
	{"MA", 10, 27, []string{"Boston", "Worcester"}},
	{"CO", 800, 816, []string{"Denver", "Boulder"}},
	{"GA", 300, 319, []string{"Atlanta", "Savannah"}},
	{"PA", 150, 196, []string{"Philadelphia", "Pittsburgh"}},
}

var cities = map[string][]string{
	"CA": {"Toronto", "Montreal", "Vancouver", "Ottawa"},
	"GB": {"London", "Manchester", "Leeds", "Bristol"},
	"DE": {"Berlin", "Hamburg", "Munich", "Cologne"},
	"FR": {"Paris", "Lyon", "Marseille", "Toulouse"},
}

var caProvinces = []string{"ON", "QC", "BC", "AB"}

type gen struct {
	r   *rand.Rand
	now time.Time
	n   int
	out []Case

	// x draws tenants, reports and the cross-tenant kinds; r the rest.
	x *gen
	// group is the tenant of the ring, series or office being emitted
	// ("": each row draws its own).
	group string
	// pending are the serial fraud hits to come, in time order; pool the
	// legitimate consumers who may sign up at another tenant.
	pending []serialHit
	pool    []Case
	cross   int // rows of the cross-tenant kinds
}

// tenants of the set and their shares of the traffic.
var (
	tenants      = []string{"shop-1", "shop-2", "shop-3", "shop-4", "shop-5", "shop-6"}
	tenantShares = []float64{0.30, 0.25, 0.15, 0.12, 0.10, 0.08}
)

// Honest feedback: the share of fraud rows their tenant reports, and of
// legitimate rows reported by mistake (disputes, misjudged cases), after
// a delay of 1 hour to 5 days.
const (
	reportFraud   = 0.6
	reportMistake = 0.01
)

var reportTypes = map[string]string{
	"bot_ring": "bot", "disposable": "fake_account", "stolen_identity": "identity_theft",
	"synthetic_identity": "fake_account", "tumbling": "promotion_abuse", "invalid_email": "fake_account",
	"serial_fraud": "payment_fraud",
}

// tenant draws a tenant by traffic share.
func (x *gen) tenant() string {
	f := x.r.Float64()
	for i, s := range tenantShares {
		if f < s {
			return tenants[i]
		}
		f -= s
	}
	return tenants[len(tenants)-1]
}

func (g *gen) pick(ss []string) string { return ss[g.r.IntN(len(ss))] }
func (g *gen) chance(p float64) bool   { return g.r.Float64() < p }
func (g *gen) digits(n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(byte('0' + g.r.IntN(10)))
	}
	return b.String()
}

func (g *gen) letters(n int, set string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[g.r.IntN(len(set))]
	}
	return string(b)
}

// ipIn returns a random host address in cidr.
func (g *gen) ipIn(cidr string) string {
	p := netip.MustParsePrefix(cidr)
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if g.r.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	b[len(b)-1] |= 1 // never the network address
	a, _ := netip.AddrFromSlice(b)
	return a.String()
}

func (g *gen) ipOf(nets []GeoNet) string { return g.ipIn(nets[g.r.IntN(len(nets))].CIDR) }

var countries = []string{"US", "US", "US", "US", "US", "US", "US", "US", "US", "US", "US", "CA", "CA", "GB", "GB", "GB", "DE", "DE", "FR"}

// phone returns a valid number of the country and type, in a format a
// person would type, or "" when none could be made.
func (g *gen) phone(country string, typ phonenumbers.PhoneNumberType) string {
	ex := phonenumbers.GetExampleNumberForType(country, typ)
	if ex == nil {
		return ""
	}
	nsn := phonenumbers.GetNationalSignificantNumber(ex)
	for range 200 {
		keep := min(len(nsn), 3)
		if country == "US" || country == "CA" {
			keep = 3
		}
		cand := nsn[:keep] + g.digits(len(nsn)-keep)
		n, err := phonenumbers.Parse(cand, country)
		if err != nil || !phonenumbers.IsValidNumberForRegion(n, country) {
			continue
		}
		if t := phonenumbers.GetNumberType(n); t != typ && !(t == phonenumbers.FIXED_LINE_OR_MOBILE && (typ == phonenumbers.MOBILE || typ == phonenumbers.FIXED_LINE)) {
			continue
		}
		if g.chance(0.5) {
			return phonenumbers.Format(n, phonenumbers.INTERNATIONAL)
		}
		return phonenumbers.Format(n, phonenumbers.NATIONAL)
	}
	return phonenumbers.Format(ex, phonenumbers.E164)
}

type address struct{ street, city, state, zip string }

func (g *gen) address(country string) address {
	a := address{street: fmt.Sprintf("%d %s %s", 1+g.r.IntN(2500), g.pick(streetNames), g.pick(streetTypes))}
	switch country {
	case "US":
		s := usStates[g.r.IntN(len(usStates))]
		a.state, a.city = s.code, g.pick(s.cities)
		a.zip = fmt.Sprintf("%03d%s", s.lo+g.r.IntN(s.hi-s.lo+1), g.digits(2))
	case "CA":
		a.state, a.city = g.pick(caProvinces), g.pick(cities["CA"])
		const l1, l2 = "ABCEGHJKLMNPRSTVXY", "ABCEGHJKLMNPRSTVWXYZ"
		a.zip = fmt.Sprintf("%c%d%c %d%c%d", l1[g.r.IntN(len(l1))], g.r.IntN(10), l2[g.r.IntN(len(l2))], g.r.IntN(10), l2[g.r.IntN(len(l2))], g.r.IntN(10))
	case "GB":
		a.city = g.pick(cities["GB"])
		a.zip = fmt.Sprintf("%s%d %d%s", g.pick([]string{"SW", "E", "M", "LS", "BS", "N", "W"}), 1+g.r.IntN(20), g.r.IntN(10), g.letters(2, "ABDEFGHJLNPQRSTUWXYZ"))
		a.street = fmt.Sprintf("%d %s Road", 1+g.r.IntN(300), g.pick(streetNames))
	case "DE":
		a.city = g.pick(cities["DE"])
		a.zip = fmt.Sprintf("%05d", 1067+g.r.IntN(98000))
		a.street = fmt.Sprintf("%sstraße %d", g.pick(streetNames), 1+g.r.IntN(200))
	case "FR":
		a.city = g.pick(cities["FR"])
		a.zip = fmt.Sprintf("%05d", 1000+g.r.IntN(94000))
		a.street = fmt.Sprintf("%d rue %s", 1+g.r.IntN(200), g.pick(streetNames))
	}
	return a
}

// nameLocal builds a local part from a name in one of the usual patterns.
func (g *gen) nameLocal(first, last string) string {
	switch g.r.IntN(7) {
	case 0:
		return first + "." + last
	case 1:
		return first + last
	case 2:
		return first[:1] + last
	case 3:
		return first + "_" + last
	case 4:
		return first + "." + last + fmt.Sprint(60+g.r.IntN(45)) // birth year
	case 5:
		return first + fmt.Sprint(1960+g.r.IntN(45))
	default:
		return last + "." + first
	}
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (g *gen) emit(label, kind string, in Input, v Verify, p *Person) {
	g.now = g.now.Add(time.Duration(10+g.r.IntN(600)) * time.Second)
	g.add(label, kind, in, v, p)
}

// add appends a row at g.now, with its tenant and its report.
func (g *gen) add(label, kind string, in Input, v Verify, p *Person) {
	g.n++
	in.ReferenceID = fmt.Sprintf("ref-%05d", g.n)
	tenant := g.group
	if tenant == "" {
		tenant = g.x.tenant()
	}
	c := Case{ID: g.n, Label: label, Kind: kind, At: g.now, Tenant: tenant, Input: in, Verify: v, Person: p}
	share, typ := reportMistake, "chargeback"
	if label == "fraud" {
		share, typ = reportFraud, reportTypes[kind]
	}
	if g.x.chance(share) {
		c.Report = &Report{At: g.now.Add(time.Hour + time.Duration(g.x.r.Int64N(int64(5*24*time.Hour)))), Type: typ}
	}
	g.out = append(g.out, c)
	if kind == "legit_consumer" && g.x.chance(0.3) {
		g.pool = append(g.pool, c)
	}
}

// addLater appends a row of the cross-tenant kinds, a little after the
// last one (without drawing from r, so the other rows stay as they were).
func (g *gen) addLater(label, kind, tenant string, in Input, v Verify, p *Person) {
	g.now = g.now.Add(time.Duration(10+g.x.r.IntN(600)) * time.Second)
	g.group = tenant
	g.add(label, kind, in, v, p)
	g.group = ""
	g.cross++
}

// serialHit is one use of a serial fraudster's identity at a tenant.
type serialHit struct {
	at     time.Time
	tenant string
	in     Input
	p      *Person
}

// serialFraud starts a fraudster who uses one stolen identity (address,
// name, phone, often one IP) at 3-6 tenants in turn, 6 to 48 hours apart:
// the case a consortium of tenants is for.
func (g *gen) serialFraud() {
	x := g.x
	country := x.pick([]string{"US", "US", "US", "GB", "CA"})
	first, last := x.pick(firstNames), x.pick(lastNames)
	email := x.nameLocal(first, last) + "@" + x.pick(freeDomains[country])
	phone := x.phone("GB", phonenumbers.VOIP)
	if x.chance(0.5) {
		phone = x.phone(country, phonenumbers.MOBILE)
	}
	ip := x.ipOf(residential[country])
	if x.chance(0.4) {
		ip = x.ipOf(vpnNets)
	}
	victim, drop := x.address(country), x.address(country)
	var p *Person
	if x.chance(0.7) {
		p = &Person{First: title(first), Last: title(last), Street: victim.street, City: victim.city, Zip: victim.zip}
	}
	order := slices.Clone(tenants)
	x.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	at := g.now
	for _, tenant := range order[:3+x.r.IntN(4)] {
		in := Input{Email: email, First: title(first), Last: title(last), Country: country, Phone: phone, IP: ip,
			Street: drop.street, City: drop.city, State: drop.state, Zip: drop.zip, UserAgent: x.pick(browserUAs)}
		if x.chance(0.3) {
			in.IP = x.ipOf(residential[country]) // another network this time
		}
		g.pending = append(g.pending, serialHit{at: at, tenant: tenant, in: in, p: p})
		at = at.Add(6*time.Hour + time.Duration(x.r.Int64N(int64(42*time.Hour))))
	}
	slices.SortStableFunc(g.pending, func(a, b serialHit) int { return a.at.Compare(b.at) })
}

// returning signs up a legitimate consumer of the pool again, at another
// tenant, from a residential IP of their country.
func (g *gen) returning() {
	x := g.x
	i := x.r.IntN(len(g.pool))
	c := g.pool[i]
	if x.chance(0.5) {
		g.pool = slices.Delete(g.pool, i, i+1)
	}
	tenant := c.Tenant
	for tenant == c.Tenant {
		tenant = x.tenant()
	}
	in := c.Input
	if country := in.Country; residential[country] != nil {
		in.IP = x.ipOf(residential[country])
	}
	g.addLater("legit", "legit_returning", tenant, in, c.Verify, c.Person)
}

// crossTenant adds the rows of the cross-tenant kinds due before the next
// row: serial hits whose time has come, a new serial fraudster now and
// then, and now and then a returning customer.
func (g *gen) crossTenant() {
	for len(g.pending) > 0 && !g.pending[0].at.After(g.now) {
		h := g.pending[0]
		g.pending = g.pending[1:]
		g.addLater("fraud", "serial_fraud", h.tenant, h.in, g.x.verifyGood("freeisp"), h.p)
	}
	if g.x.chance(0.012) {
		g.serialFraud()
	}
	if len(g.pool) > 0 && g.x.chance(0.06) {
		g.returning()
	}
}

func (g *gen) verifyGood(domainType string) Verify {
	switch x := g.r.Float64(); {
	case x < 0.62:
		return Verify{Code: 50, DomainType: domainType}
	case x < 0.84:
		return Verify{Code: 20, DomainType: domainType}
	case x < 0.92:
		if domainType == "biz" {
			return Verify{Code: 45, DomainType: domainType} // catch-all
		}
		return Verify{Code: 20, DomainType: domainType}
	case x < 0.95:
		return Verify{Code: 5} // timed out
	case x < 0.975:
		return Verify{Code: 400} // mistyped mailbox
	default:
		return Verify{Code: 10, DomainType: domainType}
	}
}

// legit makes one legitimate sign-up.
func (g *gen) legit(office *officeState) {
	country := g.pick(countries)
	first, last := g.pick(firstNames), g.pick(lastNames)
	var domain, domainType, kind string
	kind = "legit_consumer"
	if office != nil {
		domain, domainType, country, kind = office.domain, "biz", office.country, "legit_office"
	} else if g.chance(0.25) {
		domain = g.pick(companyWords) + g.pick(companySuffix)
		domainType, kind = "biz", "legit_business"
	} else {
		domain, domainType = g.pick(freeDomains[country]), "freeisp"
	}
	local := g.nameLocal(first, last)
	if office == nil && g.chance(0.12) {
		local = g.pick(nickWords) + g.pick(nickWords) + fmt.Sprint(g.r.IntN(1000)) // nickname: no name in it
	}
	if g.chance(0.02) {
		local = g.letters(9, "bcdfghjklmnpqrstvwxz0123456789") // an old random handle
	}
	if g.chance(0.04) {
		local += "+" + g.pick([]string{"shop", "news", "orders"})
	}
	v := g.verifyGood(domainType)
	email := local + "@" + domain
	if g.chance(0.03) && domainType == "freeisp" && strings.HasPrefix(domain, "gmail") {
		email, v = local+"@gmial.com", Verify{Code: 505, Corrections: []string{local + "@gmail.com"}}
	}
	if g.chance(0.015) {
		local, v.Role = g.pick([]string{"info", "contact", "office", "admin"}), true
		email = local + "@" + domain
	}
	in := Input{Email: email, Country: country}
	if g.chance(0.85) {
		in.First, in.Last = title(first), title(last)
	}
	if g.chance(0.1) {
		in.Country = ""
	}
	switch x := g.r.Float64(); {
	case office != nil:
		in.IP = office.ip
	case x < 0.80:
		in.IP = g.ipOf(residential[country])
	case x < 0.86:
		in.IP = g.ipOf(vpnNets) // privacy-minded user
	case x < 0.88:
		in.IP = g.ipOf(hostingNets) // cloud desktop, corporate egress
	case x < 0.92:
		in.IP = g.ipOf(residential[g.pick([]string{"US", "GB", "DE", "FR", "CA"})]) // travelling
	case x < 0.93:
		in.IP = "10." + fmt.Sprint(g.r.IntN(256)) + ".0.7" // a proxy header gone wrong
	}
	switch x := g.r.Float64(); {
	case x < 0.55:
		in.Phone = g.phone(country, phonenumbers.MOBILE)
	case x < 0.72:
		in.Phone = g.phone(country, phonenumbers.FIXED_LINE)
	case x < 0.74:
		in.Phone = g.digits(6) // typo
	}
	var addr address
	if g.chance(0.7) {
		addr = g.address(country)
		in.Street, in.City, in.State, in.Zip = addr.street, addr.city, addr.state, addr.zip
		if g.chance(0.03) && in.Zip != "" {
			in.Zip = in.Zip[:len(in.Zip)-1] // mistyped
		}
	}
	switch x := g.r.Float64(); {
	case x < 0.88:
		in.UserAgent = g.pick(browserUAs)
	case x < 0.95:
	default:
		in.UserAgent = g.pick(appUAs)
	}
	var p *Person
	if in.Street != "" && g.chance(0.6) {
		p = &Person{First: title(first), Last: title(last), Street: addr.street, City: addr.city, Zip: addr.zip}
		if g.chance(0.12) { // moved since the record was made
			other := g.address(country)
			p.Street, p.City, p.Zip = other.street, other.city, other.zip
		}
	}
	g.emit("legit", kind, in, v, p)
}

type officeState struct {
	domain, country, ip string
	left                int
	tenant              string // colleagues sign up with one client
}

// fraud makes one fraudulent query of a random kind; rings emit several.
func (g *gen) fraud() {
	switch x := g.r.Float64(); {
	case x < 0.15:
		g.botRing()
	case x < 0.30:
		g.disposable()
	case x < 0.56:
		g.stolenIdentity()
	case x < 0.74:
		g.synthetic()
	case x < 0.86:
		g.tumbling()
	default:
		g.invalidEmail()
	}
}

func (g *gen) randomLocal() string {
	if g.chance(0.5) {
		return g.letters(8+g.r.IntN(5), "abcdefghijklmnopqrstuvwxyz")
	}
	return g.letters(8+g.r.IntN(5), "abcdefghijklmnopqrstuvwxyz0123456789")
}

func (g *gen) badIP() string {
	switch x := g.r.Float64(); {
	case x < 0.25:
		return g.ipOf(torNets)
	case x < 0.45:
		return g.ipOf(proxyNets)
	case x < 0.75:
		return g.ipOf(hostingNets)
	case x < 0.9:
		return g.ipIn(unlistedHosting.CIDR)
	default:
		return g.ipOf(vpnNets)
	}
}

// botRing: scripted sign-ups with random addresses from one source, at
// one tenant.
func (g *gen) botRing() {
	g.group = g.x.tenant()
	defer func() { g.group = "" }()
	ip := g.badIP()
	ua := g.pick(botUAs)
	if g.chance(0.25) {
		ua = g.pick(browserUAs) // spoofed
	}
	country := g.pick(countries)
	for range 2 + g.r.IntN(4) {
		domain, dt := g.pick(freeDomains["US"]), "freeisp"
		v := Verify{Code: []int{20, 50, 400, 20}[g.r.IntN(4)], DomainType: dt}
		if v.Code == 400 {
			v.DomainType = ""
		}
		in := Input{Email: g.randomLocal() + "@" + domain, IP: ip, UserAgent: ua}
		if g.chance(0.4) {
			in.First, in.Last, in.Country = title(g.pick(firstNames)), title(g.pick(lastNames)), country
		}
		g.emit("fraud", "bot_ring", in, v, nil)
	}
}

func (g *gen) disposable() {
	first, last := g.pick(firstNames), g.pick(lastNames)
	local := g.nameLocal(first, last)
	if g.chance(0.5) {
		local = g.randomLocal()
	}
	country := g.pick(countries)
	in := Input{Email: local + "@" + g.pick(disposableDomains), First: title(first), Last: title(last), Country: country, UserAgent: g.pick(browserUAs)}
	switch x := g.r.Float64(); {
	case x < 0.5:
		in.IP = g.ipOf(residential[country])
	case x < 0.8:
		in.IP = g.badIP()
	}
	g.emit("fraud", "disposable", in, Verify{Code: 525, DomainType: "disposable"}, nil)
}

// stolenIdentity: a real person's email and name, the fraudster's delivery
// address, phone and network.
func (g *gen) stolenIdentity() {
	country := g.pick(countries)
	first, last := g.pick(firstNames), g.pick(lastNames)
	domain := g.pick(freeDomains[country])
	victim := g.address(country)
	in := Input{Email: g.nameLocal(first, last) + "@" + domain, First: title(first), Last: title(last), Country: country}
	dropCountry := country
	if g.chance(0.3) {
		dropCountry = g.pick([]string{"US", "GB", "DE", "FR", "CA"})
	}
	drop := g.address(dropCountry)
	if g.chance(0.75) {
		in.Street, in.City, in.State, in.Zip = drop.street, drop.city, drop.state, drop.zip
		if dropCountry != country {
			in.Country = dropCountry
		}
	} else if g.chance(0.5) {
		in.Street, in.City, in.State, in.Zip = victim.street, victim.city, victim.state, victim.zip
	}
	switch x := g.r.Float64(); {
	case x < 0.35:
		in.IP = g.ipOf(vpnNets)
	case x < 0.55:
		in.IP = g.badIP()
	case x < 0.75:
		in.IP = g.ipOf(residential[g.pick([]string{"US", "GB", "DE", "FR", "CA"})])
	default:
		in.IP = g.ipOf(residential[country]) // clean-looking
	}
	switch x := g.r.Float64(); {
	case x < 0.3:
		in.Phone = g.phone("GB", phonenumbers.VOIP)
	case x < 0.5:
		in.Phone = g.phone(g.pick([]string{"US", "GB", "DE", "FR"}), phonenumbers.MOBILE)
	case x < 0.7:
		in.Phone = g.phone(country, phonenumbers.MOBILE)
	}
	if g.chance(0.85) {
		in.UserAgent = g.pick(browserUAs)
	}
	var p *Person
	if g.chance(0.8) {
		p = &Person{First: title(first), Last: title(last), Street: victim.street, City: victim.city, Zip: victim.zip}
	}
	g.emit("fraud", "stolen_identity", in, g.verifyGood("freeisp"), p)
}

// synthetic: a made-up person whose details do not hang together.
func (g *gen) synthetic() {
	country := g.pick(countries)
	first, last := g.pick(firstNames), g.pick(lastNames)
	local := first + last + g.digits(5+g.r.IntN(3))
	if g.chance(0.4) {
		local = g.randomLocal()
	}
	in := Input{Email: local + "@" + g.pick(freeDomains["US"]), First: title(first), Last: title(last), Country: country}
	addr := g.address(country)
	in.Street, in.City, in.State, in.Zip = addr.street, addr.city, addr.state, addr.zip
	switch x := g.r.Float64(); {
	case x < 0.35 && country == "US":
		other := usStates[g.r.IntN(len(usStates))]
		in.State = other.code // ZIP of one state, another state
	case x < 0.6:
		in.Zip = g.digits(4) // impossible code
	}
	switch x := g.r.Float64(); {
	case x < 0.35:
		in.Phone = "555" + g.digits(4)
	case x < 0.6:
		in.Phone = g.phone("GB", phonenumbers.VOIP)
	case x < 0.8:
		in.Phone = g.phone(country, phonenumbers.MOBILE)
	}
	if g.chance(0.7) {
		in.IP = g.badIP()
	} else {
		in.IP = g.ipOf(residential[g.pick([]string{"US", "GB", "DE", "FR", "CA"})])
	}
	in.UserAgent = g.pick(browserUAs)
	if g.chance(0.3) {
		in.UserAgent = g.pick(botUAs)
	}
	g.emit("fraud", "synthetic_identity", in, g.verifyGood("freeisp"), nil)
}

// tumbling: variants of one mailbox to claim a promotion many times, at
// one tenant.
func (g *gen) tumbling() {
	g.group = g.x.tenant()
	defer func() { g.group = "" }()
	first, last := g.pick(firstNames), g.pick(lastNames)
	base := first + "." + last
	domain := "gmail.com"
	ip := g.ipOf(residential["US"])
	if g.chance(0.5) {
		ip = g.badIP()
	}
	phone := ""
	if g.chance(0.5) {
		phone = g.phone("US", phonenumbers.MOBILE)
	}
	ua := g.pick(browserUAs)
	for i := range 3 + g.r.IntN(3) {
		var local string
		switch g.r.IntN(3) {
		case 0:
			local = base + "+" + g.letters(3, "abcdefghijklmnopqrstuvwxyz")
		case 1:
			local = strings.ReplaceAll(base, ".", "") + fmt.Sprint(i+1)
		default:
			local = first + "." + last + fmt.Sprint(10+g.r.IntN(90))
		}
		in := Input{Email: local + "@" + domain, First: title(first), Last: title(last), Country: "US", IP: ip, Phone: phone, UserAgent: ua}
		if g.chance(0.5) {
			in.IP = g.ipOf(residential["US"]) // rotating address
		}
		g.emit("fraud", "tumbling", in, Verify{Code: 50, DomainType: "freeisp"}, nil)
	}
}

// invalidEmail: an address that cannot receive mail, given to get past a
// sign-up form.
func (g *gen) invalidEmail() {
	country := g.pick(countries)
	first, last := g.pick(firstNames), g.pick(lastNames)
	local := g.nameLocal(first, last)
	if g.chance(0.5) {
		local = g.randomLocal()
	}
	var v Verify
	domain := g.pick(freeDomains[country])
	switch g.r.IntN(3) {
	case 0:
		v = Verify{Code: 400}
	case 1:
		domain = g.letters(7, "abcdefghijklmnopqrstuvwxyz") + ".com"
		v = Verify{Code: 310}
	default:
		v = Verify{Code: 500, Role: true}
		local = g.pick([]string{"abuse", "postmaster", "spam", "noreply"})
	}
	in := Input{Email: local + "@" + domain, Country: country, UserAgent: g.pick(append(browserUAs, botUAs...))}
	if g.chance(0.5) {
		in.First, in.Last = title(first), title(last)
	}
	if g.chance(0.6) {
		in.IP = g.badIP()
	} else {
		in.IP = g.ipOf(residential[country])
	}
	g.emit("fraud", "invalid_email", in, v, nil)
}

func main() {
	out := flag.String("out", "internal/refdata/fraud/testdata", "output directory")
	n := flag.Int("n", 3000, "approximate number of rows")
	seed := flag.Uint64("seed", 1, "random seed")
	fraudShare := flag.Float64("fraud", 0.2, "share of fraud draws (rings emit several rows per draw)")
	flag.Parse()

	cases := generate(*n, *seed, *fraudShare)
	if err := write(*out, cases); err != nil {
		fmt.Fprintln(os.Stderr, "fraud-evalset:", err)
		os.Exit(1)
	}
	fraud := 0
	for _, c := range cases {
		if c.Label == "fraud" {
			fraud++
		}
	}
	fmt.Printf("wrote %d rows (%d fraud, %d legit) to %s\n", len(cases), fraud, len(cases)-fraud, *out)
}

// generate draws at least n cases of the single-tenant kinds in time
// order, and the cross-tenant rows among them.
func generate(n int, seed uint64, fraudShare float64) []Case {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
	g.x = &gen{r: rand.New(rand.NewPCG(seed, 0x7e4a47))}
	var office *officeState
	for len(g.out)-g.cross < n {
		g.crossTenant()
		switch {
		case office != nil && office.left > 0 && g.chance(0.5):
			if office.tenant == "" {
				office.tenant = g.x.tenant()
			}
			g.group = office.tenant
			g.legit(office)
			g.group = ""
			office.left--
		case g.chance(fraudShare):
			g.fraud()
		case g.chance(0.01):
			// An office: several colleagues sign up from one IP within hours.
			c := g.pick([]string{"US", "GB", "DE"})
			office = &officeState{domain: g.pick(companyWords) + g.pick(companySuffix), country: c, ip: g.ipOf(residential[c]), left: 4 + g.r.IntN(6)}
		default:
			g.legit(nil)
		}
	}
	return g.out
}

func write(dir string, cases []Case) error {
	if err := os.MkdirAll(filepath.Join(dir, "evalset-lists"), 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "evalset.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, c := range cases {
		if err := enc.Encode(c); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}

	var geo []GeoNet
	for _, c := range []string{"US", "CA", "GB", "DE", "FR"} {
		geo = append(geo, residential[c]...)
	}
	geo = append(geo, hostingNets...)
	geo = append(geo, unlistedHosting)
	geo = append(geo, vpnNets...)
	geo = append(geo, torNets...)
	geo = append(geo, proxyNets...)
	b, err := json.MarshalIndent(geo, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "evalset-geo.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	lists := []struct {
		name string
		nets []GeoNet
	}{{"tor", torNets}, {"vpn", vpnNets}, {"proxy", proxyNets}, {"hosting", hostingNets}}
	for _, l := range lists {
		var sb strings.Builder
		sb.WriteString("# Evaluation fixture written by hack/fraud-evalset; not a real " + l.name + " list.\n")
		for _, n := range l.nets {
			sb.WriteString(n.CIDR + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "evalset-lists", l.name+".txt"), []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
