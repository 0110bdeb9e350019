package restapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/restapi"
)

// zipWith zips content as name; declared, when not 0, replaces the size
// the central header claims (as a hostile archiver may).
func zipWith(t *testing.T, name string, content []byte, declared uint32) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	z := buf.Bytes()
	if declared != 0 {
		i := bytes.LastIndex(z, []byte("PK\x01\x02"))
		binary.LittleEndian.PutUint32(z[i+24:], declared) // the uncompressed size
	}
	return z
}

// TestUploadZipLimits: the API checks an uploaded zip against the limits
// the manager prepares it with, so it refuses at once (400 BadZip) what
// the manager would fail later: a zip declaring more than the manager's
// 2 GiB (the API's zero Limits allowed 10 GiB: 202, then Failed), and a
// zip whose declared expansion passes the ratio (a bomb: 4 MiB of one byte
// in 4 KB, which no cap refused before).
func TestUploadZipLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The API as the manager's defaults configure it, and as make run's
	// zero Limits did (the ratio off, to reach the size limit).
	defaults, err := startAPI(ctx, restapi.Config{Limits: listfile.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	noRatio, err := startAPI(ctx, restapi.Config{Limits: listfile.Limits{MaxExpansionRatio: -1}})
	if err != nil {
		t.Fatal(err)
	}
	rows := []byte("email\n" + strings.Repeat("a@example.com\n", 10))
	bomb := zipWith(t, "bomb.csv", bytes.Repeat([]byte{'a'}, 4<<20), 0)
	for _, tc := range []struct {
		name, base string
		zip        []byte
		code       int
		msg        string
	}{
		{"declares 3 GiB", noRatio, zipWith(t, "big.csv", rows, 3<<30), http.StatusBadRequest, "expands beyond 2147483648 bytes"},
		{"declares 3 GiB, default limits", defaults, zipWith(t, "big.csv", rows, 3<<30), http.StatusBadRequest, "100 times the archive's"},
		{"bomb", defaults, bomb, http.StatusBadRequest, "expands beyond 1048576 bytes, 100 times the archive's"},
		{"a small zip", defaults, zipWith(t, "ok.csv", rows, 0), http.StatusAccepted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := multipartFile(t, "l.zip", tc.zip)
			req := newRequest(t, http.MethodPost, "/v5/list?header=true", keyAcme, body, ct)
			req.URL.Host = tc.base
			r := do(t, req)
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r.body)
			}
			if tc.msg == "" {
				return
			}
			m := r.json(t)
			if msg, _ := m["message"].(string); m["error"] != "BadZip" || !strings.Contains(msg, tc.msg) {
				t.Errorf("%v, want BadZip saying %q", m, tc.msg)
			}
		})
	}
}
