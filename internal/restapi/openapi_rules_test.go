package restapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/restapi"
)

// openapi.json restates, for clients, rules whose home is Go code: the list
// services, the email column's range, the delimiters, the file name's
// length and the actions. A restatement that drifts fails here.
func TestOpenAPIRestatesTheRules(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(restapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	item := doc.Paths.Find("/v5/list")
	if item == nil || item.Post == nil {
		t.Fatal("openapi.json has no POST /v5/list")
	}
	param := func(name string) *openapi3.Schema {
		p := item.Post.Parameters.GetByInAndName("query", name)
		if p == nil || p.Schema == nil || p.Schema.Value == nil {
			t.Fatalf("POST /v5/list has no query parameter %s", name)
		}
		return p.Schema.Value
	}
	strs := func(vs []any) []string {
		var out []string
		for _, v := range vs {
			out = append(out, fmt.Sprint(v))
		}
		slices.Sort(out)
		return out
	}

	if got, want := strs(param("service").Enum), slices.Sorted(slices.Values(services.List)); !slices.Equal(got, want) {
		t.Errorf("service enum %v, services.List %v", got, want)
	}
	col := param("email_column")
	if col.Min == nil || *col.Min != float64(listfile.DefaultColumn) || col.Max == nil || *col.Max != listfile.MaxColumn {
		t.Errorf("email_column range %v..%v, want %d..%d (listfile)", col.Min, col.Max, listfile.DefaultColumn, listfile.MaxColumn)
	}
	delims := strs(param("delimiter").Enum)
	for _, name := range listfile.DelimiterNames() {
		b, _ := listfile.ParseDelimiter(name)
		if !slices.Contains(delims, name) || !slices.Contains(delims, string(b)) {
			t.Errorf("delimiter enum %q lacks %s or its character", delims, name)
		}
	}
	for _, d := range delims {
		if _, err := listfile.ParseDelimiter(d); err != nil && d != "%09" { // a tab encoded twice
			t.Errorf("delimiter enum value %q: %v", d, err)
		}
	}
	if n := param("name").MaxLength; n == nil || *n != listfile.MaxFileNameLength {
		t.Errorf("name maxLength %v, listfile.MaxFileNameLength %d", n, listfile.MaxFileNameLength)
	}
	if n := param("callback_url").MaxLength; n == nil || *n != callback.MaxURLLength {
		t.Errorf("callback_url maxLength %v, callback.MaxURLLength %d", n, callback.MaxURLLength)
	}
	pr := doc.Components.Schemas["PurchaseRequest"]
	if pr == nil || pr.Value == nil || pr.Value.Properties["fields"] == nil || pr.Value.Properties["options"] == nil {
		t.Fatal("openapi.json has no PurchaseRequest with fields and options")
	}
	if n := pr.Value.Properties["fields"].Value.MaxItems; n == nil || *n != listsv1.MaxPurchaseFields {
		t.Errorf("PurchaseRequest.fields maxItems %v, listsv1.MaxPurchaseFields %d", n, listsv1.MaxPurchaseFields)
	}
	mt := pr.Value.Properties["options"].Value.Properties["email_append"].Value.Properties["match_type"].Value
	if got, want := strs(mt.Enum), []string{listsv1.MatchHousehold, listsv1.MatchIndividual}; !slices.Equal(got, want) {
		t.Errorf("PurchaseRequest match_type enum %v, want %v", got, want)
	}
	if got, want := strs(param("action").Enum), []string{string(listsv1.ActionProcess), string(listsv1.ActionReport)}; !slices.Equal(got, want) {
		t.Errorf("action enum %v, want %v", got, want)
	}
	// escape_formulas is the EmailList's format.escapeFormulas: a boolean,
	// off unless asked for (the zero value of the CRD field).
	if ef := param("escape_formulas"); ef.Type == nil || !ef.Type.Is("boolean") || ef.Default != false {
		t.Errorf("escape_formulas: type %v default %v, want a boolean defaulting to false", ef.Type, ef.Default)
	}
	var zero listsv1.ListFormat
	if zero.EscapeFormulas {
		t.Error("ListFormat.EscapeFormulas must be off by default")
	}
	cs := doc.Components.Schemas["CallbackSecret"]
	if cs == nil || cs.Value == nil || cs.Value.Properties["secret"] == nil {
		t.Fatal("openapi.json has no CallbackSecret schema with a secret")
	}
	if p := cs.Value.Properties["secret"].Value.Pattern; !strings.HasPrefix(p, "^"+callback.SecretPrefix) {
		t.Errorf("CallbackSecret.secret pattern %q, want it to start with callback.SecretPrefix %q", p, callback.SecretPrefix)
	}
}
