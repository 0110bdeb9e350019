package wiring

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
)

// ApplyFlags writes the flags given on fs into c, through the migration
// table (cfgv1.Flags), so that c is the configuration the process runs
// with (for --print-config, and checked by cfgv1.Validate). The flags
// that still name a field are a few strings (--blob-url, the Secret
// names, --log-level and --log-format): their values are written as
// given. It returns the flags it could not write (no field).
func ApplyFlags(c *cfgv1.Configuration, fs *flag.FlagSet) (skipped []string, err error) {
	fields := map[string]string{}
	for _, f := range cfgv1.Flags {
		fields[f.Flag] = f.Field
	}
	patch := map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		path := fields[f.Name]
		if path == "" {
			if f.Name != "config" && f.Name != "print-config" {
				skipped = append(skipped, f.Name)
			}
			return
		}
		setPath(patch, strings.Split(path, "."), flagValue(f))
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

// flagValue is a flag's value in the form of its field: booleans,
// numbers and durations as themselves, the rest as the string given.
func flagValue(f *flag.Flag) any {
	if f.Name == "log-level" {
		return strings.ToLower(f.Value.String()) // slog writes DEBUG; the file, debug
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch x := g.Get().(type) {
		case time.Duration:
			return x.String()
		case bool, int, int64, uint, uint64, float64:
			return x
		}
	}
	return f.Value.String()
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
