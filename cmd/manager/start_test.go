package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain runs the manager's main in a child process when the test asks
// for one (see runManager): a refusal at start is an exit.
func TestMain(m *testing.M) {
	if args := os.Getenv("EMAILDATA_TEST_MANAGER_ARGS"); args != "" {
		os.Args = append([]string{"manager"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runManager runs the manager with args in a child process, and returns
// its exit code and what it wrote.
func runManager(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// No cluster: should the manager get past its configuration, it fails
	// to find one (exit 1), not 2.
	cmd.Env = append(os.Environ(), "EMAILDATA_TEST_MANAGER_ARGS="+strings.Join(args, "\n"), "KUBECONFIG=/nonexistent", "KUBERNETES_SERVICE_HOST=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// TestInvalidConfigurationStopsStart: the manager reads its configuration
// once, whole, before it starts anything (not even its client of the API
// server): a file with a good change and a bad one is refused as a whole
// (exit 2, every problem with its path), never half applied; a good one
// gets past it (and here fails for want of a cluster).
func TestInvalidConfigurationStopsStart(t *testing.T) {
	const head = "apiVersion: config.emaildata.io/v1alpha1\nkind: Configuration\n"
	for _, tc := range []struct {
		name, body string
		code       int
		want       []string
	}{
		{"a good change and two bad values", "verification:\n  smtp:\n    heloName: verify.example.com\n    maxConnsPerHost: 0\nexecutor:\n  jobs:\n    parallelism: -1\n",
			2, []string{"verification.smtp.maxConnsPerHost", "executor.jobs.parallelism"}},
		{"a misspelt key", "verification:\n  smtp:\n    heloNmae: verify.example.com\n", 2, []string{"line 5", "verification.smtp.heloNmae"}},
		{"a good file", "verification:\n  smtp:\n    heloName: verify.example.com\n", 1, []string{"unable to get kubeconfig"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(head+tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out := runManager(t, "--config="+path, "--metrics-bind-address=0", "--health-probe-bind-address=0")
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
