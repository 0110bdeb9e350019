package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/emaildata/emaildata/internal/kits/s3server"
)

// The stores the local stack can run on.
const (
	// StoreFile is a file:// store under the state directory (default).
	StoreFile = "file"
	// StoreS3 is an s3:// store on a local S3-compatible server
	// (SeaweedFS, built by hack/s3-server.sh), its data under the state
	// directory's s3/.
	StoreS3 = "s3"
)

// StoreSecret holds the s3 store's credentials in the operator's
// namespace, as the chart's store.credentialsSecret does in a cluster; the
// worker pods get them from it (JobConfig.EnvFromSecret).
const StoreSecret = "emaildata-store-credentials"

// StoreBucket is the s3 store's bucket.
const StoreBucket = "emaildata"

// startS3 starts the local S3-compatible server and points the stack's
// store at it. The manager and the REST API, which run in this process,
// take the credentials from its environment, as their pods take them from
// the Secret in a cluster.
func (s *Stack) startS3(ctx context.Context, o Options) error {
	dir := filepath.Join(s.dir, "s3")
	id, err := localS3Identity(dir)
	if err != nil {
		return err
	}
	srv, err := s3server.Start(ctx, s3server.Options{Dir: dir, Identities: []s3server.Identity{id},
		Buckets: []string{StoreBucket}, Port: o.S3Port})
	if err != nil {
		return fmt.Errorf("start the S3-compatible server: %w", err)
	}
	s.s3 = srv
	s.S3Endpoint, s.BlobURL, s.StoreDir = srv.Endpoint, srv.StoreURL(StoreBucket), ""
	for _, kv := range id.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	s.s3Identity = id
	return nil
}

// writeStoreSecret writes the store's credentials Secret.
func (s *Stack) writeStoreSecret(ctx context.Context, c client.Client) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: StoreSecret}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, sec, func() error {
		sec.Data = map[string][]byte{}
		for _, kv := range s.s3Identity.Env() {
			k, v, _ := strings.Cut(kv, "=")
			sec.Data[k] = []byte(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store credentials Secret: %w", err)
	}
	return nil
}

// localS3Identity is the store's key pair, made once and kept in
// dir/credentials so that it stays the same between runs.
func localS3Identity(dir string) (s3server.Identity, error) {
	id := s3server.Identity{Name: "emaildata", AccessKey: "emaildata-local"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return id, err
	}
	path := filepath.Join(dir, "credentials")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		id.SecretKey = strings.TrimSpace(string(b))
		return id, nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return id, err
	}
	id.SecretKey = hex.EncodeToString(b[:])
	return id, os.WriteFile(path, []byte(id.SecretKey+"\n"), 0o600)
}
