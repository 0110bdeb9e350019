package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The engine settings of our runs are a Configuration (apiVersion
// config.emaildata.io/v1alpha1, docs/configuration.md): the worker run
// processes of ours-list and ours-mix read one with --config, the local
// stack of ours-jobs reads one (and hands it to its Job pods). Each is
// engineConfig: the tool's settings for the world (production defaults
// but the loopback world's DNS server and port, -concurrency sessions,
// -greylist-retry, -fleet-url), then -config's file and -set's keys over
// them, then what the world needs whatever they say (its DNS server and
// SMTP port, SMTP on, its loopback range and .test names). The binaries'
// strict loader checks the result: a misspelt key fails the run with its
// path. (hack/compare keeps its own go.mod small, so it does not import
// api/config/v1alpha1: the document is merged as YAML.)

// userConfig is -config's file with -set's keys (dotted paths,
// key=value, the value in YAML: 10s, 20, true, [a, b]) written over it.
func userConfig(file string, sets []string) (map[string]any, error) {
	doc := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("-config %s: %w", file, err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
		if v, ok := doc["apiVersion"]; ok && v != apiVersion || doc["kind"] != nil && doc["kind"] != "Configuration" {
			return nil, fmt.Errorf("-config %s: apiVersion %v kind %v: want %s Configuration", file, doc["apiVersion"], doc["kind"], apiVersion)
		}
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-set %q: want key.path=value (e.g. verification.dns.timeout=10s)", kv)
		}
		var val any
		if err := yaml.Unmarshal([]byte(v), &val); err != nil {
			return nil, fmt.Errorf("-set %q: %w", kv, err)
		}
		if err := setPath(doc, k, val); err != nil {
			return nil, fmt.Errorf("-set %q: %w", kv, err)
		}
	}
	return doc, nil
}

const apiVersion = "config.emaildata.io/v1alpha1"

// engineConfig is the Configuration of a run of ours (see above); extra
// holds the run's own keys (the stack's pipeline and logging), written
// before the user's.
func engineConfig(dnsAddr string, s settings, extra map[string]any) ([]byte, error) {
	smtp := map[string]any{"heloName": "verify.test", "mailFrom": "probe@verify.test",
		"greylistRetry": s.greylistRetry.String(), "maxSessions": s.concurrency}
	verification := map[string]any{"dns": map[string]any{"workers": s.concurrency}, "smtp": smtp}
	if s.fleetURL == "" || s.noHistory {
		// No backend, no verification history either, as a process
		// without one keeps none; -no-history asks for none with one.
		verification["history"] = map[string]any{"url": "off"}
	}
	doc := map[string]any{"verification": verification, "fleet": map[string]any{"url": s.fleetURL}}
	for _, over := range []map[string]any{extra, s.conf} {
		c, err := deepCopy(over)
		if err != nil {
			return nil, err
		}
		merge(doc, c)
	}
	for k, v := range map[string]any{
		"apiVersion": apiVersion, "kind": "Configuration",
		"verification.dns.server": dnsAddr, "verification.smtp.port": s.port, "verification.smtp.enabled": true,
		"verification.smtp.allowCIDRs": []any{"127.0.0.0/8"}, "verification.extraTLDs": []any{"test"},
	} {
		if err := setPath(doc, k, v); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(doc)
}

// merge writes src over dst: maps key by key, anything else replaced.
func merge(dst, src map[string]any) {
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			merge(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// setPath sets the dotted path of doc to v, making the maps on the way.
func setPath(doc map[string]any, path string, v any) error {
	keys := strings.Split(path, ".")
	m := doc
	for _, k := range keys[:len(keys)-1] {
		switch next := m[k].(type) {
		case map[string]any:
			m = next
		case nil:
			n := map[string]any{}
			m[k], m = n, n
		default:
			return fmt.Errorf("%s: %s is not a map", path, k)
		}
	}
	m[keys[len(keys)-1]] = v
	return nil
}

// deepCopy copies a document, so that merging it into another leaves it
// as it was.
func deepCopy(m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		return nil, errors.Join(errors.New("copy the configuration"), err)
	}
	return out, nil
}
