package main

import (
	"fmt"
	"os"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// The chart's own values (all but config) get their schema from
// values.yaml itself: a key with keys is an object of exactly those keys
// (additionalProperties false: the chart owns the shape, a misspelt key
// fails with its path), a scalar its type; an empty map or list is open
// (a Kubernetes shape the chart passes on: nodeSelector, affinity,
// annotations...). shapes and enums say what the defaults cannot.
var (
	// shapes replace the inferred schema at a path: Kubernetes types the
	// chart passes on as they are (merged or copied into its objects), and
	// values people write as numbers with --set.
	shapes = map[string]map[string]any{
		"podSecurityContext":               openObject(),
		"containerSecurityContext":         openObject(),
		"imagePullSecrets":                 {"type": "array", "items": map[string]any{"type": "object"}},
		"image.tag":                        stringOrNumber(),
		"worker.image.tag":                 stringOrNumber(),
		"dashboards.labelValue":            stringOrNumber(),
		"manager.resources":                openObject(),
		"api.resources":                    openObject(),
		"worker.resources":                 openObject(),
		"manager.extraArgs":                stringList(),
		"api.extraArgs":                    stringList(),
		"manager.tolerations":              objectList(),
		"api.tolerations":                  objectList(),
		"worker.tolerations":               objectList(),
		"manager.nodeSelector":             stringMap(),
		"api.nodeSelector":                 stringMap(),
		"worker.nodeSelector":              stringMap(),
		"manager.podAnnotations":           stringMap(),
		"api.podAnnotations":               stringMap(),
		"networkPolicy.scrapers.podLabels": stringMap(),
		"networkPolicy.metricsFrom":        objectList(),
		"networkPolicy.apiFrom":            objectList(),
		"networkPolicy.workerExtraEgress":  objectList(),
		"networkPolicy.storeEgressCIDRs":   stringList(),
		"serviceMonitor.labels":            stringMap(),
		"prometheusRule.labels":            stringMap(),
		"dashboards.annotations":           stringMap(),
		"watchNamespaces":                  stringList(),
		// A Go duration, as executor.jobs.activeDeadline; empty: the default.
		"worker.activeDeadline": {"type": "string", "pattern": `^$|^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$`},
		"store.pvc.accessModes": {"type": "array", "items": map[string]any{"enum": []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}}},
	}
	// enums are the values a key takes.
	enums = map[string][]string{
		"executor":                {"job", "local"},
		"image.pullPolicy":        {"Always", "IfNotPresent", "Never"},
		"worker.image.pullPolicy": {"", "Always", "IfNotPresent", "Never"},
		"api.service.type":        {"ClusterIP", "NodePort", "LoadBalancer"},
	}
)

func openObject() map[string]any     { return map[string]any{"type": "object"} }
func stringOrNumber() map[string]any { return map[string]any{"type": []string{"string", "number"}} }
func stringList() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
}
func objectList() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "object"}}
}
func stringMap() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
}

// valuesSchema is the schema of each top-level key of values.yaml, by
// key (config's is the Configuration's, which Render sets).
func valuesSchema(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml3.MappingNode {
		return nil, fmt.Errorf("%s: not a map", path)
	}
	seen := map[string]bool{}
	s, err := nodeSchema(doc.Content[0], "", seen)
	if err != nil {
		return nil, err
	}
	for p := range shapes {
		if !seen[p] {
			return nil, fmt.Errorf("configschema: shapes names %s, which values.yaml does not have", p)
		}
	}
	for p := range enums {
		if !seen[p] {
			return nil, fmt.Errorf("configschema: enums names %s, which values.yaml does not have", p)
		}
	}
	return s["properties"].(map[string]any), nil
}

// nodeSchema is the schema of the value n at path (dotted), recording
// the paths it met in seen.
func nodeSchema(n *yaml3.Node, path string, seen map[string]bool) (map[string]any, error) {
	seen[path] = true
	if s, ok := shapes[path]; ok {
		return copyMap(s), nil
	}
	var s map[string]any
	switch n.Kind {
	case yaml3.MappingNode:
		if len(n.Content) == 0 {
			s = openObject()
			break
		}
		props := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p, err := nodeSchema(v, strings.TrimPrefix(path+"."+k.Value, "."), seen)
			if err != nil {
				return nil, err
			}
			if d := comment(k.HeadComment); d != "" {
				p["description"] = d
			}
			props[k.Value] = p
		}
		s = map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	case yaml3.SequenceNode:
		s = map[string]any{"type": "array"}
	case yaml3.ScalarNode:
		switch n.Tag {
		case "!!str":
			s = map[string]any{"type": "string"}
		case "!!bool":
			s = map[string]any{"type": "boolean"}
		case "!!int":
			s = map[string]any{"type": "integer"}
		case "!!float":
			s = map[string]any{"type": "number"}
		case "!!null":
			s = map[string]any{}
		default:
			return nil, fmt.Errorf("configschema: %s: no schema for %s", path, n.Tag)
		}
	default:
		return nil, fmt.Errorf("configschema: %s: no schema for YAML kind %v", path, n.Kind)
	}
	if e, ok := enums[path]; ok {
		s["enum"] = e
	}
	return s, nil
}

// comment is a key's head comment as one line: its first paragraph,
// without the comment marks.
func comment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line == "" {
			if len(words) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "----") {
			continue
		}
		words = append(words, strings.Fields(line)...)
	}
	return strings.Join(words, " ")
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
