package operator

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves the manager's metrics, by default over HTTPS
// behind the cluster's authentication and authorization (as the kubebuilder
// v4 scaffold does): a caller's bearer token is checked with a TokenReview,
// and its right to GET /metrics with a SubjectAccessReview (the
// emaildata-metrics-reader ClusterRole grants it). Without a cert
// directory, controller-runtime serves a self-signed certificate.
func metricsOptions(o Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if !o.MetricsInsecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
		m.CertDir = o.MetricsCertDir
	}
	return m
}
