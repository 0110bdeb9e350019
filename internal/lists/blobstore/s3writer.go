package blobstore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// Writers on an s3:// store. gocloud's S3 writer hands the stream to the
// AWS SDK's transfer manager, whose defaults cost a process about 80 MiB of
// RSS for one large object: it reads the first 16 MiB (its multipart
// threshold) into a growing buffer before it decides on a multipart upload,
// then allocates Concurrency+1 parts of PartSizeBytes (5 uploading at once
// of 8 MiB: 48 MiB). gocloud sets the part size and concurrency from
// blob.WriterOptions, but not the threshold. A worker pod has one such
// writer, the manager one per list it prepares or merges, the REST API one
// per upload: within a 256Mi pod that is a large share.
//
// So every writer of a Store on S3 uploads parts of at least MinPartSize,
// at most MaxConcurrency (2 unless set) at once, and switches to a
// multipart upload once it has one part: about 3 parts and the first read
// in memory. BenchmarkS3Writer, one 60 MB object: 21-25 MiB of peak RSS
// growth, against 50 MiB with the part size and concurrency alone and
// 82-83 MiB with the defaults; TestS3/WriterBounded checks it.

// s3Client is the bucket's S3 client, or nil for another kind of store.
func s3Client(b *blob.Bucket) *s3.Client {
	var c *s3.Client
	if b.As(&c) {
		return c
	}
	return nil
}

// NewWriter is blob.Bucket's NewWriter with an S3 upload's memory bounded
// (see above); on other stores it is the bucket's.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (*blob.Writer, error) {
	if s.s3 == nil {
		return s.Bucket.NewWriter(ctx, key, opts)
	}
	return s.Bucket.NewWriter(ctx, key, s.boundedS3(opts))
}

// boundedS3 is opts with parts of at least MinPartSize (smaller ones S3
// refuses in a multipart upload), two uploading at once unless set, and
// the transfer manager's multipart threshold at one part.
func (s *Store) boundedS3(opts *blob.WriterOptions) *blob.WriterOptions {
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	o.BufferSize = max(o.BufferSize, MinPartSize)
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 2
	}
	part, concurrency := int64(o.BufferSize), o.MaxConcurrency
	checksums := s.s3.Options().RequestChecksumCalculation
	before := o.BeforeWrite
	o.BeforeWrite = func(as func(any) bool) error {
		// gocloud exposes the writer's own transfer manager client, whose
		// options are set only by New: replace its value with one that has
		// the threshold too (and what gocloud set: part size, concurrency,
		// the bucket's checksum setting, which is its client's).
		var tm *transfermanager.Client
		if as(&tm) && tm != nil {
			*tm = *transfermanager.New(s.s3, func(t *transfermanager.Options) {
				t.PartSizeBytes = part
				t.Concurrency = concurrency
				t.MultipartUploadThreshold = part
				t.RequestChecksumCalculation = checksums
			})
		}
		if before != nil {
			return before(as)
		}
		return nil
	}
	return &o
}
