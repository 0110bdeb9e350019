// Package deploy holds the tests of what the project ships next to its
// binaries: the Helm chart (charts/emaildata) and its equivalence with
// config/default, server-side dry-runs of both against a real API server,
// the Argo CD health checks, the Grafana dashboard and Prometheus rules, and
// the alerts' runbook links. Its one non-test helper, MarkdownAnchors, is the
// docs' link check: the anchors a Markdown page has, as GitHub renders it.
package deploy
