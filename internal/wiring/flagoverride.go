package wiring

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// listFlags take comma separated values and set a list field.
var listFlags = map[string]bool{
	"extra-tlds": true, "smtp-allow-cidrs": true, "smtp-proxy": true, "geoip-db": true, "watch-namespaces": true,
	"trusted-proxies": true, "source-allow-cidrs": true, "callback-allow-cidrs": true, "external-secrets": true,
}

// mapFlags take key=value pairs, comma separated, and set a map field.
var mapFlags = map[string]bool{"namespace-store-prefixes": true, "worker-node-selector": true}

// interactiveFlags are the API's names of verification.interactive.
var interactiveFlags = map[string]string{
	"smtp-connect-timeout": "connectTimeout", "smtp-greeting-timeout": "greetingTimeout",
	"smtp-command-timeout": "commandTimeout", "smtp-host-penalty-ttl": "hostPenaltyTTL",
}

// ApplyFlags writes the flags given on fs into c, through the migration
// table (cfgv1.Flags), so that c is the configuration the process runs
// with (for --print-config, and checked by cfgv1.Validate). api says the
// SMTP timeout flags are the API's interactive ones. It returns the flags
// it could not write (no field, or a form it does not translate).
func ApplyFlags(c *cfgv1.Configuration, fs *flag.FlagSet, api bool) (skipped []string, err error) {
	fields := map[string]string{}
	for _, f := range cfgv1.Flags {
		fields[f.Flag] = f.Field
	}
	patch := map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		path := fields[f.Name]
		if k, ok := interactiveFlags[f.Name]; ok && api {
			path = "verification.interactive." + k
		}
		val, ok := flagValue(f)
		if path == "" || !ok {
			if path != "" || f.Name != "config" && f.Name != "print-config" {
				skipped = append(skipped, f.Name)
			}
			return
		}
		setPath(patch, strings.Split(path, "."), val)
	})
	if len(patch) == 0 {
		return skipped, nil
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return skipped, err
	}
	if err := json.Unmarshal(b, c); err != nil {
		return skipped, fmt.Errorf("flags: %w", err)
	}
	return skipped, cfgv1.ValidateValues(c).ToAggregate()
}

// flagValue is a flag's value in the form of its field.
func flagValue(f *flag.Flag) (any, bool) {
	name, v := f.Name, f.Value.String()
	switch {
	case name == "job-ttl-seconds":
		return v + "s", true
	case name == "worker-args":
		return strings.Fields(v), true
	case name == "worker-tolerations", name == "watch-namespaces", name == "external-secrets":
		return nil, false // their own syntax, or a value the flag does not keep
	case name == "log-level":
		return strings.ToLower(v), true // slog writes DEBUG; the file, debug
	case listFlags[name]:
		var l StringList
		_ = l.Set(v)
		return []string(l), true
	case mapFlags[name]:
		m := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if k, val, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
				m[k] = val
			}
		}
		return m, true
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch x := g.Get().(type) {
		case time.Duration:
			return x.String(), true
		case string, bool, int, int64, uint, uint64, float64:
			return x, true
		}
	}
	return v, true
}

func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
