package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// maxSummaryBytes bounds a shard summary read back from the store.
const maxSummaryBytes = 1 << 20

var blobWriterOptions = blobstore.WriterOptions("application/octet-stream")

// Outcome is the merged result of all shards.
type Outcome struct {
	Key       string
	FileName  string
	Bytes     int64
	Rows      int64
	SHA256    string
	Reporting listservice.Reporting
	// Pace is what paced the slowest shard (nil: no shard said).
	Pace *listservice.Pace
}

// Summaries reads every shard's summary. A missing summary is an error.
func Summaries(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan) ([]Summary, error) {
	out := make([]Summary, len(plan.Shards))
	for i := range plan.Shards {
		if err := store.ReadJSON(ctx, keys.Summary(i), maxSummaryBytes, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ShardFailure returns the summary of the first shard that met bad input
// or, if none did, of the first failed shard, if any shard wrote one. Bad
// input comes first: when it fails a Job, the shards still running are
// stopped and may write their cancellation as their error, from a lower
// index than the one that names the row.
func ShardFailure(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan) (*Summary, error) {
	var failed *Summary
	err := eachSummary(ctx, store, keys, plan, func(s Summary) bool {
		if s.Error != "" && (failed == nil || s.BadInput) {
			failed = &s
		}
		return !s.BadInput
	})
	return failed, err
}

// eachSummary calls fn with the summary of each shard that wrote one, in
// shard order, until fn returns false.
func eachSummary(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, fn func(Summary) bool) error {
	for i := range plan.Shards {
		var s Summary
		err := store.ReadJSON(ctx, keys.Summary(i), maxSummaryBytes, &s)
		if blobstore.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if !fn(s) {
			return nil
		}
	}
	return nil
}

// Progress adds up the rows done: finished shards from their summaries,
// running ones from their progress documents.
func Progress(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan) (int64, error) {
	var done int64
	for i := range plan.Shards {
		var s Summary
		err := store.ReadJSON(ctx, keys.Summary(i), maxSummaryBytes, &s)
		if err == nil && s.Error == "" {
			done += s.Rows
			continue
		}
		if err != nil && !blobstore.IsNotFound(err) {
			return 0, err
		}
		var p ProgressDoc
		err = store.ReadJSON(ctx, keys.Progress(i), maxSummaryBytes, &p)
		if err == nil {
			done += p.Rows
		} else if !blobstore.IsNotFound(err) {
			return 0, err
		}
	}
	return done, nil
}

// Merge writes the result file: the header row, then every shard's part in
// order, zipped when the input was a zip. It records size and SHA-256.
func Merge(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, fileName string) (*Outcome, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := keys.Result(fileName)
	opts := blobstore.WriterOptions(ContentType(fileName))
	w, err := store.NewWriter(wctx, key, &opts)
	if err != nil {
		return nil, fmt.Errorf("create result: %w", err)
	}
	out, err := WriteResult(ctx, store, keys, plan, fileName, w, nil)
	if err != nil {
		cancel()
		_ = w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write result: %w", err)
	}
	out.Key = key
	return out, nil
}

// WriteResult writes the result file to w: the header row, then each
// shard's part in order, zipped when the input was a zip. With ready, it
// writes each part as soon as ready(i) returns (an error stops it) and
// flushes w when w can, so that a run killed midway leaves the rows before.
// A plan sharded by domain needs every part from the first row on (the
// rows go back to input order, each from its shard's part): ready is then
// called for every shard, in order, before any row is written, and w is
// flushed only at the end. A ready that deletes earlier parts must not
// do so for such a plan (Plan.ByDomain).
func WriteResult(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, fileName string, w io.Writer, ready func(shard int) error) (*Outcome, error) {
	return writeResult(ctx, store, keys, plan, fileName, w, ready, true)
}

// WriteResultUndigested is WriteResult without the SHA-256 (Outcome.SHA256
// is empty), for `worker run`, which records no digest: hashing cost 0.3
// CPU-s at 8M rows, and without it parts reach w untouched, so a plain
// file w gets them by an in-kernel copy (Store.CopyTo).
func WriteResultUndigested(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, fileName string, w io.Writer, ready func(shard int) error) (*Outcome, error) {
	return writeResult(ctx, store, keys, plan, fileName, w, ready, false)
}

func writeResult(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, fileName string, w io.Writer, ready func(shard int) error, digest bool) (*Outcome, error) {
	out := &Outcome{FileName: fileName, Reporting: listservice.Reporting{}}
	h := sha256.New()
	cw := &countWriter{w: w}
	if digest {
		cw.w = io.MultiWriter(w, h)
	}
	part := func(i int) error {
		if ready != nil {
			if err := ready(i); err != nil {
				return err
			}
		}
		var s Summary
		if err := store.ReadJSON(ctx, keys.Summary(i), maxSummaryBytes, &s); err != nil {
			return err
		}
		if s.Error != "" {
			return fmt.Errorf("shard %d failed: %s", s.Index, s.Error)
		}
		out.Rows += s.Rows
		out.Reporting.Merge(s.Reporting)
		if s.Pace != nil && (out.Pace == nil || s.Pace.SpanSeconds > out.Pace.SpanSeconds) {
			out.Pace = s.Pace
		}
		return nil
	}
	var err error
	if plan.Zip {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeRows(ctx, store, keys, plan, pw, part, nil)) }()
		err = listfile.WriteZip(cw, zipEntryName(plan.ZipEntry, fileName), pr)
		pr.CloseWithError(err)
	} else {
		err = writeRows(ctx, store, keys, plan, cw, part, w)
	}
	if err != nil {
		return nil, fmt.Errorf("write result: %w", err)
	}
	out.Bytes = cw.n
	if digest {
		out.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// zipEntryName names the file inside a zipped result after the inner input
// file, with the result suffix, so unzipping never clobbers the input.
func zipEntryName(inner, fileName string) string {
	ext := listfile.KindCSV.String()
	if k, err := listfile.KindOf(inner); err == nil && k != listfile.KindZip {
		ext = k.String()
	}
	return strings.TrimSuffix(fileName, path.Ext(fileName)) + ext
}

// writeRows writes the header and the parts; part(i) is called before
// part i is copied, and flush, when it can, after.
func writeRows(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, w io.Writer, part func(int) error, flush io.Writer) error {
	hw := listfile.NewWriter(w, plan.Delimiter, plan.CRLF)
	write := hw.WriteFields // the service's names need no escaping
	if plan.EscapeFormulas {
		write = hw.WriteFieldsEscaped
	}
	if err := write(plan.OutputHeader); err != nil {
		return err
	}
	if err := hw.Flush(); err != nil {
		return err
	}
	if plan.ByDomain() {
		return writeRouted(ctx, store, keys, plan, w, part)
	}
	for i := range plan.Shards {
		if err := part(i); err != nil {
			return err
		}
		if _, err := store.CopyTo(ctx, w, keys.Part(i)); err != nil {
			return fmt.Errorf("copy part %d: %w", i, err)
		}
		if f, ok := flush.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadFrom passes a copy on to w's own ReadFrom, if it has one, so that
// counting does not stop a file-to-file copy from happening in the kernel.
func (c *countWriter) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.w.(io.ReaderFrom)
	if !ok {
		rf = onlyWriter{c.w}
	}
	n, err := rf.ReadFrom(r)
	c.n += n
	return n, err
}

// onlyWriter copies through a buffer: io.Copy to w without w's ReadFrom.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{o.w}, r)
}
