package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/emaildata/emaildata/api/kubescheme"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/operator"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// TestManagerMetricsNeedAuthorization runs the manager with its default
// metrics server (HTTPS, TokenReview and SubjectAccessReview) against a
// real API server: a request without a token is refused, so is a token
// whose service account lacks the shipped metrics-reader ClusterRole
// (config/rbac/metrics_reader_role.yaml), and one bound to it is served.
func TestManagerMetricsNeedAuthorization(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := kubernetes.NewForConfigOrDie(cfg)

	addr := freeAddr(t)
	mgr, err := operator.New(ctx, cfg, operator.Options{
		Namespace: "default", Executor: operator.ExecutorLocal, BlobURL: "file://" + t.TempDir(),
		MetricsAddr: addr, ProbeAddr: "0", SkipNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	reconcileOneList(ctx, t, cfg)

	reader := readerRole(t)
	reader.Name = "test-metrics-reader"
	mustCreate(t, func() error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{})
		return err
	})
	tokens := map[string]string{}
	for _, sa := range []string{"scraper", "stranger"} {
		mustCreate(t, func() error {
			_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", sa, err)
		}
		tokens[sa] = tr.Status.Token
	}
	mustCreate(t, func() error {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: "default"}},
		}, metav1.CreateOptions{})
		return err
	})

	cases := []struct {
		name, token string
		codes       []int
	}{
		{"no token", "", []int{http.StatusUnauthorized, http.StatusForbidden}},
		// controller-runtime answers 500 when the TokenReview itself errs.
		{"bad token", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		{"token without the role", tokens["stranger"], []int{http.StatusForbidden}},
		{"metrics reader", tokens["scraper"], []int{http.StatusOK}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getMetrics(t, addr, tc.token)
			if !contains(tc.codes, code) {
				t.Fatalf("GET /metrics: %d, want one of %v (%.200s)", code, tc.codes, body)
			}
			if code == http.StatusOK && !strings.Contains(body, `emaildata_lists{phase="Results"}`) {
				t.Errorf("metrics lack emaildata_lists{phase=\"Results\"}")
			}
			if code == http.StatusOK {
				checkExternalFamilies(t, body)
			}
			if code != http.StatusOK && strings.Contains(body, "emaildata_") {
				t.Errorf("a refused request got metrics")
			}
		})
	}
}

// reconcileOneList creates a list (its ConfigMap missing) and waits until
// the manager has reconciled it: its work queue has held an item, so the
// queue's depth is a series (controller-runtime makes it on first use).
func reconcileOneList(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	list := builders.MakeEmailList("default", "metrics-probe").ConfigMap("missing", "list.csv").Obj()
	if err := c.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list.Status.Conditions) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the manager did not reconcile %s within 30s", list.Name)
		}
		time.Sleep(100 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(list), list); err != nil {
			t.Fatal(err)
		}
	}
}

// checkExternalFamilies: the controller-runtime series the alerts read
// (metrics.ExternalFamilies) are served, for the emaillist controller,
// with exactly the labels declared there.
func checkExternalFamilies(t *testing.T, body string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the metrics: %v", err)
	}
	for _, f := range metrics.ExternalFamilies() {
		if f.Name == metrics.Up {
			continue // Prometheus's, per scrape
		}
		mf, ok := parsed[f.Name]
		if !ok {
			t.Errorf("the manager serves no %s", f.Name)
			continue
		}
		found := false
		for _, m := range mf.GetMetric() {
			var names []string
			controller := ""
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
				if l.GetName() == "controller" {
					controller = l.GetValue()
				}
			}
			slices.Sort(names)
			if want := slices.Sorted(slices.Values(f.Labels)); !slices.Equal(names, want) {
				t.Errorf("%s has labels %v, want %v", f.Name, names, want)
			}
			found = found || controller == "emaillist"
		}
		if !found {
			t.Errorf("%s has no series for the emaillist controller", f.Name)
		}
	}
}

// getMetrics GETs https://addr/metrics, retrying while the server starts.
func getMetrics(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed, as deployed by default
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readerRole is the shipped metrics-reader ClusterRole.
func readerRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(fmt.Errorf("create: %w", err))
	}
}

func contains(codes []int, c int) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
