package metrics

// Series the alerts (charts/emaildata/files/alerts/rules.yaml) read that
// emaildata does not register itself: Prometheus's own up, one per scrape
// target, and controller-runtime's reconcile and work queue metrics, which
// the manager serves beside emaildata's. internal/operator's
// TestManagerMetricsNeedAuthorization finds the controller-runtime ones,
// with these labels, on a running manager's endpoint.
const (
	Up                   = "up"
	ReconcileTotal       = "controller_runtime_reconcile_total"
	ReconcileErrorsTotal = "controller_runtime_reconcile_errors_total"
	WorkQueueDepth       = "workqueue_depth"
)

// prometheus exports up: the scrape's outcome, not a process's metric.
const prometheusExporter = "prometheus"

var externalFamilies = []Family{
	{Up, Gauge, "1 when the target's last scrape succeeded, 0 when it failed (Prometheus).", nil, []string{prometheusExporter}},
	{ReconcileTotal, Counter, "Reconciles by controller and result (controller-runtime).", []string{"controller", "result"}, []string{manager}},
	{ReconcileErrorsTotal, Counter, "Reconciles that returned an error, by controller (controller-runtime).", []string{"controller"}, []string{manager}},
	{WorkQueueDepth, Gauge, "Objects waiting in a controller's work queue (controller-runtime).", []string{"name", "controller", "priority"}, []string{manager}},
}

// ExternalFamilies returns the families the alerts read from others.
func ExternalFamilies() []Family { return append([]Family(nil), externalFamilies...) }
