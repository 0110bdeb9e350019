package verify

import (
	"strings"
	"testing"
	"unicode/utf8"
)

type syntaxCase struct {
	name    string
	address string
	code    Code
	local   string // checked when non-empty
	domain  string // checked when non-empty
	unicode string // checked when non-empty
}

var (
	local64   = strings.Repeat("a", 64)
	label63   = strings.Repeat("b", 63)
	domain189 = label63 + "." + label63 + "." + strings.Repeat("c", 57) + ".com" // 189 octets
)

var syntaxCases = []syntaxCase{
	// 10: valid.
	{"plain", "john@example.com", CodeValidSyntax, "john", "example.com", "example.com"},
	{"dotted local", "john.doe@example.com", CodeValidSyntax, "john.doe", "example.com", ""},
	{"plus tag", "john+newsletter@example.com", CodeValidSyntax, "john+newsletter", "", ""},
	{"subdomain and co.uk", "j.doe+x@mail.eu.example.co.uk", CodeValidSyntax, "", "mail.eu.example.co.uk", ""},
	{"upper-case domain lowered", "John.Doe@EXAMPLE.COM", CodeValidSyntax, "John.Doe", "example.com", "example.com"},
	{"all atext specials", "!#$%&'*+-/=?^_`{|}~@example.com", CodeValidSyntax, "", "", ""},
	{"quoted with space", `"john doe"@example.com`, CodeValidSyntax, `"john doe"`, "example.com", ""},
	{"quoted escaped quote", `"john\"doe"@example.com`, CodeValidSyntax, `"john\"doe"`, "", ""},
	{"quoted escaped backslash", `"john\\"@example.com`, CodeValidSyntax, "", "", ""},
	{"quoted at sign", `"john@doe"@example.com`, CodeValidSyntax, `"john@doe"`, "example.com", ""},
	{"quoted double dot", `"john..doe"@example.com`, CodeValidSyntax, "", "", ""},
	{"quoted specials", `"(a),[b]<c>:d;e"@example.com`, CodeValidSyntax, "", "", ""},
	{"IDN domain", "user@bücher.de", CodeValidSyntax, "user", "xn--bcher-kva.de", "bücher.de"},
	{"A-label domain", "user@XN--BCHER-KVA.de", CodeValidSyntax, "user", "xn--bcher-kva.de", "bücher.de"},
	{"UTF-8 local and CJK domain", "用户@例子.中国", CodeValidSyntax, "用户", "xn--fsqu00a.xn--fiqs8s", "例子.中国"},
	{"CJK gTLD", "用户@例子.公司", CodeValidSyntax, "", "xn--fsqu00a.xn--55qx5d", ""},
	{"ideographic full stop", "用户@例子。中国", CodeValidSyntax, "", "xn--fsqu00a.xn--fiqs8s", "例子.中国"},
	{"Cyrillic IDN TLD", "иван@пример.рф", CodeValidSyntax, "иван", "xn--e1afmkfd.xn--p1ai", "пример.рф"},
	{"accented local", "josé.garcía@example.es", CodeValidSyntax, "josé.garcía", "", ""},
	{"fullwidth domain mapped", "user@ＥＸＡＭＰＬＥ.com", CodeValidSyntax, "", "example.com", ""},
	{"hyphen and digits", "a@x-1.123.example.io", CodeValidSyntax, "", "x-1.123.example.io", ""},
	{"wildcard-only TLD", "user@example.ck", CodeValidSyntax, "", "example.ck", ""},
	{"private suffix", "user@foo.blogspot.com", CodeValidSyntax, "", "", ""},
	{"one-char parts", "a@b.co", CodeValidSyntax, "", "", ""},
	{"local 64 octets", local64 + "@example.com", CodeValidSyntax, local64, "", ""},
	{"label 63 octets", "a@" + label63 + ".com", CodeValidSyntax, "", "", ""},
	{"address 254 octets", local64 + "@" + domain189, CodeValidSyntax, "", "", ""},

	// 100: general.
	{"empty", "", CodeSyntaxError, "", "", ""},
	{"only spaces", " \t\r\n", CodeSyntaxError, "", "", ""},
	{"only punctuation", "..;", CodeSyntaxError, "", "", ""},

	// 110: invalid character.
	{"angle in local", "jo<hn@example.com", CodeInvalidCharacter, "", "", ""},
	{"comma in local", "jo,hn@example.com", CodeInvalidCharacter, "", "", ""},
	{"colon in local", "mailto:john@example.com", CodeInvalidCharacter, "", "", ""},
	{"backslash unquoted", `jo\hn@example.com`, CodeInvalidCharacter, "", "", ""},
	{"balanced comment", "john(work)@example.com", CodeInvalidCharacter, "", "", ""},
	{"NUL", "jo\x00hn@example.com", CodeInvalidCharacter, "", "", ""},
	{"DEL in domain", "john@exam\x7fple.com", CodeInvalidCharacter, "", "", ""},
	{"invalid UTF-8", "jo\xffhn@example.com", CodeInvalidCharacter, "", "", ""},
	{"zero-width space inside", "jo\u200bhn@example.com", CodeInvalidCharacter, "", "", ""},
	{"soft hyphen", "jo\u00adhn@example.com", CodeInvalidCharacter, "", "", ""},
	{"private use", "\ue000@example.com", CodeInvalidCharacter, "", "", ""},
	{"replacement char", "jo\ufffdhn@example.com", CodeInvalidCharacter, "", "", ""},
	{"tab in quotes", "\"jo\thn\"@example.com", CodeInvalidCharacter, "", "", ""},
	{"NBSP in quotes", "\"jo\u00a0hn\"@example.com", CodeInvalidCharacter, "", "", ""},
	{"escaped non-ASCII", "\"jo\\éhn\"@example.com", CodeInvalidCharacter, "", "", ""},

	// 115: domain syntax.
	{"underscore", "john@exa_mple.com", CodeDomainSyntax, "", "", ""},
	{"underscore in IDN", "john@bü_cher.de", CodeDomainSyntax, "", "", ""},
	{"bang in domain", "john@exa!mple.com", CodeDomainSyntax, "", "", ""},
	{"parens in domain", "john@exa(mple).com", CodeDomainSyntax, "", "", ""},
	{"quotes in domain", `john@"example".com`, CodeDomainSyntax, "", "", ""},
	{"empty label", "a@example..com", CodeDomainSyntax, "", "", ""},
	{"leading dot", "a@.example.com", CodeDomainSyntax, "", "", ""},
	{"leading hyphen", "a@-example.com", CodeDomainSyntax, "", "", ""},
	{"trailing hyphen", "a@example-.com", CodeDomainSyntax, "", "", ""},
	{"label 64 octets", "a@" + label63 + "b.com", CodeDomainSyntax, "", "", ""},
	{"single label", "john@localhost", CodeDomainSyntax, "", "", ""},
	{"single label TLD", "john@com", CodeDomainSyntax, "", "", ""},
	{"IPv4 literal", "john@[192.0.2.1]", CodeDomainSyntax, "", "", ""},
	{"IPv6 literal", "john@[IPv6:2001:db8::1]", CodeDomainSyntax, "", "", ""},
	{"bad punycode", "john@xn--zz.com", CodeDomainSyntax, "", "", ""},
	{"A-label not in mapped form", "john@xn--example.com", CodeDomainSyntax, "", "", ""},
	{"reserved R-LDH label", "john@ab--cd.com", CodeDomainSyntax, "", "", ""},
	{"leading combining mark", "john@\u0301example.com", CodeDomainSyntax, "", "", ""},
	{"bidi rule", "john@a\u05d0.com", CodeDomainSyntax, "", "", ""},
	{"IDN trailing ideographic stop", "用户@例子.中国。", CodeDomainSyntax, "", "", ""},

	// 120: username syntax.
	{"leading dot local", ".john@example.com", CodeUsernameSyntax, "", "", ""},
	{"trailing dot local", "john.@example.com", CodeUsernameSyntax, "", "", ""},
	{"double dot local", "jo..hn@example.com", CodeUsernameSyntax, "", "", ""},
	{"quoted then text", `"john"doe@example.com`, CodeUsernameSyntax, "", "", ""},
	{"obsolete dotted quote", `john."doe"@example.com`, CodeUsernameSyntax, "", "", ""},
	{"quote inside word", `jo"h"n@example.com`, CodeUsernameSyntax, "", "", ""},

	// 130: too long.
	{"local 65 octets", local64 + "a@example.com", CodeTooLong, "", "", ""},
	{"address 255 octets", local64 + "@x" + domain189, CodeTooLong, "", "", ""},

	// 135: unbalanced.
	{"open quote", `"john@example.com`, CodeUnbalanced, "", "", ""},
	{"close quote", `john@example.com"`, CodeUnbalanced, "", "", ""},
	{"escaped closing quote", `"john\"@example.com`, CodeUnbalanced, "", "", ""},
	{"open literal", "john@[1.2.3.4", CodeUnbalanced, "", "", ""},
	{"open angle", "<john@example.com", CodeUnbalanced, "", "", ""},
	{"close angle", "john@example.com>", CodeUnbalanced, "", "", ""},
	{"open paren", "jo(hn@example.com", CodeUnbalanced, "", "", ""},
	{"reversed parens", ")john(@example.com", CodeUnbalanced, "", "", ""},
	{"reversed angles at edges", ">john@example.com<", CodeUnbalanced, "", "", ""},
	{"angle-addr with extra opener", "<<john@example.com>", CodeUnbalanced, "", "", ""},
	{"angle inside angle-addr", "jo<hn@example.com>", CodeInvalidCharacter, "", "", ""},
	{"angle in domain", "john@exa>mple.com", CodeDomainSyntax, "", "", ""},

	// 140 / 145: missing parts.
	{"no username", "@example.com", CodeNoUsername, "", "", ""},
	{"empty quoted username", `""@example.com`, CodeNoUsername, "", "", ""},
	{"no username doubled at", "@@example.com", CodeMultipleAt, "", "", ""},
	{"no domain", "john@", CodeNoDomain, "", "", ""},
	{"no domain doubled at", "john@@", CodeMultipleAt, "", "", ""},
	{"no domain trailing space", "john@ ", CodeNoDomain, "", "", ""},

	// 150 / 155: @ signs.
	{"no at", "john.example.com", CodeNoAt, "", "", ""},
	{"no at quoted", `"john doe"`, CodeNoAt, "", "", ""},
	{"fullwidth at", "john＠example.com", CodeNoAt, "", "", ""},
	{"two ats", "john@doe@example.com", CodeMultipleAt, "", "", ""},
	{"trailing at", "john@example.com@", CodeMultipleAt, "", "", ""},
	{"two addresses", "john@example.com,jane@example.com", CodeMultipleAt, "", "", ""},

	// 200: TLD.
	{"unknown TLD", "john@example.invalidtld", CodeInvalidTLD, "john", "example.invalidtld", ""},
	{"local TLD", "john@printer.local", CodeInvalidTLD, "", "", ""},
	{"typo TLD", "john@gmail.con", CodeInvalidTLD, "john", "gmail.con", ""},
	{"numeric TLD", "john@example.123", CodeInvalidTLD, "", "", ""},
	{"dotted quad", "john@192.0.2.1", CodeInvalidTLD, "", "", ""},
	{"undelegated IDN TLD", "用户@例子.广告", CodeInvalidTLD, "用户", "xn--fsqu00a.xn--4rr70v", "例子.广告"},

	// 210: extra space or character.
	// Padding is trimmed: the verdict is the trimmed address's.
	{"leading space", " john@example.com", CodeValidSyntax, "john", "example.com", ""},
	{"trailing space", "john@example.com ", CodeValidSyntax, "john", "", ""},
	{"tabs", "\tjohn@example.com\t", CodeValidSyntax, "john", "example.com", ""},
	{"trailing CRLF", "john@example.com\r\n", CodeValidSyntax, "", "", ""},
	{"leading BOM", "\ufeffjohn@example.com", CodeValidSyntax, "john", "", ""},
	{"trailing NBSP", "john@example.com\u00a0", CodeValidSyntax, "", "", ""},
	{"ideographic and em spaces", "\u3000john@example.com\u2003", CodeValidSyntax, "john", "example.com", ""},
	{"zero-width space", "\u200bjohn@example.com\u200b", CodeValidSyntax, "john", "example.com", ""},
	{"padded invalid", "  john@@example.com  ", CodeMultipleAt, "", "", ""},
	{"inner space stays an error", " john doe@example.com ", CodeUnquotedSpace, "", "", ""},
	{"padding and a trailing dot", " john@example.com. ", CodeExtraCharacter, "john", "example.com", ""},
	{"trailing dot", "john@example.com.", CodeExtraCharacter, "john", "example.com", ""},
	{"trailing comma", "john@example.com,", CodeExtraCharacter, "", "", ""},
	{"trailing semicolon", "john@example.com;", CodeExtraCharacter, "", "", ""},
	{"angle brackets", "<john@example.com>", CodeExtraCharacter, "john", "example.com", ""},
	{"single quotes", "'john@example.com'", CodeExtraCharacter, "john", "", ""},
	{"double quotes", `"john@example.com"`, CodeExtraCharacter, "john", "example.com", ""},
	{"quotes and spaces", `" john@example.com "`, CodeExtraCharacter, "john", "", ""},
	{"doubled at", "john@@example.com", CodeMultipleAt, "", "", ""},
	{"everything", " <john@Example.com.> ;", CodeExtraCharacter, "john", "example.com", ""},

	// 215: unquoted spaces.
	{"space in local", "john doe@example.com", CodeUnquotedSpace, "", "", ""},
	{"space before at", "john @example.com", CodeUnquotedSpace, "", "", ""},
	{"space after at", "john@ example.com", CodeUnquotedSpace, "", "", ""},
	{"space in domain", "john@exam ple.com", CodeUnquotedSpace, "", "", ""},
	{"NBSP in local", "john\u00a0doe@example.com", CodeUnquotedSpace, "", "", ""},
	{"newline inside", "jo\nhn@example.com", CodeUnquotedSpace, "", "", ""},
	{"display name", "John Doe <john@example.com>", CodeUnquotedSpace, "", "", ""},

	// Precedence between rules.
	{"core error beats edge space", " jo<hn@example.com ", CodeInvalidCharacter, "", "", ""},
	{"TLD beats trailing dot", "john@example.invalidtld.", CodeInvalidTLD, "", "example.invalidtld", ""},
	{"doubled at beats space", "john doe@@example.com", CodeMultipleAt, "", "", ""},
	{"control beats no at", "jo\x01hn", CodeInvalidCharacter, "", "", ""},
	{"unbalanced beats no at", "(john", CodeUnbalanced, "", "", ""},
	{"no username beats no domain", "@", CodeNoUsername, "", "", ""},
	{"length beats space", local64 + " @example.com", CodeTooLong, "", "", ""},
	{"space beats local chars", "jo<hn doe@example.com", CodeUnquotedSpace, "", "", ""},
	{"local beats domain", "jo<hn@exa_mple.com", CodeInvalidCharacter, "", "", ""},
	{"char beats dots in local", ".jo<hn@example.com", CodeInvalidCharacter, "", "", ""},
	{"domain beats TLD", "john@exa_mple.invalidtld", CodeDomainSyntax, "", "", ""},
}

func TestCheckSyntax(t *testing.T) {
	for _, tc := range syntaxCases {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckSyntax(tc.address)
			if r.Code != tc.code {
				t.Fatalf("CheckSyntax(%q).Code = %d (%s), want %d (%s)", tc.address, r.Code, r.Code, tc.code, tc.code)
			}
			if r.Status != tc.code.Status() {
				t.Errorf("Status = %q, want %q", r.Status, tc.code.Status())
			}
			if r.Address != tc.address {
				t.Errorf("Address = %q, want it echoed", r.Address)
			}
			if tc.local != "" && r.Local != tc.local {
				t.Errorf("Local = %q, want %q", r.Local, tc.local)
			}
			if tc.domain != "" && r.Domain != tc.domain {
				t.Errorf("Domain = %q, want %q", r.Domain, tc.domain)
			}
			if tc.unicode != "" && r.UnicodeDomain != tc.unicode {
				t.Errorf("UnicodeDomain = %q, want %q", r.UnicodeDomain, tc.unicode)
			}
			parsed := tc.code == CodeValidSyntax || tc.code == CodeInvalidTLD || tc.code == CodeExtraCharacter
			if parsed != (r.Local != "" && r.Domain != "") {
				t.Errorf("parts set = %v for code %d: Local %q Domain %q", !parsed, r.Code, r.Local, r.Domain)
			}
		})
	}
}

// TestCheckSyntaxLongPunycode covers a domain that fits in UTF-8 but whose
// ASCII form exceeds 253 octets.
func TestCheckSyntaxLongPunycode(t *testing.T) {
	label := "例子用户广告公司中国网络测试邮件地址长度"               // 20 CJK runes: 60 octets, 53-octet A-label
	domain := strings.Repeat(label+".", 4) + "中国" // 250 octets in UTF-8
	addr := "a@" + domain
	if len(addr) > maxAddress {
		t.Fatalf("test address is %d octets; want ≤ %d", len(addr), maxAddress)
	}
	if r := CheckSyntax(addr); r.Code != CodeDomainSyntax {
		t.Fatalf("Code = %d (%s), want %d", r.Code, r.Code, CodeDomainSyntax)
	}
	// Short enough for the domain but not for the whole address in ASCII.
	domain = strings.Repeat(label+".", 3) + strings.Repeat("x", 60) + ".com" // 229 octets in ASCII
	addr = strings.Repeat("a", 30) + "@" + domain
	if r := CheckSyntax(addr); r.Code != CodeTooLong {
		t.Fatalf("Code = %d (%s), want %d; Domain %d octets", r.Code, r.Code, CodeTooLong, len(r.Domain))
	}
}

func TestRealTLD(t *testing.T) {
	for tld, want := range map[string]bool{
		"com": true, "uk": true, "de": true, "io": true, "xn--p1ai": true,
		"xn--fiqs8s": true, "ck": true, "er": true, "mm": true,
		"invalidtld": false, "local": false, "localhost": false, "test": false,
		"example": false, "invalid": false, "123": false, "blogspot": false,
		"kawasaki": false, "xn--4rr70v": false,
	} {
		if got := realTLD(tld); got != want {
			t.Errorf("realTLD(%q) = %v, want %v", tld, got, want)
		}
	}
}

// checkInvariants holds for every input; it is shared with the fuzz test.
func checkInvariants(t *testing.T, address string) {
	t.Helper()
	r := CheckSyntax(address)
	if r.Address != address {
		t.Fatalf("Address %q not echoed: %q", address, r.Address)
	}
	if r.Status != r.Code.Status() {
		t.Fatalf("%q: Status %q does not match code %d", address, r.Status, r.Code)
	}
	if r.Code != CodeValidSyntax && (r.Code < CodeSyntaxError || r.Code > CodeUnquotedSpace) {
		t.Fatalf("%q: code %d is not a syntax code", address, r.Code)
	}
	if _, ok := codeTable[r.Code]; !ok {
		t.Fatalf("%q: unknown code %d", address, r.Code)
	}
	if r.Code != CodeValidSyntax {
		return
	}
	if r.Local == "" || r.Domain == "" || r.UnicodeDomain == "" {
		t.Fatalf("%q: valid but parts empty: %+v", address, r)
	}
	for i := 0; i < len(r.Domain); i++ {
		if c := r.Domain[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			t.Fatalf("%q: Domain %q is not lower-case ASCII", address, r.Domain)
		}
	}
	if len(r.Local) > maxLocal || len(r.Local)+1+len(r.Domain) > maxAddress {
		t.Fatalf("%q: valid but too long", address)
	}
	if !strings.Contains(address, r.Local) {
		t.Fatalf("%q: Local %q not as written", address, r.Local)
	}
	// The normalised form must itself be valid and stable.
	norm := r.Local + "@" + r.Domain
	r2 := CheckSyntax(norm)
	if r2.Code != CodeValidSyntax || r2.Local != r.Local || r2.Domain != r.Domain || r2.UnicodeDomain != r.UnicodeDomain {
		t.Fatalf("%q valid but normalised %q gives %d %+v", address, norm, r2.Code, r2)
	}
}

func TestInvariantsOnTable(t *testing.T) {
	for _, tc := range syntaxCases {
		checkInvariants(t, tc.address)
	}
}

func FuzzCheckSyntax(f *testing.F) {
	for _, tc := range syntaxCases {
		f.Add(tc.address)
	}
	f.Fuzz(func(t *testing.T, address string) {
		checkInvariants(t, address)
	})
}

var benchAddresses = []string{
	"john@example.com",
	"John.Doe+newsletter@Mail.Example.co.uk",
	"first.last@sub.domain.example.org",
	"j@x.io",
	`"john doe"@example.com`,
	"john@example.invalidtld",
	"john doe@example.com",
	" john@example.com ",
	"john@@example.com",
	"no-at-sign.example.com",
	"a@example..com",
	"very.long.local.part.with.many.dots.in.it@really-long-domain-name.example.com",
}

func BenchmarkCheckSyntax(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		CheckSyntax(benchAddresses[i%len(benchAddresses)])
	}
}

func BenchmarkCheckSyntaxIDN(b *testing.B) {
	addrs := []string{"user@bücher.de", "用户@例子.中国", "user@xn--bcher-kva.de"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		CheckSyntax(addrs[i%len(addrs)])
	}
}
