package redact_test

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/platform/redact"
)

// Error keeps the condition and drops the place: no path, endpoint or
// address of the server survives; errors about content read as they are.
func TestError(t *testing.T) {
	// A real ENOSPC, the disk-full condition: /dev/full.
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, fullErr := full.Write([]byte("x"))
	full.Close()
	const dir = "/var/lib/emaildata/store"
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"disk full", fmt.Errorf("write lists/u1/parts/00000.part: %w", fullErr),
			"write lists/u1/parts/00000.part: write: no space left on device"},
		{"path error", fmt.Errorf("shard 0: %w", &os.PathError{Op: "open", Path: dir + "/lists/u1/input", Err: os.ErrPermission}),
			"shard 0: open: permission denied"},
		{"rename", fmt.Errorf("commit: %w", &os.LinkError{Op: "rename", Old: dir + "/a.tmp", New: dir + "/a", Err: os.ErrExist}),
			"commit: rename: file already exists"},
		{"S3 endpoint", fmt.Errorf("upload: %w", &url.Error{Op: "Put", URL: "http://10.1.2.3:8333/lists/k?partNumber=1", Err: &net.OpError{
			Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8333}, Err: errors.New("connect: connection refused")}}),
			"upload: Put (the endpoint): dial tcp: connect: connection refused"},
		{"joined", errors.Join(errors.New("shard 1 failed"), fmt.Errorf("summary: %w", fullErr)),
			"shard 1 failed\nsummary: write: no space left on device"},
		{"content", errors.New(`line 3: unterminated quoted field in "a/b.csv"`), `line 3: unterminated quoted field in "a/b.csv"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Error(tc.err)
			if got != tc.want {
				t.Errorf("Error\n got %q\nwant %q", got, tc.want)
			}
			if strings.Contains(got, dir) || strings.Contains(got, "10.1.2.3") || strings.Contains(got, "/dev/full") {
				t.Errorf("%q names a place of the server", got)
			}
		})
	}
	if redact.Error(nil) != "" {
		t.Error("Error(nil) is not empty")
	}
}
