package blobstore_test

import (
	"context"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

const fuzzTenant = "0123456789abcdef0123456789abcdef"

func TestCheckUploadKey(t *testing.T) {
	p := blobstore.UploadPrefix(fuzzTenant)
	cases := []struct {
		key, tenant string
		ok          bool
	}{
		{p + "uuid/people.csv", fuzzTenant, true},
		{p + "uuid/people.csv", "other", false},
		{"uploads/other/uuid/people.csv", fuzzTenant, false},
		{p + "../other/x.csv", fuzzTenant, false},
		{p, fuzzTenant, false},
		{p + "a//b.csv", fuzzTenant, false},
		{p + "a/b.csv/", fuzzTenant, false},
		{"lists/uid/result/x.csv", fuzzTenant, false},
		{p + "a\x00.csv", fuzzTenant, false},
		{p + "a.csv", "", false},
		{p + "a.csv", "../x", false},
	}
	for _, tc := range cases {
		if err := blobstore.CheckUploadKey(tc.key, tc.tenant); (err == nil) != tc.ok {
			t.Errorf("CheckUploadKey(%q, %q) = %v, want ok=%v", tc.key, tc.tenant, err, tc.ok)
		}
	}
}

func TestParseGrants(t *testing.T) {
	g, err := blobstore.ParseGrants(" team-a=imports/team-a/, team-b=imports/team-b/ ")
	if err != nil || g["team-a"] != "imports/team-a/" || g["team-b"] != "imports/team-b/" {
		t.Fatalf("%v %v", g, err)
	}
	for in, want := range map[string]string{
		"team-a":                              "must be namespace=prefix/",
		"team-a=imports/team-a":               "must end in /",
		"team-a=lists/":                       "reserved folder lists/",
		"team-a=uploads/x/":                   "reserved folder uploads/",
		"team-a=datasets/":                    "reserved folder datasets/",
		"team-a=config/":                      "reserved folder config/",
		"team-a=../x/":                        "relative path element",
		"team-a=/abs/":                        "not a clean relative path",
		"team-a=a//b/":                        "not a clean path",
		"team-a=x/,team-a=y/":                 "named twice",
		"team-a=imports/,team-b=imports/b/":   "overlap",
		"team-a=imports/a/,team-b=imports/a/": "overlap",
	} {
		if _, err := blobstore.ParseGrants(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGrants(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestGrantedKey(t *testing.T) {
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	base := "file://" + dir
	const prefix = "imports/team-b/"
	cases := []struct {
		url string
		ok  bool
	}{
		{base + "/imports/team-b/list.csv", true},
		{base + "/imports/team-b/sub/list.csv", true},
		{base + "/imports/team-a/list.csv", false},
		{base + "/imports/team-b/../team-a/list.csv", false},
		{base + "/imports/team-b/%2e%2e/team-a/list.csv", false},
		{base + "/imports/team-b", false},
		{base + "/imports/team-b/", false},
		{base + "/lists/uid/result/x.csv", false},
		{base + "/imports/team-b/list.csv?x=1", false},
		{base + "/imports/team-b/list.csv#frag", false},
		{"s3://bucket/imports/team-b/list.csv", false},
		{"file:///etc/imports/team-b/list.csv", false},
	}
	for _, tc := range cases {
		key, err := s.GrantedKey(tc.url, prefix)
		if (err == nil) != tc.ok {
			t.Errorf("GrantedKey(%q) = %q, %v; want ok=%v", tc.url, key, err, tc.ok)
		}
	}
}

// FuzzCheckUploadKey: an accepted key is clean and inside the tenant's
// upload folder, whatever the input.
func FuzzCheckUploadKey(f *testing.F) {
	f.Add(blobstore.UploadPrefix(fuzzTenant)+"u/people.csv", fuzzTenant)
	f.Fuzz(func(t *testing.T, key, tenant string) {
		if blobstore.CheckUploadKey(key, tenant) != nil {
			return
		}
		mustBeInside(t, key, blobstore.UploadPrefix(tenant))
	})
}

// FuzzGrantedKey: an accepted blob URL names a key under the granted
// prefix, and on disk a file under the prefix's directory. Seeds name the
// store's directory /STORE.
func FuzzGrantedKey(f *testing.F) {
	dir := f.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir)
	if err != nil {
		f.Fatal(err)
	}
	const prefix = "imports/team-b/"
	f.Add("file:///STORE/imports/team-b/list.csv")
	f.Fuzz(func(t *testing.T, raw string) {
		raw = strings.ReplaceAll(raw, "/STORE", dir) // the seeds' store directory
		key, err := s.GrantedKey(raw, prefix)
		if err != nil {
			return
		}
		mustBeInside(t, key, prefix)
		onDisk := filepath.Join(dir, filepath.FromSlash(key))
		if !strings.HasPrefix(onDisk, filepath.Join(dir, "imports", "team-b")+string(filepath.Separator)) {
			t.Fatalf("%q maps to %s, outside the grant", raw, onDisk)
		}
	})
}

// FuzzParseExternalURL: an accepted URL is s3 with a clean key, only known
// parameters and, when it names one, an http(s) endpoint without user info.
func FuzzParseExternalURL(f *testing.F) {
	f.Add("s3://bucket/in/list.csv?region=eu-west-1&endpoint=http://127.0.0.1:9000")
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := blobstore.ParseExternalURL(raw)
		if err != nil {
			return
		}
		if blobstore.CheckStrictKey(e.Key) != nil || e.Bucket == "" {
			t.Fatalf("%q accepted with key %q bucket %q", raw, e.Key, e.Bucket)
		}
		if e.Endpoint != "" {
			u, err := url.Parse(e.Endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" {
				t.Fatalf("%q accepted with endpoint %q", raw, e.Endpoint)
			}
		}
	})
}

func mustBeInside(t *testing.T, key, prefix string) {
	t.Helper()
	if !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
		t.Fatalf("accepted %q outside %s", key, prefix)
	}
	if path.Clean(key) != key || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		t.Fatalf("accepted unclean key %q", key)
	}
	for _, el := range strings.Split(key, "/") {
		if el == ".." || el == "." || el == "" {
			t.Fatalf("accepted %q with element %q", key, el)
		}
	}
}
