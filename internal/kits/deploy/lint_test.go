package deploy

import (
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestChartLint runs `helm lint`'s checks (Chart.yaml, values, templates,
// rendered YAML) for every value set; info-level notes (such as a missing
// icon) are allowed, warnings and errors are not.
func TestChartLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			vals := vs.vals
			if vals == nil {
				vals = map[string]any{}
			}
			for _, m := range lint.All(chartDir, vals, releaseNS, false).Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}
