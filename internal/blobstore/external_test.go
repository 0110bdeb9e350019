package blobstore_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"gocloud.dev/gcerrors"

	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/blobstore/s3test"
)

// TestOpenExternal reads an object from a real (loopback) S3 server with
// the Secret's credentials, which the server checks by signature.
func TestOpenExternal(t *testing.T) {
	srv := s3test.New("AKIDTEAMB", "team-b-secret")
	defer srv.Close()
	srv.Put("team-b", "in/list.csv", []byte("a@example.com\n"))
	ctx := context.Background()

	ext, err := blobstore.ParseExternalURL("s3://team-b/in/list.csv?region=eu-west-1&endpoint=" + srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	good := blobstore.Credentials{AccessKeyID: "AKIDTEAMB", SecretAccessKey: "team-b-secret"}
	b, err := blobstore.OpenExternal(ctx, ext, good, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, err := b.ReadAll(ctx, ext.Key)
	if err != nil || string(data) != "a@example.com\n" {
		t.Fatalf("read %q, %v", data, err)
	}
	if _, err := b.ReadAll(ctx, "in/missing.csv"); gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing object: %v, want NotFound", err)
	}

	wrong := blobstore.Credentials{AccessKeyID: "AKIDTEAMB", SecretAccessKey: "guess"}
	b2, err := blobstore.OpenExternal(ctx, ext, wrong, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if _, err := b2.ReadAll(ctx, ext.Key); !blobstore.IsAccessDenied(err) {
		t.Errorf("wrong secret: %v, want access denied", err)
	}
	if n := srv.Reads(); n != 1 {
		t.Errorf("server served %d reads, want 1 (the good one)", n)
	}
}

func TestParseExternalURL(t *testing.T) {
	cases := []struct{ url, want string }{
		{"s3://bucket/a/b.csv", ""},
		{"s3://bucket/a/b.csv?region=us-east-2&endpoint=https://minio.example:9000&use_path_style=true", ""},
		{"gs://bucket/a.csv", "cannot be read with credentialsSecretRef"},
		{"file:///etc/passwd", "cannot be read with credentialsSecretRef"},
		{"s3://bucket/a/../b.csv", "relative path element"},
		{"s3://bucket//b.csv", "not a clean relative path"},
		{"s3://bucket/a.csv?awssdk=v1", `parameter "awssdk" is not supported; use region, endpoint, use_path_style`},
		{"s3://bucket/a.csv?endpoint=file:///x", "must be http(s)://host[:port]"},
		{"s3://bucket/a.csv?endpoint=http://u:p@h/", "must be http(s)://host[:port]"},
		{"s3://user:pw@bucket/a.csv", "without user info"},
		{"s3://Bucket_/a.csv", "not a valid bucket name"},
		{"s3://bucket/", "blob key is empty"},
		{"s3://bucket/a.csv?region=a&region=b", "given 2 times"},
	}
	for _, tc := range cases {
		_, err := blobstore.ParseExternalURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.url, err, tc.want)
		}
	}
}
