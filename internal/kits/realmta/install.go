package realmta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Binaries are the programs a world runs.
type Binaries struct {
	Postfix, Postconf, Postgrey, NSD, Exim string
	// Sendmail is the unpacked sendmail binary, Makemap its makemap and
	// SendmailCF the directory of sendmail-cf's m4 macros (cf.m4...).
	Sendmail, Makemap, SendmailCF string
	// Haraka is Haraka's bin/haraka (run with node), Redis redis-server.
	Haraka, Redis string
}

const modulePath = "github.com/emaildata/emaildata"

var (
	ensureOnce sync.Once
	ensureBins Binaries
	ensureErr  error
)

// Ensure runs hack/install-mail-servers.sh once per process (quick when
// everything is installed; installing needs root and apt) and returns the
// binaries' paths.
func Ensure() (Binaries, error) {
	ensureOnce.Do(func() { ensureBins, ensureErr = ensure() })
	return ensureBins, ensureErr
}

func ensure() (Binaries, error) {
	root, err := repoRoot()
	if err != nil {
		return Binaries{}, err
	}
	script := filepath.Join(root, "hack", "install-mail-servers.sh")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("realmta: %s failed (%v): %s", script, err, strings.TrimSpace(stderr.String()))
	}
	out := outputs(stdout.String())
	b := Binaries{
		Postfix: "/usr/sbin/postfix", Postconf: "/usr/sbin/postconf",
		Postgrey: "/usr/sbin/postgrey", NSD: "/usr/sbin/nsd",
		Exim: out["exim"], Sendmail: out["sendmail"], Haraka: out["haraka"], Redis: "/usr/bin/redis-server",
	}
	if b.Sendmail != "" {
		// <root>/usr/libexec/sendmail/sendmail: the package's tree.
		root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(b.Sendmail))))
		b.Makemap = filepath.Join(filepath.Dir(b.Sendmail), "makemap")
		b.SendmailCF = filepath.Join(root, "usr", "share", "sendmail", "cf")
	}
	for _, p := range []string{b.Postfix, b.Postconf, b.Postgrey, b.NSD, b.Exim, b.Sendmail, b.Makemap, b.SendmailCF, b.Haraka, b.Redis} {
		if p == "" {
			return Binaries{}, fmt.Errorf("realmta: %s ran but did not name every program (stdout %q)", script, stdout.String())
		}
		if _, err := os.Stat(p); err != nil {
			return Binaries{}, fmt.Errorf("realmta: %s ran but %v", script, err)
		}
	}
	if os.Geteuid() != 0 {
		return b, errors.New("realmta: Postfix's master, Exim and NSD run as root here (they drop privileges themselves); run the tests as root")
	}
	return b, nil
}

// outputs parses the script's stdout: name=path lines.
func outputs(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			m[k] = v
		}
	}
	return m
}

// repoRoot finds the main module's directory: upwards from the working
// directory (hack/compare has its own go.mod below it), else from this
// source file.
func repoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modLine(b) == modulePath {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("realmta: cannot find the %s checkout (from %v)", modulePath, starts)
}

func modLine(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}

// Require returns the binaries or stops the test: with CI=true it fails
// (CI runs as root with apt reachable, so the software must be there),
// elsewhere it skips, saying loudly how to install.
func Require(t testing.TB) Binaries {
	t.Helper()
	b, err := Ensure()
	if err == nil {
		return b
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("real mail servers unavailable (CI=true, so not skipping): %v", err)
	}
	t.Skipf("SKIPPING real-MTA tests: %v\n\tinstall with: sudo hack/install-mail-servers.sh (Debian: postfix, postgrey, nsd, redis-server, m4; exim4-daemon-light and sendmail-bin unpacked; npm: Haraka) and run the tests as root; with CI=true this fails", err)
	return b
}
