package restapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTDHTMLEscapes: every value of the rendered table is escaped.
func TestTDHTMLEscapes(t *testing.T) {
	body := []byte(`{"occupation":"<script>alert(1)</script>","interests":{"golf":true,"travel":false},` +
		`"match_confidence":92,"email_validation":{"ok":false,"status":"invalid","email_correction":"a\"b@x.com"}}`)
	s := &Server{}
	w := httptest.NewRecorder()
	s.writeHTML(w, httptest.NewRequest("GET", "/v5/td", nil), body)
	out := w.Body.String()
	if strings.Contains(out, "<script>") || !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("not escaped:\n%s", out)
	}
	for _, want := range []string{
		"<td>interests</td><td>golf</td>", "<td>match_confidence</td><td>92</td>",
		"<td>email_validation.ok</td><td>false</td>", "<td>email_validation.email_correction</td><td>a&#34;b@x.com</td>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %s:\n%s", want, out)
		}
	}
	if w.Header().Get("Content-Security-Policy") != "default-src 'none'" {
		t.Errorf("headers %v", w.Header())
	}
}

// TestAppendJSONString escapes like encoding/json.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r", "\x00\x1f", "<&>", "ünï", "\u2028\u2029", "bad\xffutf8"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}
