package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSchemaFresh fails when charts/emaildata/values.schema.json is not
// what the Configuration type and values.yaml generate.
func TestSchemaFresh(t *testing.T) {
	want, err := Render(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot(), "charts", "emaildata", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("charts/emaildata/values.schema.json is stale: run `make schema` and commit it")
	}
}

// TestSchemaFollowsType: a field of the type is in the schema with its
// comment and its kind, at its path.
func TestSchemaFollowsType(t *testing.T) {
	out, err := Render(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) map[string]any {
		m := s
		for _, p := range path {
			m = m["properties"].(map[string]any)[p].(map[string]any)
		}
		return m
	}
	for _, tc := range []struct {
		path []string
		typ  any
	}{
		{[]string{"config", "verification", "smtp", "heloName"}, "string"},
		{[]string{"config", "verification", "smtp", "maxConnsPerHost"}, "integer"},
		{[]string{"config", "api", "rateLimit", "perSecond"}, "number"},
		{[]string{"config", "api", "console", "enabled"}, "boolean"},
		{[]string{"config", "executor", "jobs", "tolerations"}, "array"},
	} {
		f := at(tc.path...)
		if f["type"] != tc.typ || f["description"] == "" || f["description"] == nil {
			t.Errorf("%v: %v", tc.path, f)
		}
	}
	if at("config")["additionalProperties"] != false || at("config", "store")["additionalProperties"] != false {
		t.Error("config sections must refuse unknown keys")
	}
	if _, ok := at("config")["properties"].(map[string]any)["kind"]; ok {
		t.Error("kind is the chart's to write")
	}
}

// TestSchemaValues: the chart's own values are closed where the chart
// owns their shape, typed as values.yaml writes them, and open where they
// are Kubernetes types the chart passes on.
func TestSchemaValues(t *testing.T) {
	out, err := Render(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	at := func(path ...string) map[string]any {
		m := s
		for _, p := range path {
			m = m["properties"].(map[string]any)[p].(map[string]any)
		}
		return m
	}
	for _, tc := range []struct {
		path   []string
		typ    any
		closed bool // additionalProperties: false
	}{
		{[]string{"manager"}, "object", true},
		{[]string{"manager", "replicas"}, "integer", false},
		{[]string{"manager", "leaderElect"}, "boolean", false},
		{[]string{"store", "pvc"}, "object", true},
		{[]string{"store", "pvc", "size"}, "string", false},
		{[]string{"networkPolicy", "scrapers"}, "object", true},
		{[]string{"manager", "resources"}, "object", false},
		{[]string{"podSecurityContext"}, "object", false},
		{[]string{"worker", "nodeSelector"}, "object", false},
		{[]string{"api", "extraArgs"}, "array", false},
	} {
		f := at(tc.path...)
		if f["type"] != tc.typ || (f["additionalProperties"] == false) != tc.closed {
			t.Errorf("%v: %v, want type %v closed %v", tc.path, f, tc.typ, tc.closed)
		}
	}
	if e, _ := at("executor")["enum"].([]any); len(e) != 2 {
		t.Errorf("executor enum %v", e)
	}
	if d, _ := at("manager", "extraArgs")["description"].(string); d == "" {
		t.Error("no description from values.yaml's comment")
	}
}
