package v1alpha1

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultsLiveOnce: the defaults that used to be written in several
// places (the HELO name in smtpprobe's caller and in wiring, the
// manager's and the API's flag defaults, restapi's fallbacks) are
// written once, in defaults.go; the rest of the code reads Default().
func TestDefaultsLiveOnce(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	once := []string{
		`"verify.emaildata.local"`, `"verify@emaildata.local"`, // HELO and MAIL FROM
		`"emaildata-manager.lists.emaildata.io"`, // leader election Lease
		`"500m"`,                                 // worker CPU
		`45 * time.Second`, `45*time.Second`,     // API shutdown timeout
		`ProxyMaxConns: 100`, `RowsInFlight: 100_000`, `1500 * time.Millisecond`, `1500*time.Millisecond`,
	}
	found := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, lit := range once {
			if strings.Contains(string(b), lit) {
				found[lit] = append(found[lit], filepath.ToSlash(path))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for lit, files := range found {
		for _, f := range files {
			if !strings.HasSuffix(f, "api/config/v1alpha1/defaults.go") {
				t.Errorf("default %s written in %s: read it from v1alpha1.Default()", lit, f)
			}
		}
	}
	if len(found[`"verify.emaildata.local"`]) != 1 {
		t.Errorf("the HELO default is written %d times, want once", len(found[`"verify.emaildata.local"`]))
	}
}
