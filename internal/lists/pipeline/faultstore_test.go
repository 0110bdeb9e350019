package pipeline

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
)

// errInjected is the I/O failure a faultBucket injects.
var errInjected = errors.New("injected store failure")

// faultBucket is a blob driver over a mem:// bucket that fails reads of
// chosen keys once they reach a byte offset, and Attributes of chosen keys,
// to check that store failures are never classified as bad input.
type faultBucket struct {
	driver.Bucket // unused methods panic
	inner         *blob.Bucket

	mu       sync.Mutex
	readFail map[string][2]int64 // reads of key fail on the bytes [from, to)
	attrFail map[string]bool
}

func newFaultStore(t testing.TB) (*blobstore.Store, *faultBucket) {
	fb := &faultBucket{inner: memblob.OpenBucket(nil), readFail: map[string][2]int64{}, attrFail: map[string]bool{}}
	s := blobstore.FromBucket(blob.NewBucket(fb), "mem://")
	t.Cleanup(func() { s.Close() })
	return s, fb
}

// failReads makes reads of key fail when they reach the bytes [from, to).
func (b *faultBucket) failReads(key string, from, to int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readFail[key] = [2]int64{from, to}
}

func (b *faultBucket) failAttributes(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attrFail[key] = true
}

func (b *faultBucket) ErrorCode(err error) gcerrors.ErrorCode {
	if errors.Is(err, errInjected) {
		return gcerrors.Internal
	}
	return gcerrors.Code(err)
}
func (b *faultBucket) As(any) bool             { return false }
func (b *faultBucket) ErrorAs(error, any) bool { return false }
func (b *faultBucket) Close() error            { return b.inner.Close() }

func (b *faultBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	b.mu.Lock()
	fail := b.attrFail[key]
	b.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	a, err := b.inner.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{ContentType: a.ContentType, Size: a.Size, ModTime: a.ModTime, MD5: a.MD5, ETag: a.ETag}, nil
}

func (b *faultBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	b.mu.Lock()
	bad, ok := b.readFail[key]
	b.mu.Unlock()
	if !ok {
		bad = [2]int64{-1, -1}
	}
	if offset >= bad[0] && offset < bad[1] {
		return nil, errInjected
	}
	r, err := b.inner.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return &faultReader{r: r, off: offset, bad: bad}, nil
}

func (b *faultBucket) NewTypedWriter(ctx context.Context, key, contentType string, _ *driver.WriterOptions) (driver.Writer, error) {
	return b.inner.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType})
}

func (b *faultBucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	return b.inner.Delete(ctx, key)
}

type faultReader struct {
	r   *blob.Reader
	off int64
	bad [2]int64
}

func (r *faultReader) Read(p []byte) (int, error) {
	if r.off >= r.bad[0] && r.off < r.bad[1] {
		return 0, errInjected
	}
	if r.off < r.bad[0] {
		p = p[:min(int64(len(p)), r.bad[0]-r.off)]
	}
	n, err := r.r.Read(p)
	r.off += int64(n)
	return n, err
}

func (r *faultReader) Close() error { return r.r.Close() }
func (r *faultReader) As(any) bool  { return false }
func (r *faultReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

var _ io.ReadCloser = (*faultReader)(nil)
