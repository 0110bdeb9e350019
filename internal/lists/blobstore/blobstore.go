// Package blobstore opens the operator's object store by URL and names the
// objects that belong to a list.
//
// Any gocloud.dev/blob URL works: file:// (the embedded default, a PVC in a
// cluster), mem:// (tests), s3://, gs:// and azblob://.
package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	_ "gocloud.dev/blob/fileblob"  // file:// URLs
	_ "gocloud.dev/blob/gcsblob"   // gs:// URLs
	_ "gocloud.dev/blob/memblob"   // mem:// URLs
	_ "gocloud.dev/blob/s3blob"    // s3:// URLs
	"gocloud.dev/gcerrors"
)

// ErrNotFound reports a missing object.
var ErrNotFound = errors.New("object not found")

// Store is an opened bucket plus the URL it came from.
type Store struct {
	*blob.Bucket
	url *url.URL
	s3  *s3.Client // the bucket's client on an s3:// store (see s3writer.go)
}

// Open opens the bucket named by rawURL. For file:// stores the directory is
// created when missing and no metadata sidecar files are written.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse blob store URL: %w", err)
	}
	open := *u
	if u.Scheme == "file" {
		q := open.Query()
		if !q.Has("create_dir") {
			q.Set("create_dir", "true")
		}
		if !q.Has("no_tmp_dir") {
			// Write temp files beside the object, so the final rename stays on
			// one filesystem (a read-only root with a mounted store).
			q.Set("no_tmp_dir", "true")
		}
		if !q.Has("metadata") {
			q.Set("metadata", "skip")
		}
		open.RawQuery = q.Encode()
	}
	b, err := blob.OpenBucket(ctx, open.String())
	if err != nil {
		return nil, fmt.Errorf("open blob store %s://: %w", u.Scheme, err)
	}
	return &Store{Bucket: b, url: u, s3: s3Client(b)}, nil
}

// FromBucket wraps an already opened bucket, for tests that share a mem:// bucket.
func FromBucket(b *blob.Bucket, rawURL string) *Store {
	u, _ := url.Parse(rawURL)
	if u == nil {
		u = &url.URL{}
	}
	return &Store{Bucket: b, url: u, s3: s3Client(b)}
}

// KeyFromURL maps a URL of an object inside this store to its key. The URL
// must have the store's scheme and bucket (host), and, for file stores, lie
// under the store's directory.
func (s *Store) KeyFromURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("blob URL is not a URL: %w", err)
	}
	if u.Scheme != s.url.Scheme || u.Host != s.url.Host {
		return "", fmt.Errorf("blob URL %s://%s/... is not in the configured store %s://%s", u.Scheme, u.Host, s.url.Scheme, s.url.Host)
	}
	prefix := strings.TrimSuffix(s.url.Path, "/") + "/"
	if s.url.Path == "" {
		prefix = "/"
	}
	if !strings.HasPrefix(u.Path, prefix) {
		return "", fmt.Errorf("blob URL path %q is outside the configured store path %q", u.Path, prefix)
	}
	key := strings.TrimPrefix(u.Path, prefix)
	if err := ValidKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// ValidKey rejects keys that are empty or try to climb out of the store.
func ValidKey(key string) error {
	if key == "" {
		return errors.New("blob key is empty")
	}
	for _, part := range strings.Split(key, "/") {
		if part == ".." || part == "." {
			return fmt.Errorf("blob key %q contains a relative path element", key)
		}
	}
	if strings.HasPrefix(key, "/") || strings.ContainsRune(key, '\\') || strings.ContainsRune(key, 0) {
		return fmt.Errorf("blob key %q is not a clean relative path", key)
	}
	return nil
}

// MinPartSize is the smallest part S3 and S3-compatible servers accept in a
// multipart upload (all parts but the last). gocloud's s3 writer uploads
// parts of the writer's BufferSize, so a smaller BufferSize would make
// every large upload fail with EntityTooSmall; Store.NewWriter raises it.
const MinPartSize = 5 << 20

// WriterOptions are the options for writing a large object in a stream
// (a shard's part, a result): parts of MinPartSize, two uploading at once.
// On S3, Store.NewWriter gives any writer these bounds (see s3writer.go).
func WriterOptions(contentType string) blob.WriterOptions {
	return blob.WriterOptions{ContentType: contentType, BufferSize: MinPartSize, MaxConcurrency: 2}
}

// Size returns an object's size, or ErrNotFound.
func (s *Store) Size(ctx context.Context, key string) (int64, error) {
	a, err := s.Attributes(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return 0, fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return 0, fmt.Errorf("stat %s: %w", key, err)
	}
	return a.Size, nil
}

// IsNotFound reports whether err means a missing object.
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || gcerrors.Code(err) == gcerrors.NotFound
}

// WriteJSON stores v as a JSON object.
func (s *Store) WriteJSON(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := s.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// ReadJSON loads a JSON object written by WriteJSON. Objects over max bytes
// are refused, so a corrupt store cannot exhaust memory.
func (s *Store) ReadJSON(ctx context.Context, key string, max int64, v any) error {
	r, err := s.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return fmt.Errorf("%s: %w", key, ErrNotFound)
		}
		return fmt.Errorf("open %s: %w", key, err)
	}
	defer r.Close()
	if r.Size() > max {
		return fmt.Errorf("%s is %d bytes, more than the %d allowed", key, r.Size(), max)
	}
	if err := json.NewDecoder(io.LimitReader(r, max)).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// Count is the number of objects under prefix (what a cleanup left, in
// tests and checks).
func (s *Store) Count(ctx context.Context, prefix string) (int, error) {
	it := s.List(&blob.ListOptions{Prefix: prefix})
	n := 0
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("list %s: %w", prefix, err)
		}
		if !obj.IsDir {
			n++
		}
	}
}

// DeletePrefix deletes every object under prefix.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	it := s.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if err := s.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("delete %s: %w", obj.Key, err)
		}
	}
}

// ReaderAt reads an object at random offsets, as archive/zip needs.
type ReaderAt struct {
	ctx context.Context
	s   *Store
	key string
}

// NewReaderAt returns a ReaderAt over key and the object's size.
func (s *Store) NewReaderAt(ctx context.Context, key string) (*ReaderAt, int64, error) {
	size, err := s.Size(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	return &ReaderAt{ctx: ctx, s: s, key: key}, size, nil
}

// ReadAt implements io.ReaderAt with one range read per call.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	rr, err := r.s.NewRangeReader(r.ctx, r.key, off, int64(len(p)), nil)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	n, err := io.ReadFull(rr, p)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

// CopyTo copies the object key to w. On a file:// store it hands the
// object's own file to io.Copy, so that when w is (or passes its ReadFrom
// through to) a plain file the kernel copies the bytes (copy_file_range)
// instead of this process reading and writing them: `worker run` writes its
// result this way, every part once.
func (s *Store) CopyTo(ctx context.Context, w io.Writer, key string) (int64, error) {
	r, err := s.NewReader(ctx, key, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var src io.Reader = r
	var under io.Reader
	if r.As(&under) {
		if f, ok := under.(*os.File); ok {
			src = f // fileblob's reader of a whole object is the file itself
		}
	}
	return io.Copy(w, src)
}
