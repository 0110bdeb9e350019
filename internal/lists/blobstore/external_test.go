package blobstore_test

import (
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

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
