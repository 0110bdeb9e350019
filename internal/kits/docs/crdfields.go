package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// schema is the part of an OpenAPI v3 schema the field reference shows.
type schema struct {
	Type        string            `json:"type"`
	Format      string            `json:"format"`
	Description string            `json:"description"`
	Properties  map[string]schema `json:"properties"`
	Items       *schema           `json:"items"`
	Required    []string          `json:"required"`
	Enum        []any             `json:"enum"`
	Default     any               `json:"default"`
	Pattern     string            `json:"pattern"`
}

type crd struct {
	Spec struct {
		Names struct {
			Kind       string   `json:"kind"`
			ShortNames []string `json:"shortNames"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// CRDFields renders the field reference of the CRDs in dir (as
// controller-gen writes them from the Go types and their comments): for
// each kind, in the order given, a table of its spec and status fields.
func CRDFields(dir string, kinds []string) (string, error) {
	byKind := map[string]crd{}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			return "", fmt.Errorf("%s: %w", f, err)
		}
		byKind[c.Spec.Names.Kind] = c
	}
	var b strings.Builder
	for _, kind := range kinds {
		c, ok := byKind[kind]
		if !ok || len(c.Spec.Versions) == 0 {
			return "", fmt.Errorf("no CRD of kind %s in %s", kind, dir)
		}
		v := c.Spec.Versions[0]
		root := v.Schema.OpenAPIV3Schema
		fmt.Fprintf(&b, "\n### %s fields\n\n`lists.emaildata.io/%s`, short name `%s`. %s\n",
			kind, v.Name, strings.Join(c.Spec.Names.ShortNames, "`, `"), oneLine(root.Description))
		for _, part := range []string{"spec", "status"} {
			s, ok := root.Properties[part]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "\n| `%s` field | Type | Description |\n|---|---|---|\n", part)
			writeFields(&b, "", s)
		}
	}
	return b.String(), nil
}

// writeFields writes one row per field below s, depth first in name order.
// Conditions are metav1.Conditions: their own fields are Kubernetes'.
func writeFields(b *strings.Builder, prefix string, s schema) {
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, n := range names {
		f := s.Properties[n]
		path := prefix + n
		desc := oneLine(f.Description)
		if required[n] {
			desc = "**Required.** " + desc
		}
		if len(f.Enum) > 0 {
			vals := make([]string, len(f.Enum))
			for i, e := range f.Enum {
				vals[i] = fmt.Sprintf("`%v`", e)
			}
			desc += " One of " + strings.Join(vals, ", ") + "."
		}
		if f.Default != nil {
			desc += fmt.Sprintf(" Default `%v`.", f.Default)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", path, typeOf(f), strings.TrimSpace(desc))
		if n == "conditions" {
			continue
		}
		switch {
		case len(f.Properties) > 0:
			writeFields(b, path+".", f)
		case f.Items != nil && len(f.Items.Properties) > 0:
			writeFields(b, path+"[].", *f.Items)
		}
	}
}

func typeOf(s schema) string {
	t := s.Type
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if s.Items != nil {
		t = "[]" + typeOf(*s.Items)
	}
	if t == "" {
		t = "any"
	}
	return t
}

// oneLine makes a comment a table cell: one line, no column breaks.
func oneLine(s string) string {
	return cell(strings.Join(strings.Fields(s), " "))
}
