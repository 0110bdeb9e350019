package s3server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The server starts with its buckets, and each identity may use only its
// own buckets; the administrator may use all.
func TestIdentitiesAndBuckets(t *testing.T) {
	admin := Identity{Name: "admin", AccessKey: "AKADMIN", SecretKey: "admin-secret"}
	tenant := Identity{Name: "tenant", AccessKey: "AKTENANT", SecretKey: "tenant-secret", Buckets: []string{"tenant-bucket"}}
	s := ForTest(t, Options{Identities: []Identity{admin, tenant}, Buckets: []string{"store", "tenant-bucket"}})
	ctx := context.Background()
	put := func(id Identity, bucket string) error {
		_, err := s.Client(id).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("v")})
		return err
	}
	for _, tc := range []struct {
		id     Identity
		bucket string
		denied bool
	}{
		{admin, "store", false}, {admin, "tenant-bucket", false},
		{tenant, "tenant-bucket", false}, {tenant, "store", true},
		{Identity{AccessKey: "AKTENANT", SecretKey: "wrong"}, "tenant-bucket", true},
	} {
		err := put(tc.id, tc.bucket)
		var api interface{ ErrorCode() string } // smithy.APIError
		denied := errors.As(err, &api) && (api.ErrorCode() == "AccessDenied" || api.ErrorCode() == "SignatureDoesNotMatch")
		if denied != tc.denied || (!tc.denied && err != nil) {
			t.Errorf("%s (%s) puts to %s: %v; want denied %v", tc.id.Name, tc.id.AccessKey, tc.bucket, err, tc.denied)
		}
	}
	if _, err := s.Client(admin).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("tenant-bucket"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client(tenant).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("store"), Key: aws.String("k")}); err == nil {
		t.Fatal("the tenant read the store")
	}
	if n, err := s.Reads("tenant-bucket"); err != nil || n != 1 {
		t.Errorf("reads of tenant-bucket = %d, %v; want 1", n, err)
	}
	if n, err := s.Reads("store"); err != nil || n != 0 {
		t.Errorf("reads of store = %d, %v; want 0 (one was refused)", n, err)
	}
	if got := s.StoreURL("store"); !strings.HasPrefix(got, "s3://store?") || !strings.Contains(got, "use_path_style=true") {
		t.Errorf("StoreURL = %s", got)
	}
}

// A bucket name the server refuses fails Start at once, with the reason.
func TestBadBucketFailsFast(t *testing.T) {
	_, err := Start(context.Background(), Options{Binary: BinaryForTest(t), Dir: t.TempDir(), StopGrace: 1,
		Identities: []Identity{{Name: "admin", AccessKey: "AK", SecretKey: "SK"}}, Buckets: []string{"b"}})
	if err == nil || !strings.Contains(err.Error(), "InvalidBucketName") {
		t.Errorf("Start with bucket %q: %v, want InvalidBucketName", "b", err)
	}
}

// A server started again on the same directory (as `make run` does, other
// ports than the last time but the S3 one) still has its buckets and
// objects.
func TestRestartKeepsObjects(t *testing.T) {
	admin := Identity{Name: "admin", AccessKey: "AKADMIN", SecretKey: "admin-secret"}
	o := Options{Binary: BinaryForTest(t), Dir: t.TempDir(), Identities: []Identity{admin}, Buckets: []string{"store"}}
	ctx := context.Background()
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client(admin).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("store"), Key: aws.String("lists/a/plan.json"), Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s, err = Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	out, err := s.Client(admin).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("store"), Key: aws.String("lists/a/plan.json")})
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	out.Body.Close()
}

// lostPort tells a start that lost a port race (weed's bind refused)
// from other exits, which are not retried.
func TestLostPort(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want bool
	}{
		{"I1129 s3.go:412] Start Seaweed S3 API Server\nF1129 s3.go:420] S3 API Server listener on 127.0.0.1:41234 error: listen tcp 127.0.0.1:41234: bind: address already in use\n", true},
		{"F1129 master.go:200] invalid bucket name\n", false},
		{"", false},
	} {
		s := &Server{Log: filepath.Join(t.TempDir(), "weed.log")}
		if err := os.WriteFile(s.Log, []byte(tc.log), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := s.lostPort(); got != tc.want {
			t.Errorf("lostPort(%q) = %v, want %v", tc.log, got, tc.want)
		}
	}
	if (&Server{Log: filepath.Join(t.TempDir(), "none.log")}).lostPort() {
		t.Error("lostPort without a log = true")
	}
}
