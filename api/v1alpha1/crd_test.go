package v1alpha1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/lists/callback"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// The generated CRDs restate rules whose home is Go code: the markers
// cannot import a constant. These tests read the generated YAML (what the
// API server enforces) and check every such enum, bound, pattern and CEL
// rule against its home, so a marker that drifts fails `make test`.

// crdSchema reads the generated CRD of plural and returns its v1alpha1
// schema.
func crdSchema(t *testing.T, plural string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "lists.emaildata.io_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", plural, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == listsv1.GroupVersion.Version && v.Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s: no %s schema", plural, listsv1.GroupVersion.Version)
	return nil
}

// field walks a dotted path (spec.format.name) down the schema.
func field(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, name := range strings.Split(path, ".") {
		p, ok := s.Properties[name]
		if !ok {
			t.Fatalf("the schema has no %s (at %s)", path, name)
		}
		s = &p
	}
	return *s
}

// enum returns a string enum's values, sorted.
func enum(t *testing.T, p apiextensionsv1.JSONSchemaProps) []string {
	t.Helper()
	var out []string
	for _, raw := range p.Enum {
		var s string
		if err := json.Unmarshal(raw.Raw, &s); err != nil {
			t.Fatalf("enum value %s: %v", raw.Raw, err)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func sorted[S ~[]E, E ~string](s S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	slices.Sort(out)
	return out
}

func TestCRDEnums(t *testing.T) {
	lists, purchases, datasets := crdSchema(t, "emaillists"), crdSchema(t, "purchases"), crdSchema(t, "datasets")
	for _, c := range []struct {
		schema *apiextensionsv1.JSONSchemaProps
		path   string
		want   []string
		home   string
	}{
		{lists, "spec.service", sorted(services.List), "services.List"},
		{lists, "spec.service", sorted([]listsv1.Service{listsv1.ServiceEmailValidation, listsv1.ServiceEmailAppend, listsv1.ServiceEmailIntelligence}), "the Service constants"},
		{lists, "spec.action", sorted([]listsv1.Action{listsv1.ActionProcess, listsv1.ActionReport}), "the Action constants"},
		{lists, "spec.format.delimiter", listfile.DelimiterNames(), "listfile.DelimiterNames"},
		{lists, "spec.format.delimiter", sorted([]listsv1.Delimiter{listsv1.DelimiterComma, listsv1.DelimiterPipe, listsv1.DelimiterTab}), "the Delimiter constants"},
		{lists, "status.phase", sorted([]listsv1.Phase{listsv1.PhasePending, listsv1.PhaseProcessing, listsv1.PhaseProcessed, listsv1.PhaseResults, listsv1.PhaseFailed}), "the Phase constants"},
		{purchases, "spec.matchType", sorted([]string{listsv1.MatchIndividual, listsv1.MatchHousehold}), "the match type constants"},
		{purchases, "status.phase", sorted([]listsv1.PurchasePhase{listsv1.PurchasePending, listsv1.PurchasePurchased, listsv1.PurchaseFailed}), "the PurchasePhase constants"},
		{datasets, "status.phase", sorted([]listsv1.DatasetPhase{listsv1.DatasetPending, listsv1.DatasetLoading, listsv1.DatasetLoaded, listsv1.DatasetFailed}), "the DatasetPhase constants"},
	} {
		if got := enum(t, field(t, c.schema, c.path)); !slices.Equal(got, c.want) {
			t.Errorf("%s enum %v, but %s are %v", c.path, got, c.home, c.want)
		}
	}
	for _, d := range listfile.DelimiterNames() {
		if _, err := listfile.ParseDelimiter(d); err != nil {
			t.Errorf("delimiter %q: %v", d, err)
		}
	}
}

// Omitted fields take their defaults in Go (ListFormat.Dialect), never in
// the schema: a schema default would be a second home.
func TestCRDListFormatDefaults(t *testing.T) {
	format := field(t, crdSchema(t, "emaillists"), "spec.format")
	for _, name := range []string{"emailColumn", "delimiter", "header"} {
		if d := format.Properties[name].Default; d != nil {
			t.Errorf("spec.format.%s has a schema default %s; the default lives in listfile", name, d.Raw)
		}
	}
	d, err := (&listsv1.ListFormat{Name: "a.csv"}).Dialect()
	if err != nil {
		t.Fatal(err)
	}
	if d.Delimiter != listfile.DefaultDelimiter || d.EmailColumn != listfile.DefaultColumn || d.Header {
		t.Errorf("an empty format reads as %q/%d/%v, want listfile's defaults %q/%d/false", d.Delimiter, d.EmailColumn, d.Header, listfile.DefaultDelimiter, listfile.DefaultColumn)
	}
}

func TestCRDBounds(t *testing.T) {
	lists, purchases, datasets := crdSchema(t, "emaillists"), crdSchema(t, "purchases"), crdSchema(t, "datasets")

	col := field(t, lists, "spec.format.emailColumn")
	if col.Minimum == nil || col.Maximum == nil {
		t.Fatalf("spec.format.emailColumn is unbounded: %+v", col)
	}
	lo, hi := int(*col.Minimum), int(*col.Maximum)
	if hi != listfile.MaxColumn {
		t.Errorf("spec.format.emailColumn maximum %d, listfile.MaxColumn %d", hi, listfile.MaxColumn)
	}
	// The schema's range is exactly what listfile.ParseColumn accepts.
	for n, want := range map[int]bool{lo - 1: false, lo: true, hi: true, hi + 1: false} {
		if _, err := listfile.ParseColumn(strconv.Itoa(n)); (err == nil) != want {
			t.Errorf("column %d: the CRD says %v, listfile.ParseColumn %v", n, want, err)
		}
	}

	if f := field(t, lists, "spec.callbackURL"); f.MaxLength == nil || *f.MaxLength != callback.MaxURLLength {
		t.Errorf("spec.callbackURL maxLength %v, callback.MaxURLLength %d", f.MaxLength, callback.MaxURLLength)
	}
	if f := field(t, purchases, "spec.fields"); f.MaxItems == nil || *f.MaxItems != listsv1.MaxPurchaseFields {
		t.Errorf("spec.fields maxItems %v, MaxPurchaseFields %d", f.MaxItems, listsv1.MaxPurchaseFields)
	}
	if f := field(t, datasets, "status.errors"); f.MaxItems == nil || *f.MaxItems != listsv1.MaxDatasetErrors {
		t.Errorf("status.errors maxItems %v, MaxDatasetErrors %d", f.MaxItems, listsv1.MaxDatasetErrors)
	}
}

// crdAccepts applies a string field's pattern and lengths as the API
// server does (lengths in characters).
func crdAccepts(t *testing.T, p apiextensionsv1.JSONSchemaProps, s string) bool {
	t.Helper()
	re, err := regexp.Compile(p.Pattern)
	if err != nil {
		t.Fatalf("pattern %q: %v", p.Pattern, err)
	}
	n := int64(utf8.RuneCountInString(s))
	return re.MatchString(s) && (p.MinLength == nil || n >= *p.MinLength) && (p.MaxLength == nil || n <= *p.MaxLength)
}

// The CRD's file-name rule is listfile's, the one the REST API applies.
func TestCRDFileName(t *testing.T) {
	name := field(t, crdSchema(t, "emaillists"), "spec.format.name")
	if name.Pattern != listfile.FileNamePattern {
		t.Errorf("spec.format.name pattern %q, listfile.FileNamePattern %q", name.Pattern, listfile.FileNamePattern)
	}
	if name.MaxLength == nil || *name.MaxLength != listfile.MaxFileNameLength {
		t.Errorf("spec.format.name maxLength %v, listfile.MaxFileNameLength %d", name.MaxLength, listfile.MaxFileNameLength)
	}
	long := strings.Repeat("é", listfile.MaxFileNameLength-4)
	for _, s := range []string{
		"a.csv", "A.TXT", "list.zip", "my list.csv", "x.y.csv", "a..csv", long + ".csv", long + "x.csv",
		".csv", "..csv", ".a.csv", "a", ".", "a.exe", "a/b.csv", `a\b.csv`, "a\x00b.csv", "a\nb.csv", "a\x7f.csv", "a.csv ",
		"a\u0085.csv", "a\u009f.csv", "list\u202Evsc.csv", "\u202Eab.csv", "a\u2066.csv", "a\u200F.csv", "a\u061C.csv", "a\u2028.csv",
		"a\u00a0.csv", "a\u200D.csv", "قائمة.csv",
	} {
		crd, rule := crdAccepts(t, name, s), listfile.CheckFileName(s) == nil
		if crd != rule {
			t.Errorf("name %.20q...: the CRD accepts it: %v; listfile.CheckFileName accepts it: %v", s, crd, rule)
		}
	}
}

// A Purchase names a list of its own namespace by name: the CRD's pattern
// is the DNS subdomain rule the Purchase controller checks again.
func TestCRDPurchaseListName(t *testing.T) {
	ln := field(t, crdSchema(t, "purchases"), "spec.listName")
	if ln.MaxLength == nil || *ln.MaxLength != int64(validation.DNS1123SubdomainMaxLength) {
		t.Errorf("spec.listName maxLength %v, want %d", ln.MaxLength, validation.DNS1123SubdomainMaxLength)
	}
	for _, s := range []string{"a", "list-1", "a.b-c.d", strings.Repeat("a", 253), strings.Repeat("a", 254),
		"", "A", "-a", "a-", "a_b", "a..b", "ns/list", ".a"} {
		crd, rule := crdAccepts(t, ln, s), len(validation.IsDNS1123Subdomain(s)) == 0
		if crd != rule {
			t.Errorf("listName %.20q: the CRD accepts it: %v; IsDNS1123Subdomain: %v", s, crd, rule)
		}
	}
}

// The EmailList spec's CEL rules, evaluated for every list service and
// action, allow action=report exactly for the services.Purchasable ones.
func TestCRDPurchasableRule(t *testing.T) {
	spec := field(t, crdSchema(t, "emaillists"), "spec")
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	var progs []cel.Program
	for _, r := range spec.XValidations {
		if strings.Contains(r.Rule, "oldSelf") {
			continue // transition rules: immutability
		}
		ast, iss := env.Compile(r.Rule)
		if iss.Err() != nil {
			t.Fatalf("rule %q: %v", r.Rule, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, prg)
	}
	if len(progs) == 0 {
		t.Fatal("no CEL rules on spec")
	}
	for _, svc := range services.List {
		for _, action := range []listsv1.Action{"", listsv1.ActionProcess, listsv1.ActionReport} {
			self := map[string]any{"service": svc}
			if action != "" {
				self["action"] = string(action)
			}
			ok := true
			for _, p := range progs {
				out, _, err := p.Eval(map[string]any{"self": self})
				if err != nil {
					t.Fatalf("%v: %v", self, err)
				}
				ok = ok && out.Value() == true
			}
			want := action != listsv1.ActionReport || services.Purchasable(svc)
			if ok != want {
				t.Errorf("%s with action %q: the CRD's rules allow it: %v; services.Purchasable says %v", svc, action, ok, want)
			}
		}
	}
}
