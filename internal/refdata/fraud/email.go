package fraud

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// emailSignals evaluates the verification result and the local part.
func (a *assessor) emailSignals() {
	ev := a.ev
	a.local, a.domain = ev.Local, ev.Domain
	if a.local == "" || a.domain == "" {
		a.local, a.domain = splitEmail(a.in.Email)
	}

	switch ev.Status {
	case verify.StatusInvalid:
		if len(ev.Corrections) > 0 {
			a.add(ReasonEmailTypo)
			break
		}
		a.add(ReasonEmailInvalid)
		switch ev.Code {
		case verify.CodeDomainNotFound, verify.CodeDomainNoIP, verify.CodeDomainNoMail:
			a.add(ReasonEmailDomainInvalid)
		case verify.CodeUsernameNotAccepted:
			a.add(ReasonEmailDangerous)
		}
	case verify.StatusTrap:
		switch {
		case ev.DomainType == "disposable":
			a.add(ReasonEmailDisposable)
		case ev.Code == verify.CodeSpamTrap:
			a.add(ReasonEmailTrap)
		}
	case verify.StatusUnknown:
		a.add(ReasonEmailUnverified)
	case verify.StatusSafeToSend:
		a.add(ReasonEmailDeliverable)
	case verify.StatusValid:
		if ev.Code == verify.CodeCatchAll {
			a.add(ReasonEmailCatchAll)
		}
	}
	if ev.Status == verify.StatusValid || ev.Status == verify.StatusSafeToSend {
		switch ev.DomainType {
		case "freeisp":
			a.add(ReasonEmailFree)
		case "biz":
			a.add(ReasonEmailCorporate)
		}
	}
	if ev.RoleAccount {
		a.add(ReasonEmailRole)
	}

	if a.local == "" {
		return
	}
	base := a.local
	if i := strings.IndexByte(base, '+'); i > 0 {
		a.plusTag = true
		base = base[:i]
		a.add(ReasonEmailPlusTag)
	}
	lp := analyzeLocal(base)
	lc := &a.cfg.LocalPart
	if lp.looksRandom(lc) {
		a.add(ReasonEmailRandom)
	}
	if lc.DigitRun > 0 && lp.digitRun >= lc.DigitRun {
		a.add(ReasonEmailDigits)
	}
	// Reported after the history signals: variants of one address (tumbling)
	// get no credit for carrying a name.
	a.nameMatch = nameInLocal(a.in.First, lp, lc.MinNameLength) || nameInLocal(a.in.Last, lp, lc.MinNameLength)
}

// splitEmail splits at the last '@'; the domain is lower-cased.
func splitEmail(s string) (local, domain string) {
	s = strings.TrimSpace(s)
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.ToLower(strings.TrimSuffix(s[i+1:], "."))
}

// localPart holds the measurements of a local part (without plus tag).
type localPart struct {
	letters   string   // folded lower-case letters only, in order
	tokens    []string // folded lower-case letter runs
	core      int      // letters + digits
	vowels    int
	consRun   int // longest run of consonants
	digitRun  int // longest run of digits
	switches  int // letter<->digit transitions
	pairs     int // consonant pairs inside letter runs
	rarePairs int // of which not in commonPairs
	entropy   float64
}

func isVowel(r rune) bool {
	switch r {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

func analyzeLocal(s string) localPart {
	var lp localPart
	var (
		letters  strings.Builder
		counts   [128]int
		other    map[rune]int
		cons     int
		digits   int
		lastKind byte // 'l' letter, 'd' digit
		tokStart = -1
	)
	letters.Grow(len(s))
	flush := func() {
		if tokStart >= 0 {
			lp.tokens = append(lp.tokens, letters.String()[tokStart:])
			tokStart = -1
		}
	}
	for _, r := range s {
		r = foldRune(unicode.ToLower(r))
		switch {
		case r >= 'a' && r <= 'z' || r > 127 && unicode.IsLetter(r):
			if tokStart < 0 {
				tokStart = letters.Len()
			}
			letters.WriteRune(r)
			digits = 0
			if isVowel(r) || r > 127 {
				lp.vowels++
				cons = 0
			} else {
				cons++
				lp.consRun = max(lp.consRun, cons)
			}
			if lastKind == 'd' {
				lp.switches++
			}
			lastKind = 'l'
		case r >= '0' && r <= '9':
			flush()
			cons = 0
			digits++
			lp.digitRun = max(lp.digitRun, digits)
			if lastKind == 'l' {
				lp.switches++
			}
			lastKind = 'd'
		default:
			flush()
			cons, digits = 0, 0
			continue
		}
		lp.core++
		if r < 128 {
			counts[r]++
		} else {
			if other == nil {
				other = map[rune]int{}
			}
			other[r]++
		}
	}
	flush()
	lp.letters = letters.String()
	if lp.core > 0 {
		lp.entropy = entropy(&counts, other, lp.core)
	}
	lp.pairs, lp.rarePairs = consonantPairs(lp.tokens)
	return lp
}

// entropy is the Shannon entropy, in bits, of the character counts of a
// local part with core (> 0) letters and digits.
func entropy(counts *[128]int, other map[rune]int, core int) float64 {
	n := float64(core)
	e := 0.0
	add := func(c int) {
		if c > 0 {
			p := float64(c) / n
			e -= p * math.Log2(p)
		}
	}
	for _, c := range counts {
		add(c)
	}
	for _, c := range other {
		add(c)
	}
	return e
}

// consonantPairs counts the adjacent Latin consonant pairs in the tokens,
// and those of them that are rare in names and words.
func consonantPairs(tokens []string) (pairs, rare int) {
	for _, tok := range tokens {
		for i := 0; i+1 < len(tok); i++ {
			x, y := tok[i], tok[i+1]
			if x < 'a' || x > 'z' || y < 'a' || y > 'z' || isVowel(rune(x)) || isVowel(rune(y)) {
				continue
			}
			pairs++
			if !commonPairs[int(x-'a')*26+int(y-'a')] {
				rare++
			}
		}
	}
	return pairs, rare
}

// commonPairs are consonant pairs that occur in names and words of the
// usual Latin-script languages (English, German, Dutch, Slavic, Romance,
// romanised Asian names). Random strings are full of the others.
var commonPairs = func() (t [26 * 26]bool) {
	const pairs = "bb bh bl br bs cc ch ck cl cr cs ct cz dd dg dh dj dl dm dn dr ds dt dw dz " +
		"ff fl fr fs ft gg gh gl gm gn gr gs gt gw hb hd hl hm hn hr hs ht hw " +
		"kh kk kl km kn kr ks kt kw lb lc ld lf lg lh lk ll lm ln lp ls lt lv lw lz " +
		"mb mc md ml mm mn mp ms mt nc nd nf ng nh nj nk nl nm nn np nr ns nt nv nw nz " +
		"pf ph pk pl pn pp pr ps pt rb rc rd rf rg rh rj rk rl rm rn rp rr rs rt rv rw rz " +
		"sb sc sd sf sg sh sj sk sl sm sn sp ss st sv sw sz tc tf th tk tl tm tn tr ts tt tv tw tz " +
		"vd vk vl vn vr vs vv wb wd wh wk wl wn wr ws wt xt xc xp xs " +
		"zb zc zd zg zh zk zl zm zn zr zs zt zw zz"
	for _, p := range strings.Fields(pairs) {
		t[int(p[0]-'a')*26+int(p[1]-'a')] = true
	}
	return t
}()

// looksRandom applies the configured heuristics: long consonant runs,
// alternating letters and digits, many consonant pairs that names do not
// have, or high entropy with (almost) no vowels.
func (lp localPart) looksRandom(c *LocalPartConfig) bool {
	if lp.core < c.RandomMinLength || c.RandomMinLength <= 0 {
		return false
	}
	if c.MaxConsonantRun > 0 && lp.consRun >= c.MaxConsonantRun {
		return true
	}
	if c.MinDigitLetterSwitches > 0 && lp.switches >= c.MinDigitLetterSwitches {
		return true
	}
	if c.MinRarePairs > 0 && lp.rarePairs >= c.MinRarePairs &&
		float64(lp.rarePairs) >= c.MinRarePairRatio*float64(lp.pairs) {
		return true
	}
	nl := utf8.RuneCountInString(lp.letters)
	if nl == 0 {
		return false
	}
	vowelRatio := float64(lp.vowels) / float64(nl)
	return lp.entropy >= c.MinEntropy && vowelRatio <= c.MaxVowelRatio
}

// nameInLocal reports whether the (folded) name appears in the local part:
// as a substring of its letters when it has at least minLen letters, or as
// a whole token when shorter.
func nameInLocal(name string, lp localPart, minLen int) bool {
	n := foldName(name)
	if n == "" || lp.letters == "" {
		return false
	}
	if len(n) >= minLen {
		return strings.Contains(lp.letters, n)
	}
	for _, t := range lp.tokens {
		if t == n {
			return true
		}
	}
	return false
}

// foldName lower-cases, strips diacritics and keeps letters only.
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		r = foldRune(unicode.ToLower(r))
		if r >= 'a' && r <= 'z' || r > 127 && unicode.IsLetter(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// foldRune maps common Latin letters with diacritics to their base letter.
func foldRune(r rune) rune {
	if r < 0xC0 || r > 0x17F {
		return r
	}
	if f, ok := foldTable[r]; ok {
		return f
	}
	return r
}

var foldTable = func() map[rune]rune {
	m := map[rune]rune{}
	for base, all := range map[rune]string{
		'a': "àáâãäåāăą", 'c': "çćĉċč", 'd': "ďđ", 'e': "èéêëēĕėęě", 'g': "ĝğġģ",
		'h': "ĥħ", 'i': "ìíîïĩīĭįı", 'j': "ĵ", 'k': "ķ", 'l': "ĺļľŀł", 'n': "ñńņňŉ",
		'o': "òóôõöøōŏő", 'r': "ŕŗř", 's': "śŝşšß", 't': "ţťŧ", 'u': "ùúûüũūŭůűų",
		'w': "ŵ", 'y': "ýÿŷ", 'z': "źżž",
	} {
		for _, r := range all {
			m[r] = base
		}
	}
	return m
}()

// tumblingKey is the address with the usual variation removed: plus tag,
// dots, underscores and hyphens, trailing digits; googlemail.com is
// gmail.com. Variants of one mailbox (or of one template) share it.
func tumblingKey(local, domain string) string {
	l := strings.ToLower(local)
	if i := strings.IndexByte(l, '+'); i > 0 {
		l = l[:i]
	}
	var b strings.Builder
	for _, r := range l {
		if r == '.' || r == '_' || r == '-' {
			continue
		}
		b.WriteRune(r)
	}
	l = strings.TrimRight(b.String(), "0123456789")
	if domain == "googlemail.com" {
		domain = "gmail.com"
	}
	return l + "@" + domain
}
