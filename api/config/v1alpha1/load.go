package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// Load reads the configuration file at path: Default() with the file
// decoded over it, then checked (Validate). An empty path is the defaults.
// Every problem is reported at once: unknown keys with their path and
// line, then invalid values with their path.
func Load(path string) (*Configuration, error) {
	if path == "" {
		c := Default()
		return c, Validate(c).ToAggregate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Decode is Load on the file's content.
func Decode(data []byte) (*Configuration, error) {
	c := Default()
	if err := DecodeInto(c, data); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeInto decodes the file's content over c, as Decode does over the
// defaults: a key written replaces c's value, a zero or an empty list
// included; a key left out keeps it. Then c is checked (Validate). For a
// program whose own defaults are a file over the Configuration's (the
// local stack, hack/localstack).
func DecodeInto(c *Configuration, data []byte) error {
	if err := checkKeys(data); err != nil {
		return err
	}
	if err := decodeOver(data, c); err != nil {
		return err
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return fmt.Errorf("apiVersion %q kind %q: want %s %s", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	return Validate(c).ToAggregate()
}

// checkKeys walks the YAML document beside the Configuration type and
// refuses every key the type does not have, naming its path and line
// (sigs.k8s.io/yaml's strict mode names the key but not where it is).
func checkKeys(data []byte) error {
	var doc yaml3.Node
	if err := yaml3.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // an empty file: the defaults
			return nil
		}
		return err
	}
	var errs []string
	if len(doc.Content) == 1 {
		walk(doc.Content[0], reflect.TypeFor[Configuration](), "", &errs)
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// walk checks the keys of node against type t.
func walk(node *yaml3.Node, t reflect.Type, path string, errs *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case node.Kind == yaml3.AliasNode:
		walk(node.Alias, t, path, errs)
	case t.Kind() == reflect.Struct && node.Kind == yaml3.MappingNode && !opaque(t):
		fields := jsonFields(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			p := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, fmt.Sprintf("line %d: unknown field %q%s", k.Line, p, suggest(k.Value, fields)))
				continue
			}
			walk(v, ft, p, errs)
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && node.Kind == yaml3.SequenceNode:
		for i, v := range node.Content {
			walk(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case t.Kind() == reflect.Map && node.Kind == yaml3.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			walk(node.Content[i+1], t.Elem(), join(path, node.Content[i].Value), errs)
		}
	}
}

// opaque types decode from a scalar (durations, quantities).
func opaque(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]())
}

// jsonFields maps the JSON names of t's fields (inline ones flattened) to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") || f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// suggest names the known key closest to a misspelt one.
func suggest(k string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if d := distance(strings.ToLower(k), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// decodeOver decodes the YAML document data into v through JSON, so that
// the types' JSON names and decoders (Duration, Quantity) apply, refusing
// unknown fields (checkKeys names them with their lines first).
func decodeOver(data []byte, v any) error {
	var doc any
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return err
	}
	if doc == nil {
		return nil // an empty file
	}
	j, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("not a configuration: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: want a %s, not a %s", te.Field, te.Type, te.Value)
		}
		return err
	}
	return nil
}

// toYAML renders v (JSON-tagged) as YAML, keys in JSON order of the maps
// (sorted).
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	return yaml3.Marshal(doc)
}
