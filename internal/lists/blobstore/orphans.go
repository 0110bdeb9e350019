package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// Orphaned uploads. The REST API streams a list into UploadsFolder and only
// then creates the EmailList naming it; an API that dies in between leaves
// what it wrote: on a file store the object's temporary file
// (<name>.<hex>.tmp, beside it), on S3 an incomplete multipart upload
// (invisible to listings, still billed), or, killed between the two steps,
// a complete object no list names. Each holds a customer's addresses.
// RemoveOrphanUploads deletes them once they have been left untouched for
// long enough that no request can still be writing them.

// Kinds of removed orphans (SweepResult, the metric's kind label).
const (
	// OrphanObject: an object or a file store's temporary file.
	OrphanObject = "object"
	// OrphanMultipart: an incomplete S3 multipart upload.
	OrphanMultipart = "multipart"
)

// SweepResult counts what RemoveOrphanUploads removed.
type SweepResult struct {
	Objects, Multiparts int
	Bytes               int64 // of the objects (multipart sizes are not listed)
}

// RemoveOrphanUploads removes, under UploadsFolder, every object last
// written before cutoff that keep does not claim, and on S3 every
// incomplete multipart upload with no part written since cutoff. An
// upload in progress is never touched as long as it writes at least once
// per cutoff's age: a file store's temporary file gets a new modification
// time with every write, an S3 upload a new part every MinPartSize bytes.
// keep must name every key a live list reads; it is asked only about old
// objects.
func (s *Store) RemoveOrphanUploads(ctx context.Context, cutoff time.Time, keep func(key string) bool) (SweepResult, error) {
	var res SweepResult
	it := s.List(&blob.ListOptions{Prefix: UploadsFolder})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, fmt.Errorf("list %s: %w", UploadsFolder, err)
		}
		if obj.IsDir || !obj.ModTime.Before(cutoff) || keep(obj.Key) {
			continue
		}
		if err := s.Delete(ctx, obj.Key); err != nil && !IsNotFound(err) {
			return res, fmt.Errorf("delete orphaned upload %s: %w", obj.Key, err)
		}
		res.Objects++
		res.Bytes += obj.Size
	}
	if s.s3 == nil {
		return res, nil
	}
	n, err := s.abortOrphanMultiparts(ctx, cutoff)
	res.Multiparts = n
	return res, err
}

// abortOrphanMultiparts aborts the incomplete multipart uploads under
// UploadsFolder whose last part (or start, without parts) is older than
// cutoff.
func (s *Store) abortOrphanMultiparts(ctx context.Context, cutoff time.Time) (int, error) {
	bucket := s.url.Host
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(UploadsFolder)}
	n := 0
	for {
		out, err := s.s3.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, fmt.Errorf("list multipart uploads under %s: %w", UploadsFolder, err)
		}
		for _, u := range out.Uploads {
			last, gone, err := s.lastPart(ctx, bucket, u.Key, u.UploadId, aws.ToTime(u.Initiated))
			if err != nil {
				return n, err
			}
			if gone || !last.Before(cutoff) {
				continue
			}
			_, err = s.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
			switch {
			case isNoSuchUpload(err) || IsNotFound(err):
				continue // completed or aborted meanwhile
			case err != nil:
				return n, fmt.Errorf("abort multipart upload of %s: %w", aws.ToString(u.Key), err)
			}
			n++
		}
		if !aws.ToBool(out.IsTruncated) {
			return n, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// lastPart is when the upload last received a part (initiated, without
// parts); gone when it was completed or aborted meanwhile.
func (s *Store) lastPart(ctx context.Context, bucket string, key, uploadID *string, initiated time.Time) (last time.Time, gone bool, err error) {
	last = initiated
	p := s3.NewListPartsPaginator(s.s3, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: key, UploadId: uploadID})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if isNoSuchUpload(err) {
			return last, true, nil
		}
		if err != nil {
			return last, false, fmt.Errorf("list parts of %s: %w", aws.ToString(key), err)
		}
		for _, part := range out.Parts {
			if t := aws.ToTime(part.LastModified); t.After(last) {
				last = t
			}
		}
	}
	return last, false, nil
}

// isNoSuchUpload reports S3's answer for an upload that is no longer there.
func isNoSuchUpload(err error) bool {
	var code interface{ ErrorCode() string }
	return errors.As(err, &code) && code.ErrorCode() == "NoSuchUpload"
}
