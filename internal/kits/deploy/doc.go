// Package deploy holds the tests of what the project ships next to its
// binaries: the Helm chart (charts/emaildata) and its equivalence with
// config/default, server-side dry-runs of both against a real API server,
// the Argo CD health checks, and the Grafana dashboard and Prometheus rules.
// It has no non-test code.
package deploy
