package restapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// GET /v5/ev trims the padding around an address: the verdict is the
// trimmed address's, and address echoes the input as sent.
func TestVerifyEmailPadded(t *testing.T) {
	for _, in := range []string{" john@good.test", "john@good.test\t", "\u00a0john@good.test\u00a0", "\ufeffjohn@good.test\r\n"} {
		r := ev(t, q("api_key", keyAcme, "email", in))
		var body struct {
			S struct {
				Status  string `json:"status"`
				Code    int    `json:"status_code"`
				Address string `json:"address"`
			} `json:"safe_to_send"`
		}
		if r.code != 200 || json.Unmarshal(r.body, &body) != nil {
			t.Fatalf("%q: %d %s", in, r.code, r.body)
		}
		if body.S.Status != "valid" || body.S.Code != 20 || body.S.Address != in {
			t.Errorf("%q: %+v, want valid 20 with the address echoed", in, body.S)
		}
	}
	// White space inside stays an error.
	if r := ev(t, q("api_key", keyAcme, "email", " john doe@good.test ")); r.code != 200 || !json.Valid(r.body) || string(r.body) == "" {
		t.Fatalf("%d %s", r.code, r.body)
	} else if want := `"status_code":215`; !strings.Contains(string(r.body), want) {
		t.Errorf("inner space: %s, want %s", r.body, want)
	}
}
