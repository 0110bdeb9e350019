package verify

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// CheckSyntax runs the syntax stage on address. The Result's Code is
// CodeValidSyntax or one of the syntax error codes (100–215).
//
// The grammar is the RFC 5321 Mailbox (what SMTP carries in RCPT TO) with
// the RFC 6531/6532 UTF-8 extensions, not the full RFC 5322 addr-spec:
// comments, folding white space and obsolete forms are not deliverable.
// Domain literals (user@[192.0.2.1]) are 115 by policy: public mail
// systems do not accept them and they bypass the MX-based later stages.
//
// Rules, first match wins:
//
//  1. invalid UTF-8 → 110
//  2. padding is trimmed: white space, BOM and zero-width space at the
//     edges (the verdict is the trimmed address's; Address still echoes
//     the input); other edges are cleaned and the address marked as
//     needing 210: trailing '.', ',' or ';', and enclosing angle brackets,
//     single quotes or double quotes (the last only when the whole input
//     is one quoted string containing an @)
//  3. nothing left → 100
//  4. a control or invisible character anywhere (Cc, Cf other than
//     ZWNJ/ZWJ, private use, unassigned, U+FFFD) → 110
//  5. an unterminated quoted string, unbalanced () or [] outside quotes,
//     or unbalanced <> when one of them is the first or last character
//     → 135 (elsewhere '<' and '>' are just invalid characters)
//  6. no @ outside quotes → 150
//  7. several @ outside quotes → 155 (a correction may be offered)
//  8. empty local part → 140; empty domain → 145
//  9. local part over 64 octets or address over 254 octets → 130
//  10. white space outside quotes → 215
//  11. local part only partly quoted ("a"b, a."b") → 120; a character not
//     allowed → 110; leading, trailing or doubled dot → 120; "" → 140
//  12. domain → 115 for: a literal, characters other than letters,
//     digits, '-' and '.' (before IDNA), empty labels, labels over 63
//     octets or with an edge hyphen, "ab--" labels other than valid xn--
//     A-labels, a single label, over 253 octets, or an idna.Lookup error
//  13. address over 254 octets with the domain in ASCII → 130
//  14. all-numeric TLD, or a TLD outside the ICANN public suffix list
//     → 200
//  15. marked as needing 210 → 210, so 210 always means the cleaned
//     address is otherwise valid
//  16. otherwise → 10
func CheckSyntax(address string) Result {
	r := Result{Address: address}
	p, code := parse(address)
	r.SetCode(code)
	if code == CodeValidSyntax || code == CodeInvalidTLD || code == CodeExtraCharacter {
		r.Local, r.Domain, r.UnicodeDomain = p.local, p.domain, p.unicodeDomain
	}
	return r
}

type parsed struct {
	local, domain, unicodeDomain string
}

const (
	maxLocal   = 64  // RFC 5321 §4.5.3.1.1
	maxAddress = 254 // RFC 5321 path limit (256) less the angle brackets
	maxDomain  = 253 // RFC 1035 without the root dot
	maxLabel   = 63  // RFC 1035
)

func parse(address string) (parsed, Code) {
	if !utf8.ValidString(address) {
		return parsed{}, CodeInvalidCharacter
	}
	core, extra := trimEdges(address)
	if core == "" {
		return parsed{}, CodeSyntaxError
	}
	if !printable(core) {
		return parsed{}, CodeInvalidCharacter
	}
	return parseCore(core, extra, true)
}

// parseCore classifies a trimmed address. unwrap allows one level of
// stripping a quoted string that encloses the whole address.
func parseCore(core string, extra, unwrap bool) (parsed, Code) {
	var (
		inQuote, space       bool
		paren, sq, angle     int
		unbalanced, badAngle bool
		firstAt, lastAt      = -1, -1
		nAt                  int
	)
	for i := 0; i < len(core); i++ {
		c := core[i]
		if inQuote {
			switch c {
			case '\\':
				i++ // quoted-pair; the escaped byte is checked in checkLocal
			case '"':
				inQuote = false
			}
			continue
		}
		switch c {
		case '"':
			inQuote = true
		case '@':
			if firstAt < 0 {
				firstAt = i
			}
			lastAt = i
			nAt++
		case '(':
			paren++
		case ')':
			paren--
		case '[':
			sq++
		case ']':
			sq--
		case '<':
			angle++
		case '>':
			angle--
		case ' ', '\t', '\n', '\v', '\f', '\r':
			space = true
		default:
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(core[i:])
				space = space || unicode.IsSpace(r)
				i += size - 1
			}
		}
		// A closer before its opener is unbalanced even if counts match later.
		unbalanced = unbalanced || paren < 0 || sq < 0
		badAngle = badAngle || angle < 0
	}
	// <> delimit only an angle-addr around the whole address (RFC 5322
	// name-addr), so they count only when one sits at an edge; elsewhere
	// they are plain invalid characters.
	if first, last := core[0], core[len(core)-1]; first == '<' || first == '>' || last == '<' || last == '>' {
		unbalanced = unbalanced || badAngle || angle != 0
	}
	if inQuote || unbalanced || paren != 0 || sq != 0 {
		return parsed{}, CodeUnbalanced
	}
	if nAt == 0 {
		// "john@example.com" typed with quotes around it: a stray pair.
		if unwrap && len(core) >= 2 && core[0] == '"' && core[len(core)-1] == '"' &&
			strings.IndexByte(core, '@') > 0 {
			inner, _ := trimEdges(core[1 : len(core)-1])
			if inner != "" {
				if p, code := parseCore(inner, true, false); code != CodeNoAt {
					return p, code
				}
			}
		}
		return parsed{}, CodeNoAt
	}
	if nAt > 1 {
		// Even a doubled "@@" is 155: the corrections stage offers the
		// address with one "@".
		return parsed{}, CodeMultipleAt
	}
	local, domain := core[:firstAt], core[lastAt+1:]
	if local == "" {
		return parsed{}, CodeNoUsername
	}
	if domain == "" {
		return parsed{}, CodeNoDomain
	}
	if len(local) > maxLocal || len(local)+1+len(domain) > maxAddress {
		return parsed{}, CodeTooLong
	}
	if space {
		return parsed{}, CodeUnquotedSpace
	}
	if code := checkLocal(local); code != 0 {
		return parsed{}, code
	}
	ascii, uni, ok := checkDomain(domain)
	if !ok {
		return parsed{}, CodeDomainSyntax
	}
	p := parsed{local: local, domain: ascii, unicodeDomain: uni}
	if len(local)+1+len(ascii) > maxAddress {
		return parsed{}, CodeTooLong
	}
	if !realTLD(ascii[strings.LastIndexByte(ascii, '.')+1:]) {
		return p, CodeInvalidTLD
	}
	if extra {
		return p, CodeExtraCharacter
	}
	return p, CodeValidSyntax
}

// trimEdges strips what copy-and-paste leaves around an address and reports
// whether anything but padding was removed: white space (and BOM or
// zero-width space) at the edges is padding, as CRM exports are full of it,
// and is trimmed without a verdict of its own.
func trimEdges(s string) (string, bool) {
	if n := len(s); n > 0 && plainEdge[s[0]] && plainEdge[s[n-1]] {
		return s, false // common case: nothing to trim
	}
	s = TrimPadding(s)
	extra := false
	for {
		t := strings.TrimRight(s, ".,;")
		if n := len(t); n >= 2 && (t[0] == '<' && t[n-1] == '>' || t[0] == '\'' && t[n-1] == '\'') {
			t = t[1 : n-1]
		}
		t = TrimPadding(t)
		if t == s {
			return s, extra
		}
		s, extra = t, true
	}
}

// TrimPadding removes leading and trailing white space (any Unicode white
// space, no-break space included), BOMs and zero-width spaces: the padding
// that list exports leave around an address. Verification judges the
// trimmed address.
func TrimPadding(s string) string {
	if n := len(s); n > 0 && s[0] > ' ' && s[0] < utf8.RuneSelf && s[n-1] > ' ' && s[n-1] < utf8.RuneSelf {
		return s
	}
	return strings.TrimFunc(s, isEdgeSpace)
}

// plainEdge marks ASCII bytes that trimEdges never removes.
var plainEdge = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = !strings.ContainsRune(".,;<>'", rune(c))
	}
	return t
}()

func isEdgeSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\uFEFF' || r == '\u200B'
}

// printable reports whether s has no control or invisible characters.
// White space is allowed here; where it is not, a later step says so.
func printable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && !isASCIISpace(c)) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) && !visibleNonASCII(r) {
			return false
		}
		i += size
	}
	return true
}

func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// visibleNonASCII is the UTF8-non-ascii of RFC 6531 less characters that
// cannot be read or typed back: controls, format characters (except the
// joiners IDNA allows in context), private use, unassigned, U+FFFD and
// white space.
func visibleNonASCII(r rune) bool {
	if r == '\u200C' || r == '\u200D' {
		return true
	}
	return r != utf8.RuneError && unicode.IsGraphic(r) && !unicode.IsSpace(r)
}

// atext is RFC 5322 atext (ASCII part).
var atext = func() (t [utf8.RuneSelf]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-/=?^_`{|}~" {
		t[c] = true
	}
	return t
}()

// checkLocal validates a local part that contains no unquoted white space
// or @. It returns 0 when the local part is valid.
func checkLocal(local string) Code {
	if local[0] == '"' {
		return checkQuotedLocal(local)
	}
	if strings.IndexByte(local, '"') >= 0 {
		return CodeUsernameSyntax // partly quoted, e.g. john."doe"
	}
	for i := 0; i < len(local); {
		c := local[i]
		if c < utf8.RuneSelf {
			if !atext[c] && c != '.' {
				return CodeInvalidCharacter
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(local[i:])
		if !visibleNonASCII(r) {
			return CodeInvalidCharacter
		}
		i += size
	}
	if local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return CodeUsernameSyntax
	}
	return 0
}

// checkQuotedLocal validates an RFC 5321 Quoted-string local part
// (qtextSMTP / quoted-pairSMTP, plus UTF-8 per RFC 6531).
func checkQuotedLocal(local string) Code {
	end := -1
	bad := false
scan:
	for i := 1; i < len(local); {
		c := local[i]
		switch {
		case c == '"':
			end = i
			break scan
		case c == '\\':
			// quoted-pairSMTP escapes printable ASCII only.
			if i+1 >= len(local) || local[i+1] < ' ' || local[i+1] > '~' {
				bad = true
			}
			i += 2
		case c < utf8.RuneSelf:
			// Space is the only white space qtextSMTP allows.
			if c < ' ' || c > '~' {
				bad = true
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(local[i:])
			if !visibleNonASCII(r) {
				bad = true
			}
			i += size
		}
	}
	switch {
	case end != len(local)-1:
		return CodeUsernameSyntax // text after the closing quote
	case bad:
		return CodeInvalidCharacter
	case end == 1:
		return CodeNoUsername // "" names no mailbox
	}
	return 0
}

// checkDomain validates domain and returns it in ASCII (lower-case,
// punycode) and Unicode forms.
func checkDomain(domain string) (ascii, uni string, ok bool) {
	if domain[0] == '[' {
		return "", "", false // address literal, rejected by policy
	}
	isASCII := true
	for i := 0; i < len(domain); i++ {
		c := domain[i]
		switch {
		case c >= utf8.RuneSelf:
			isASCII = false
		case c != '.' && c != '-' && !isAlnum(c):
			return "", "", false
		}
	}
	if isASCII {
		ascii = strings.ToLower(domain)
		hasALabel, ok := checkLabels(ascii)
		if !ok {
			return "", "", false
		}
		if !hasALabel {
			return ascii, ascii, true
		}
		uni, err := idna.Lookup.ToUnicode(ascii)
		if err != nil {
			return "", "", false
		}
		return ascii, uni, true
	}
	ascii, err := idna.Lookup.ToASCII(domain)
	if err != nil {
		return "", "", false
	}
	if _, ok := checkLabels(ascii); !ok {
		return "", "", false
	}
	uni, err = idna.Lookup.ToUnicode(ascii)
	if err != nil {
		return "", "", false
	}
	return ascii, uni, true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// checkLabels checks RFC 1035/5321 host name rules on a lower-case ASCII
// domain and reports whether it has xn-- labels needing IDNA validation.
func checkLabels(d string) (hasALabel, ok bool) {
	if len(d) > maxDomain || strings.IndexByte(d, '.') < 0 {
		return false, false // too long, or a single label such as localhost
	}
	for len(d) > 0 {
		label := d
		if i := strings.IndexByte(d, '.'); i >= 0 {
			label, d = d[:i], d[i+1:]
			if d == "" {
				return false, false // trailing dot inside the domain
			}
		} else {
			d = ""
		}
		n := len(label)
		if n == 0 || n > maxLabel || label[0] == '-' || label[n-1] == '-' {
			return false, false
		}
		for i := 0; i < n; i++ {
			if c := label[i]; c != '-' && !isAlnum(c) {
				return false, false
			}
		}
		// "??--" is reserved for IDNA (RFC 5891 §4.2.3.1); idna.Lookup
		// rejects it too, so ASCII and Unicode domains agree.
		if n >= 4 && label[2] == '-' && label[3] == '-' {
			if label[:2] != "xn" {
				return false, false
			}
			hasALabel = true
		}
	}
	return hasALabel, true
}

// realTLD reports whether tld (ASCII, lower-case) is an ICANN top-level
// domain. It asks about a name under the TLD rather than the bare TLD:
// TLDs listed only by wildcard (*.ck, *.er, *.mm) report icann=false for
// themselves, and unknown TLDs fall back to the "*" rule with icann=false.
func realTLD(tld string) bool {
	allDigits := true
	for i := 0; i < len(tld); i++ {
		if tld[i] < '0' || tld[i] > '9' {
			allDigits = false
			break
		}
	}
	if allDigits {
		return false // RFC 3696 §2: TLDs are never all-numeric
	}
	if _, ok := knownTLDs.Load(tld); ok {
		return true
	}
	// "x-0" cannot be a PSL rule label, so only the TLD's own rule applies.
	_, icann := publicsuffix.PublicSuffix("x-0." + tld)
	if icann {
		// Only real TLDs are cached, so the cache is bounded by the list.
		knownTLDs.Store(strings.Clone(tld), struct{}{})
	}
	return icann
}

// knownTLDs caches TLDs that realTLD has confirmed; the lookup is several
// times cheaper than publicsuffix.PublicSuffix.
var knownTLDs sync.Map
