package fraud

import (
	"context"
	"testing"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

func TestEmailValiditySignals(t *testing.T) {
	s := New(DefaultConfig(), Deps{})
	tests := []struct {
		name    string
		ev      verify.Result
		want    []string
		notWant []string
	}{
		{"deliverable free", evResult("ann.lee@gmail.com", verify.CodeDeliverable, "freeisp", false),
			[]string{ReasonEmailDeliverable, ReasonEmailFree}, []string{ReasonEmailInvalid, ReasonEmailCorporate}},
		{"corporate unconfirmed", evResult("ann.lee@acme.com", verify.CodeValidDomain, "biz", false),
			[]string{ReasonEmailCorporate}, []string{ReasonEmailDeliverable, ReasonEmailFree}},
		{"catch-all", evResult("ann.lee@acme.com", verify.CodeCatchAll, "biz", false),
			[]string{ReasonEmailCatchAll, ReasonEmailCorporate}, nil},
		{"mailbox missing", evResult("ann.lee@acme.com", verify.CodeMailboxNotFound, "biz", false),
			[]string{ReasonEmailInvalid}, []string{ReasonEmailCorporate, ReasonEmailDomainInvalid}},
		{"domain missing", evResult("ann.lee@nosuch-domain.com", verify.CodeDomainNotFound, "", false),
			[]string{ReasonEmailInvalid, ReasonEmailDomainInvalid}, nil},
		{"dangerous", evResult("abuse@acme.com", verify.CodeUsernameNotAccepted, "biz", true),
			[]string{ReasonEmailInvalid, ReasonEmailDangerous, ReasonEmailRole}, nil},
		{"typo with correction", evResult("ann.lee@gmial.com", verify.CodeDomainNotAccepted, "", false, "ann.lee@gmail.com"),
			[]string{ReasonEmailTypo}, []string{ReasonEmailInvalid}},
		{"syntax error", evResult("ann.lee@@acme.com", verify.CodeMultipleAt, "", false),
			[]string{ReasonEmailInvalid}, nil},
		{"disposable", evResult("ann.lee@mailinator.com", verify.CodeSpamTrap, "disposable", false),
			[]string{ReasonEmailDisposable}, []string{ReasonEmailTrap}},
		{"spam trap", evResult("ann.lee@acme.com", verify.CodeSpamTrap, "biz", false),
			[]string{ReasonEmailTrap}, []string{ReasonEmailDisposable, ReasonEmailCorporate}},
		{"role", evResult("sales@acme.com", verify.CodeValidDomain, "biz", true),
			[]string{ReasonEmailRole, ReasonEmailCorporate}, nil},
		{"timeout", evResult("ann.lee@acme.com", verify.CodeTimeout, "biz", false),
			[]string{ReasonEmailUnverified}, []string{ReasonEmailCorporate}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Assess(context.Background(), testTenant, Input{Email: tc.ev.Address}, tc.ev)
			checkCodes(t, a, tc.want, tc.notWant)
			if a.EmailValidation.Status != tc.ev.Status || a.EmailValidation.StatusCode != tc.ev.Code {
				t.Errorf("email_validation = %+v, want the verify result", a.EmailValidation)
			}
		})
	}
}

func TestLocalPartSignals(t *testing.T) {
	s := New(DefaultConfig(), Deps{})
	tests := []struct {
		email, first, last string
		want, notWant      []string
	}{
		{"jane.doe@gmail.com", "Jane", "Doe", []string{ReasonEmailNameMatch}, []string{ReasonEmailRandom, ReasonEmailDigits, ReasonEmailPlusTag}},
		{"jdoe@gmail.com", "Jane", "Doe", []string{ReasonEmailNameMatch}, nil},
		{"al.smith@gmail.com", "Al", "", []string{ReasonEmailNameMatch}, nil},
		{"alsmith@gmail.com", "Al", "", nil, []string{ReasonEmailNameMatch}}, // short names only as whole tokens
		{"jose.garcia@gmail.com", "José", "García", []string{ReasonEmailNameMatch}, nil},
		{"bob77@gmail.com", "Jane", "Doe", nil, []string{ReasonEmailNameMatch, ReasonEmailDigits}},
		{"xkqzvbtwrp@gmail.com", "", "", []string{ReasonEmailRandom}, nil},
		{"k9d8f7g6h5@gmail.com", "", "", []string{ReasonEmailRandom}, nil},
		{"hjdsfkjhsdf@gmail.com", "", "", []string{ReasonEmailRandom}, nil},
		{"user48213579@gmail.com", "", "", []string{ReasonEmailDigits}, []string{ReasonEmailRandom}},
		{"john1985@gmail.com", "", "", nil, []string{ReasonEmailDigits, ReasonEmailRandom}},
		{"jane+shop@gmail.com", "", "", []string{ReasonEmailPlusTag}, nil},
		{"mschwarz@gmail.com", "", "", nil, []string{ReasonEmailRandom}},
	}
	for _, tc := range tests {
		t.Run(tc.email, func(t *testing.T) {
			a := s.Assess(context.Background(), testTenant, Input{Email: tc.email, First: tc.first, Last: tc.last}, okResult(tc.email))
			checkCodes(t, a, tc.want, tc.notWant)
		})
	}
}

func TestLooksRandom(t *testing.T) {
	c := DefaultConfig().LocalPart
	legit := []string{
		"john.smith", "maria.garcia", "christopher", "jennifer.lopez", "wei.zhang", "nguyen.van.anh",
		"oleksandr", "mschwarz", "jschneider", "kowalczyk", "brzezinski", "szczepanski", "dmitriy",
		"xiaoming", "tsvetkov", "ann", "info", "jsmith2", "j.r.r.tolkien", "margaretthatcher",
		"mohammed.alsayed", "kristof", "schmidt.k", "bjorn", "lindqvist", "thompson88", "strength",
	}
	random := []string{
		"xkqzvbtwrp", "k9d8f7g6h5", "qwrtzpxvbn", "zxcvbnmlkj", "bcdfghjklm", "a8k3j9x2q", "tqxlwpmeyr",
		"hjdsfkjhsdf", "x7f2k9p4w1",
	}
	for _, l := range legit {
		if analyzeLocal(l).looksRandom(&c) {
			t.Errorf("%q looks random", l)
		}
	}
	for _, l := range random {
		if !analyzeLocal(l).looksRandom(&c) {
			lp := analyzeLocal(l)
			t.Errorf("%q does not look random (cons run %d, switches %d, entropy %.2f, vowels %d/%d)",
				l, lp.consRun, lp.switches, lp.entropy, lp.vowels, len(lp.letters))
		}
	}
}

func TestAnalyzeLocal(t *testing.T) {
	lp := analyzeLocal("Jo.Ann-99x")
	if lp.letters != "joannx" || lp.digitRun != 2 || lp.core != 8 || lp.switches != 2 {
		t.Errorf("got %+v", lp)
	}
	if len(lp.tokens) != 3 || lp.tokens[0] != "jo" || lp.tokens[1] != "ann" || lp.tokens[2] != "x" {
		t.Errorf("tokens %q", lp.tokens)
	}
	if got := foldName(" Zoë O'Brien-Łukasz "); got != "zoeobrienlukasz" {
		t.Errorf("foldName = %q", got)
	}
}

func TestTumblingKey(t *testing.T) {
	tests := []struct{ local, domain, want string }{
		{"John.Smith+promo", "gmail.com", "johnsmith@gmail.com"},
		{"johnsmith", "googlemail.com", "johnsmith@gmail.com"},
		{"john_smith42", "example.com", "johnsmith@example.com"},
		{"j-smith", "example.com", "jsmith@example.com"},
	}
	for _, tc := range tests {
		if got := tumblingKey(tc.local, tc.domain); got != tc.want {
			t.Errorf("tumblingKey(%q, %q) = %q, want %q", tc.local, tc.domain, got, tc.want)
		}
	}
}
