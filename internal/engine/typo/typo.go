// Package typo suggests corrections for mistyped email addresses: a
// misspelt domain of a well-known mail provider (gmial.com, gmail.con), a
// doubled or misplaced '@', a comma for a dot, a missing dot before the TLD
// (gmailcom, examplecom) and stray punctuation around the address.
//
// Suggestions are conservative: a domain that is itself a known provider is
// never changed (mail.com does not become gmail.com), a name is changed only
// by a spelling distance small for its length (Damerau–Levenshtein, optimal
// string alignment: one edit for short domains, two for longer ones, a swap
// of two letters only for names of three letters), and a real TLD different
// from the provider's is corrected only into .com, .net or .org and only when
// the name is right (gmail.co and gmail.cm become gmail.com; gnail.co,
// hotmail.be and yahoo.com.ar stay).
// Suggest does not allocate for an address it has nothing to say about in
// the common case (a valid-looking address with a lower-case domain and a
// common TLD); an upper-case letter in the domain costs one allocation.
package typo

import (
	"math/bits"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

// MaxSuggestions is the most addresses Suggest returns.
const MaxSuggestions = 3

// defaultProviders are well-known mailbox providers, most used first (the
// order breaks ties between equally likely corrections).
var defaultProviders = []string{
	"gmail.com", "yahoo.com", "hotmail.com", "outlook.com", "aol.com", "icloud.com",
	"live.com", "msn.com", "comcast.net", "verizon.net", "att.net", "sbcglobal.net",
	"me.com", "mac.com", "googlemail.com", "ymail.com", "rocketmail.com", "bellsouth.net",
	"cox.net", "charter.net", "earthlink.net", "mail.com", "email.com", "gmx.com",
	"gmx.net", "gmx.de", "gmx.at", "gmx.ch", "web.de", "t-online.de", "freenet.de",
	"yahoo.co.uk", "yahoo.fr", "yahoo.de", "yahoo.es", "yahoo.it", "yahoo.ca",
	"yahoo.co.in", "yahoo.co.jp", "yahoo.com.br", "hotmail.co.uk", "hotmail.fr",
	"hotmail.de", "hotmail.it", "hotmail.es", "live.co.uk", "btinternet.com", "sky.com",
	"orange.fr", "free.fr", "laposte.net", "wanadoo.fr", "libero.it", "protonmail.com",
	"proton.me", "pm.me", "tutanota.com", "zoho.com", "fastmail.com", "yandex.ru",
	"yandex.com", "mail.ru", "rambler.ru", "qq.com", "163.com", "126.com", "sina.com",
	"naver.com", "hanmail.net", "rediffmail.com", "uol.com.br", "bol.com.br",
	"seznam.cz", "wp.pl", "o2.pl", "interia.pl", "shaw.ca", "rogers.com", "bigpond.com",
	"optusnet.com.au",
}

// notTypos are real, unrelated domains within a provider's spelling distance;
// they are never corrected.
var notTypos = []string{"cloud.com", "y7mail.com"}

// commonTLDs are ICANN public suffixes known without a public suffix lookup.
// Those of three letters or more without their dots are tried, longest first,
// when a domain lacks the dot before its TLD (examplecom, examplecouk). The
// order of the single-label ones of three letters or more ranks corrections
// of a mistyped TLD (example.con).
var commonTLDs = []string{
	"com", "net", "org", "edu", "gov", "info", "biz", "io", "co", "me", "us", "ca",
	"uk", "co.uk", "org.uk", "ac.uk", "de", "fr", "it", "es", "nl", "be", "ch", "at",
	"se", "no", "dk", "fi", "pl", "ru", "ua", "cz", "sk", "hu", "ro", "pt", "gr", "ie",
	"tr", "com.tr", "il", "co.il", "in", "co.in", "jp", "co.jp", "ne.jp", "cn",
	"com.cn", "kr", "co.kr", "tw", "com.tw", "hk", "com.hk", "sg", "com.sg", "my",
	"com.my", "au", "com.au", "net.au", "nz", "co.nz", "za", "co.za", "br", "com.br",
	"ar", "com.ar", "mx", "com.mx", "cl", "pe",
}

// DefaultProviders returns a copy of the provider list Default uses.
func DefaultProviders() []string { return append([]string(nil), defaultProviders...) }

type provider struct {
	domain string
	name   string // first label: "yahoo"
	suffix string // the rest: "co.uk"
	labels int
	rank   int
	chars  uint64 // charMask(name)
	// maxName and maxTotal are the edits allowed in the name and in all.
	maxName, maxTotal int
}

// Corrector suggests corrections against a list of provider domains. It is
// immutable and safe for concurrent use.
type Corrector struct {
	providers []provider
	known     map[string]bool     // providers and notTypos: never corrected
	noDots    map[string]string   // provider without dots -> provider
	byName    map[string][]string // provider name -> providers, most used first
	tlds      map[string]bool     // commonTLDs
	splits    []string            // commonTLDs, longest first
	maxName   int                 // longest provider name
	// shapes[labels][len(name)] are the indexes of the providers with that
	// many labels and a name that long, in rank order.
	shapes [][][]int
}

// New returns a corrector for the given provider domains (case-insensitive;
// blanks and duplicates ignored), most used first.
func New(providers []string) *Corrector {
	c := &Corrector{
		known:  map[string]bool{},
		noDots: map[string]string{},
		byName: map[string][]string{},
		tlds:   map[string]bool{},
	}
	for _, p := range providers {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		dot := strings.IndexByte(p, '.')
		if dot <= 0 || dot == len(p)-1 || c.known[p] {
			continue
		}
		c.known[p] = true
		pr := provider{
			domain: p, name: p[:dot], suffix: p[dot+1:],
			labels: strings.Count(p, ".") + 1, rank: len(c.providers),
			chars: charMask(p[:dot]), maxName: 1, maxTotal: 2,
		}
		if len(pr.name) >= 10 {
			pr.maxName = 2
		}
		if len(p) <= 8 {
			pr.maxTotal = 1
		}
		c.providers = append(c.providers, pr)
		c.maxName = max(c.maxName, dot)
		c.byName[p[:dot]] = append(c.byName[p[:dot]], p)
		nd := strings.ReplaceAll(p, ".", "")
		if _, dup := c.noDots[nd]; !dup {
			c.noDots[nd] = p
		}
	}
	for _, d := range notTypos {
		c.known[d] = true
	}
	for i, p := range c.providers {
		for len(c.shapes) <= p.labels {
			c.shapes = append(c.shapes, nil)
		}
		for len(c.shapes[p.labels]) <= len(p.name) {
			c.shapes[p.labels] = append(c.shapes[p.labels], nil)
		}
		c.shapes[p.labels][len(p.name)] = append(c.shapes[p.labels][len(p.name)], i)
	}
	for _, t := range commonTLDs {
		c.tlds[t] = true
		// Two-letter country codes are not tried for a missing dot: too
		// many names end in one ("bosch" is not "bos.ch").
		if len(strings.ReplaceAll(t, ".", "")) >= 3 {
			c.splits = append(c.splits, t)
		}
	}
	// longest dotless form first, so "couk" is tried before "uk"
	sortByLen(c.splits)
	return c
}

func sortByLen(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(strings.ReplaceAll(s[j], ".", "")) > len(strings.ReplaceAll(s[j-1], ".", "")); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var (
	defaultOnce sync.Once
	defaultC    *Corrector
)

// Default returns a corrector for DefaultProviders.
func Default() *Corrector {
	defaultOnce.Do(func() { defaultC = New(defaultProviders) })
	return defaultC
}

// Suggest returns corrected full addresses for an address that looks
// mistyped, most likely first, at most MaxSuggestions; nil when nothing is
// suggested. The local part is kept as written; the suggested domain is in
// lower case. A difference in letter case alone is not a typo.
func (c *Corrector) Suggest(address string) []string {
	s := trimJunk(address)
	changed := len(s) != len(address)

	at := strings.IndexByte(s, '@')
	if at <= 0 {
		return nil
	}
	local, domain := s[:at], s[at+1:]
	if strings.IndexByte(domain, '@') >= 0 {
		// "john@@gmail.com": repeated '@'
		trimmed := strings.TrimLeft(domain, "@")
		if strings.IndexByte(trimmed, '@') >= 0 {
			// "john@gmail@com": an '@' typed for the dot before the TLD
			i := strings.IndexByte(trimmed, '@')
			tail := trimmed[i+1:]
			if strings.IndexByte(tail, '@') >= 0 || i == 0 || !c.isTLD(tail) {
				return nil
			}
			trimmed = trimmed[:i] + "." + tail
		}
		domain, changed = trimmed, true
	}
	if d, ok := cleanDomain(domain); ok {
		if d != domain && !strings.EqualFold(d, domain) {
			changed = true
		}
		domain = d
	}
	if l := strings.TrimRight(local, " \t"); l != local {
		local, changed = l, true
	}
	if domain == "" || local == "" || strings.ContainsAny(local, " \t\"(),:;<>[]\\") {
		// Quoted or otherwise unusual local parts are left alone; so is a
		// comma there ("john,doe@"): only the domain is repaired.
		return nil
	}

	var out []string
	switch {
	case c.known[domain]:
		// nothing to correct in the domain
	case strings.IndexByte(domain, '.') < 0:
		out = c.missingDot(local, domain)
	default:
		if p, ok := c.lookupNoDots(domain); ok {
			out = []string{local + "@" + p}
			break
		}
		out = c.near(local, domain)
		if out == nil {
			out = c.tldTypo(local, domain)
		}
	}
	if out == nil && changed && validDomain(domain) && strings.IndexByte(domain, '.') > 0 {
		out = []string{local + "@" + domain}
	}
	if len(out) == 1 && out[0] == address {
		return nil
	}
	return out
}

// trimJunk removes white space, quotes, brackets and punctuation around an
// address, and a "mailto:" prefix.
func trimJunk(s string) string {
	s = strings.TrimLeft(s, " \t\r\n\"'`<([{,;:.")
	if len(s) >= 7 && strings.EqualFold(s[:7], "mailto:") {
		s = strings.TrimLeft(s[7:], " \t\"'<")
	}
	return strings.TrimRight(s, " \t\r\n\"'`>)]},;:.")
}

// cleanDomain lower-cases a domain and repairs its punctuation: commas to
// dots, white space removed, repeated dots collapsed, leading and trailing
// dots dropped. ok is false when nothing needed doing (no allocation).
func cleanDomain(d string) (string, bool) {
	dirty := d != "" && (d[0] == '.' || d[len(d)-1] == '.')
	for i := 0; i < len(d) && !dirty; i++ {
		switch b := d[i]; {
		case 'A' <= b && b <= 'Z', b == ',', b == ' ', b == '\t':
			dirty = true
		case b == '.' && i+1 < len(d) && d[i+1] == '.':
			dirty = true
		}
	}
	if !dirty {
		return d, false
	}
	buf := make([]byte, 0, len(d))
	for i := 0; i < len(d); i++ {
		b := d[i]
		switch {
		case 'A' <= b && b <= 'Z':
			b += 'a' - 'A'
		case b == ',':
			b = '.'
		case b == ' ' || b == '\t':
			continue
		}
		if b == '.' && (len(buf) == 0 || buf[len(buf)-1] == '.') {
			continue
		}
		buf = append(buf, b)
	}
	for len(buf) > 0 && buf[len(buf)-1] == '.' {
		buf = buf[:len(buf)-1]
	}
	return string(buf), true
}

// validDomain reports whether d is made of letters, digits, hyphens and dots
// (the result of a punctuation fix worth suggesting).
func validDomain(d string) bool {
	for i := 0; i < len(d); i++ {
		b := d[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '.' || b >= 0x80) {
			return false
		}
	}
	return true
}

// lookupNoDots finds the provider spelt like d once dots are ignored
// ("yahoocouk", "gmai.lcom"), without allocating.
func (c *Corrector) lookupNoDots(d string) (string, bool) {
	var buf [64]byte
	n := 0
	for i := 0; i < len(d); i++ {
		if d[i] == '.' {
			continue
		}
		if n == len(buf) {
			return "", false
		}
		buf[n] = d[i]
		n++
	}
	p, ok := c.noDots[string(buf[:n])]
	return p, ok && p != d
}

// isTLD reports whether s is a top-level domain, or a public suffix like
// "co.uk", managed by ICANN.
func (c *Corrector) isTLD(s string) bool {
	if s == "" {
		return false
	}
	if c.tlds[s] {
		return true
	}
	ps, icann := publicsuffix.PublicSuffix(s)
	return icann && ps == s
}

// missingDot handles a domain without a dot: a provider without its dots
// ("gmailcom", "yahoocouk") or without its TLD ("gmail"), else a split before
// a common TLD ("examplecom"), itself corrected when it is near a provider
// ("gmialcom").
func (c *Corrector) missingDot(local, d string) []string {
	if p, ok := c.noDots[d]; ok {
		return []string{local + "@" + p}
	}
	if ps := c.byName[d]; len(ps) > 0 {
		out := make([]string, 0, MaxSuggestions)
		for _, p := range ps[:min(len(ps), MaxSuggestions)] {
			out = append(out, local+"@"+p)
		}
		return out
	}
	for _, tld := range c.splits {
		flat := strings.ReplaceAll(tld, ".", "")
		if len(d) <= len(flat) || !strings.HasSuffix(d, flat) {
			continue
		}
		name := d[:len(d)-len(flat)]
		if name[len(name)-1] == '-' || !validDomain(name) {
			continue
		}
		split := name + "." + tld
		if ps, icann := publicsuffix.PublicSuffix(split); !icann || ps != tld {
			continue
		}
		if near := c.near(local, split); near != nil {
			return near
		}
		return []string{local + "@" + split}
	}
	return nil
}

// near returns local@provider for the providers nearest to d within the
// allowed distance (ties only, most used first).
func (c *Corrector) near(local, d string) []string {
	dot := strings.IndexByte(d, '.')
	if dot <= 0 || c.known[d] {
		return nil
	}
	name, suffix := d[:dot], d[dot+1:]
	labels := strings.Count(d, ".") + 1
	if len(name) > c.maxName+2 {
		return nil
	}
	chars := charMask(name)
	var best [MaxSuggestions]*provider
	nbest, bestDist := 0, 1<<30
	suffixChecked, suffixReal := false, false
	if labels >= len(c.shapes) {
		return nil
	}
	byLen := c.shapes[labels]
	// Name lengths within two edits, nearest first so that ranks are
	// compared among equal distances below.
	for _, n := range [...]int{len(name), len(name) - 1, len(name) + 1, len(name) - 2, len(name) + 2} {
		if n < 0 || n >= len(byLen) {
			continue
		}
		for _, i := range byLen[n] {
			p := &c.providers[i]
			if absDiff(len(name), n) > p.maxName || absDiff(len(suffix), len(p.suffix)) > 1 ||
				bits.OnesCount64(chars&^p.chars) > p.maxName {
				// Each character of name absent from p.name costs an edit.
				continue
			}
			ds := dist(suffix, p.suffix, 1)
			if ds > 1 {
				continue
			}
			var dn int
			if len(p.name) <= 3 || hasDigit(p.name) {
				// Short names: only a swap of two letters ("oal" for "aol");
				// anything else makes another plausible name ("all", "ao").
				// Numbers ("163"): exact only, "136" is another number.
				if name != p.name {
					if hasDigit(p.name) || !swapped(name, p.name) {
						continue
					}
					dn = 1
				}
			} else {
				dn = dist(name, p.name, p.maxName)
				if dn > p.maxName {
					continue
				}
			}
			dist := dn + ds
			if dist == 0 || dist > p.maxTotal || dist > bestDist {
				continue
			}
			if ds > 0 {
				// A real TLD as typed ("co", "cm", "be", "com.ar") is
				// corrected only into a generic one when the name is
				// right: gmail.co is gmail.com, but gnail.co is left
				// alone, and hotmail.be is not hotmail.de.
				if !suffixChecked {
					suffixReal, suffixChecked = c.isTLD(suffix), true
				}
				if suffixReal && (dn > 0 || !genericTLD(p.suffix)) {
					continue
				}
			}
			if dist < bestDist {
				bestDist, nbest = dist, 0
			}
			if nbest < len(best) {
				best[nbest] = p
				nbest++
			}
		}
	}
	// Equal distances: most used provider first.
	for i := 1; i < nbest; i++ {
		for j := i; j > 0 && best[j].rank < best[j-1].rank; j-- {
			best[j], best[j-1] = best[j-1], best[j]
		}
	}
	if nbest == 0 {
		return nil
	}
	out := make([]string, nbest)
	for i := range nbest {
		out[i] = local + "@" + best[i].domain
	}
	return out
}

// tldTypo corrects an unknown TLD one edit away from a common one
// ("example.con" -> "example.com"), choosing the most common such TLD.
func (c *Corrector) tldTypo(local, d string) []string {
	dot := strings.LastIndexByte(d, '.')
	tld := d[dot+1:]
	if dot <= 0 || c.tlds[tld] || len(tld) < 2 || c.isTLD(tld) {
		return nil
	}
	for _, t := range commonTLDs {
		if strings.IndexByte(t, '.') < 0 && len(t) >= 3 && dist(tld, t, 1) == 1 {
			return []string{local + "@" + d[:dot+1] + t}
		}
	}
	return nil
}

// charMask is the set of characters of s (charBit).
func charMask(s string) uint64 {
	var m uint64
	for i := 0; i < len(s); i++ {
		m |= charBit(s[i])
	}
	return m
}

// charBit gives a-z, 0-9 and '-' a bit each; all other bytes share one.
func charBit(b byte) uint64 {
	switch {
	case 'a' <= b && b <= 'z':
		return 1 << (b - 'a')
	case '0' <= b && b <= '9':
		return 1 << (26 + b - '0')
	case b == '-':
		return 1 << 36
	}
	return 1 << 37
}

// genericTLD reports whether a provider suffix is one of the generic TLDs
// whose misspellings are real country codes (.co, .cm, .om for .com; .ne
// for .net).
func genericTLD(s string) bool { return s == "com" || s == "net" || s == "org" }

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			return true
		}
	}
	return false
}

func swapped(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i+1 < len(a); i++ {
		if a[i] != b[i] {
			return a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
		}
	}
	return false
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// dist returns a weighted optimal string alignment distance (Damerau–
// Levenshtein with adjacent transpositions, no substring edited twice) from
// a, as typed, to b, or max+1 when it exceeds max. Edits that typing makes
// cost 1: a swap of two adjacent letters, a missing letter, a letter replaced
// by a neighbour on a QWERTY keyboard or a look-alike (0/o, 1/l/i), an extra
// letter that repeats or neighbours one beside it. Other replacements and
// insertions cost 2. b must be shorter than 64 bytes.
func dist(a, b string, max int) int {
	if absDiff(len(a), len(b)) > max {
		return max + 1
	}
	if a == b {
		return 0
	}
	if len(b) >= 64 || len(a) >= 64+max {
		return max + 1
	}
	var rows [3][64]uint16 // distances stay below 2*len(a)+len(b)
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = uint16(j)
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = prev[0] + insCost(a, i-1)
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			var v uint16
			if a[i-1] == b[j-1] {
				v = prev[j-1]
			} else {
				v = prev[j-1] + subCost(a[i-1], b[j-1])
			}
			v = min(v, cur[j-1]+1, prev[j]+insCost(a, i-1))
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if int(rowMin) > max {
			return max + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	if int(prev[len(b)]) > max {
		return max + 1
	}
	return int(prev[len(b)])
}

// near[c] is the set (charMask bits) of the keys next to c on a QWERTY
// keyboard (letters with letters, digits with digits) and of its look-alikes.
var nearKeys = func() (t [128]uint64) {
	rows := []struct {
		keys string
		x    float64 // horizontal offset of the row, in keys
	}{{"1234567890", 0}, {"qwertyuiop", 0.5}, {"asdfghjkl", 0.75}, {"zxcvbnm", 1.25}}
	for r, row := range rows {
		for i := 0; i < len(row.keys); i++ {
			for r2 := max(r-1, 0); r2 <= min(r+1, len(rows)-1); r2++ {
				if (r == 0) != (r2 == 0) {
					continue // digits and letters are not typo neighbours
				}
				for j := 0; j < len(rows[r2].keys); j++ {
					dx := (float64(i) + row.x) - (float64(j) + rows[r2].x)
					if (r2 != r || i != j) && dx >= -1 && dx <= 1 {
						t[row.keys[i]] |= charBit(rows[r2].keys[j])
					}
				}
			}
		}
	}
	for _, pair := range []string{"0o", "1l", "1i", "li"} {
		t[pair[0]] |= charBit(pair[1])
		t[pair[1]] |= charBit(pair[0])
	}
	return t
}()

// subCost is the cost of typing x for y.
func subCost(x, y byte) uint16 {
	if x < 128 && nearKeys[x]&charBit(y) != 0 {
		return 1
	}
	return 2
}

// insCost is the cost of the extra character a[i]: 1 when it repeats or
// neighbours the character before or after it.
func insCost(a string, i int) uint16 {
	x := a[i]
	for _, k := range [2]int{i - 1, i + 1} {
		if k < 0 || k >= len(a) {
			continue
		}
		if y := a[k]; y == x || subCost(x, y) == 1 {
			return 1
		}
	}
	return 2
}
