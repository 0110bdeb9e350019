package restapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/kits/sdkcontract"
)

// TestSDKContract makes exactly the requests the public service's official
// SDKs make (internal/kits/sdkcontract: paths, query strings as each SDK encodes
// them, header names, methods, bodies) against the real server, checks that
// each SDK could use the answer, and validates every answer against
// openapi.json.
func TestSDKContract(t *testing.T) {
	a, b, ok := sdkcontract.Pick(peopleData)
	if !ok {
		t.Fatal("no two people the SDK calls can name")
	}
	calls := sdkcontract.Calls(sdkcontract.Params{Key: keyAll, Person: a, Other: b, Typo: "john@gmial.com"})
	seen := map[string]int{}
	for _, c := range calls {
		seen[c.SDK]++
		t.Run(c.SDK+"/"+c.Method, func(t *testing.T) {
			req, err := c.Request(context.Background(), baseURL)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Check(resp.StatusCode, resp.Header, body); err != nil {
				t.Errorf("%s %s: %v", c.Verb, c.Target, err)
			}
			// The document describes the route the request reaches: the
			// C# SDK's key-in-the-path form reaches GET /v5/td.
			vreq, _ := c.Request(context.Background(), baseURL)
			if strings.HasPrefix(c.Target, "/v5/td&") {
				vreq, _ = http.NewRequest(http.MethodGet, baseURL+"/v5/td", nil)
			}
			var reqBody []byte
			if c.Body != nil {
				reqBody = c.Body
			}
			validate(t, vreq, reqBody, resp, body)
		})
	}
	for _, sdk := range []string{"python", "java", "php", "php5", "csharp", "perl", "ruby", "bash"} {
		if seen[sdk] == 0 {
			t.Errorf("no calls of the %s SDK", sdk)
		}
	}
}
