package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReader is the service account (in Namespace) whose token reads the
// manager's metrics, through the ClusterRole of the same name, as a
// cluster's Prometheus would through config/rbac/metrics_reader_role.yaml.
const MetricsReader = "emaildata-metrics-reader"

// metricsTokenSeconds is the token's lifetime: a day of local work.
const metricsTokenSeconds = 24 * 3600

// writeMetricsToken creates the metrics reader (account, ClusterRole,
// binding) and writes a fresh token for it to dir/metrics-token.
func writeMetricsToken(ctx context.Context, c client.Client, dir string) (string, error) {
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: MetricsReader}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: MetricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: MetricsReader}},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create metrics reader: %w", err)
		}
	}
	exp := int64(metricsTokenSeconds)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: MetricsReader}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("metrics reader token: %w", err)
	}
	path := filepath.Join(dir, "metrics-token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
