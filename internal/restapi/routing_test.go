package restapi_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestUnmatchedRoutesCounted: requests no route matches (404, and 405 for a
// known path with another method) are in the metrics under the route
// "unmatched", never under their raw path.
func TestUnmatchedRoutesCounted(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/v5/nope-424243", http.StatusNotFound},
		{"GET", "/v4/dr?api_key=" + keyDemo, http.StatusNotFound},
		{"DELETE", "/v5/td", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(tc.method, baseURL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: %d, want %d with X-Request-Id", tc.method, tc.path, resp.StatusCode, tc.code)
		}
	}
	resp, err := http.Get(metricsURL(t, baseURL) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`emaildata_api_requests_total{code="404",route="unmatched"}`,
		`emaildata_api_requests_total{code="405",route="unmatched"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, leak := range []string{"424243", "/v4/dr", keyDemo} {
		if strings.Contains(text, leak) {
			t.Errorf("metrics leak %q", leak)
		}
	}
}

// TestCSharpTDForms: the URLs the C# SDK builds for its name and postal
// queries, with '?' for '&' (and, without an email, the key glued to the
// path), reach GET /v5/td with every parameter.
func TestCSharpTDForms(t *testing.T) {
	p := uniqueByNamePostal(t)
	enc := url.QueryEscape
	for name, raw := range map[string]string{
		"nap with email":    "/v5/td?email=" + enc(p.Email) + "&api_key=" + keyDemo + "?first=" + enc(p.First) + "?last=" + enc(p.Last) + "?street=" + enc(p.Street) + "?city=" + enc(p.City) + "?state=" + enc(p.State),
		"nap without email": "/v5/td&api_key=" + keyDemo + "?state=" + enc(p.State) + "?first=" + enc(p.First) + "?last=" + enc(p.Last) + "?street=" + enc(p.Street) + "?city=" + enc(p.City),
		"naz without email": "/v5/td&api_key=" + keyDemo + "?zip4=" + p.Zip + "-1234?first=" + enc(p.First) + "?last=" + enc(p.Last),
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, baseURL+raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"match_level":"Individual"`) || !strings.Contains(string(body), `"age":"`+p.Age+`"`) {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	// A '?' inside a value is encoded by the SDK, and stays part of it.
	req, _ := http.NewRequest(http.MethodGet, baseURL+"/v5/td?api_key="+keyDemo+"&email=a%3Fb@example.com?first=Ann", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("encoded '?': %d", resp.StatusCode)
	}
}
