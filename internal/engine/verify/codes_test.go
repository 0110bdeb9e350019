package verify

import (
	"context"
	"encoding/json"
	"testing"
)

func TestCodeStatus(t *testing.T) {
	want := map[Code]Status{
		5: StatusUnknown, 10: StatusValid, 20: StatusValid, 45: StatusValid, 50: StatusSafeToSend,
		100: StatusInvalid, 110: StatusInvalid, 115: StatusInvalid, 120: StatusInvalid,
		125: StatusInvalid, 130: StatusInvalid, 135: StatusInvalid, 140: StatusInvalid,
		145: StatusInvalid, 150: StatusInvalid, 155: StatusInvalid, 200: StatusInvalid,
		210: StatusInvalid, 215: StatusInvalid, 255: StatusInvalid, 310: StatusInvalid,
		315: StatusInvalid, 325: StatusInvalid, 400: StatusInvalid, 410: StatusInvalid,
		420: StatusInvalid, 500: StatusInvalid, 505: StatusInvalid, 510: StatusInvalid,
		520: StatusInvalid, 525: StatusTrap, 530: StatusTrap, 999: StatusUnknown,
	}
	if len(codeTable) != len(want) {
		t.Errorf("codeTable has %d codes, want %d", len(codeTable), len(want))
	}
	for c, s := range want {
		if got := c.Status(); got != s {
			t.Errorf("Code(%d).Status() = %q, want %q", int(c), got, s)
		}
		if c.String() == "" || c.String()[0] == 'C' {
			t.Errorf("Code(%d).String() = %q, want a meaning", int(c), c.String())
		}
	}
	if got := Code(42).Status(); got != StatusUnknown {
		t.Errorf("Code(42).Status() = %q, want unknown", got)
	}
	if got := Code(42).String(); got != "Code(42)" {
		t.Errorf("Code(42).String() = %q", got)
	}
	if CodeNoAt != 150 || CodeMultipleAt != 155 || CodeDeliverable != 50 || CodeSpamTrap != 525 {
		t.Error("code constants changed value")
	}
}

func TestSafeToSendJSON(t *testing.T) {
	r := CheckSyntax("John@Example.com")
	b, err := json.Marshal(r.SafeToSend())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"status":"valid","status_code":10,"address":"John@Example.com"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	r = Result{Address: "info@gmial.com", DomainType: "freeisp", RoleAccount: true, Corrections: []string{"info@gmail.com"}}
	r.SetCode(CodeDomainNotFound)
	b, err = json.Marshal(r.SafeToSend())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":"invalid","status_code":310,"address":"info@gmial.com","domain_type":"freeisp","role_account":true,"email_corrections":["info@gmail.com"]}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestVerifyStages(t *testing.T) {
	var ran []string
	dns := func(ctx context.Context, r *Result) bool {
		ran = append(ran, "dns")
		if r.Code != CodeValidSyntax {
			return false
		}
		r.SetCode(CodeValidDomain)
		return false
	}
	smtp := func(ctx context.Context, r *Result) bool {
		ran = append(ran, "smtp")
		r.SetCode(CodeMailboxNotFound)
		return true
	}
	never := func(ctx context.Context, r *Result) bool {
		t.Error("stage after a final verdict ran")
		return true
	}
	r := Verify(context.Background(), "john@example.com", dns, smtp, never)
	if r.Code != CodeMailboxNotFound || r.Status != StatusInvalid || len(ran) != 2 {
		t.Errorf("got %d %q after %v", r.Code, r.Status, ran)
	}

	ran = nil
	if r := Verify(context.Background(), "john@", dns); r.Code != CodeNoDomain || len(ran) != 1 {
		t.Errorf("got %d after %v; the dns stage must leave syntax errors alone", r.Code, ran)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := Verify(ctx, "john@example.com", never); r.Code != CodeValidSyntax {
		t.Errorf("cancelled Verify: got %d", r.Code)
	}
}
