package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"gocloud.dev/blob"

	"github.com/emaildata/emaildata/internal/blobstore"
	"github.com/emaildata/emaildata/internal/listfile"
)

// Delivery narrows a result file at purchase time.
type Delivery struct {
	// Fields keeps only these service columns (all when empty); the
	// input's own columns are always kept. CheckDelivery refuses unknown
	// names before anything is written.
	Fields []string
	// IndividualOnly blanks email_append matches that are not Individual.
	IndividualOnly bool
}

// MatchTypeColumn is the email_append column IndividualOnly acts on.
const MatchTypeColumn = "email_match_type"

// CheckDelivery refuses a delivery that names columns the list's service
// does not append, or asks for Individual matches of a service without
// match types; the message names what is valid.
func CheckDelivery(columns []string, d Delivery) error {
	for _, f := range d.Fields {
		if !slices.Contains(columns, f) {
			return fmt.Errorf("unknown field %q; this list's service delivers: %s", truncField(f), strings.Join(columns, ", "))
		}
	}
	if d.IndividualOnly && !slices.Contains(columns, MatchTypeColumn) {
		return fmt.Errorf("match type I applies to email_append lists only; this list's service delivers: %s", strings.Join(columns, ", "))
	}
	return nil
}

func truncField(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Empty reports whether d changes nothing.
func (d Delivery) Empty() bool { return len(d.Fields) == 0 && !d.IndividualOnly }

// Restrict writes the delivered file: the merged result with only the
// chosen service columns and, for IndividualOnly, household matches
// blanked. It returns the new file's outcome (under result/delivered-).
func Restrict(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, res *Outcome, d Delivery) (*Outcome, error) {
	keep, matchCol, emailCol := deliveredColumns(plan, d)
	plain, closeResult, err := openResult(ctx, store, plan, res)
	if err != nil {
		return nil, err
	}
	defer closeResult()

	var body bytes.Buffer
	w := listfile.NewWriter(&body, plan.Delimiter, plan.CRLF)
	rd := listfile.NewReader(plain, listfile.Dialect{Delimiter: plan.Delimiter, EmailColumn: 1}, listfile.Limits{})
	out := make([]string, 0, len(keep))
	var rows int64
	for first := true; ; first = false {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read result row: %w", err)
		}
		fields := rec.Fields()
		if !first && matchCol >= 0 && matchCol < len(fields) && fields[matchCol] != "" && fields[matchCol] != "Individual" {
			fields[matchCol] = ""
			if emailCol >= 0 && emailCol < len(fields) {
				fields[emailCol] = ""
			}
		}
		out = out[:0]
		for _, i := range keep {
			if i < len(fields) {
				out = append(out, fields[i])
			} else {
				out = append(out, "")
			}
		}
		if err := w.WriteFields(out); err != nil {
			return nil, err
		}
		if !first {
			rows++
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	delivered := &Outcome{Key: keys.Prefix() + "result/delivered-" + res.FileName, FileName: res.FileName, Rows: rows, Reporting: res.Reporting}
	if err := writeDelivered(ctx, store, plan, delivered, &body); err != nil {
		return nil, err
	}
	return delivered, nil
}

// deliveredColumns lists the result columns kept (the input's, then the
// asked-for service columns) and, for IndividualOnly, where the match type
// and appended email are (-1: absent).
func deliveredColumns(plan *Plan, d Delivery) (keep []int, matchCol, emailCol int) {
	inputCols := len(plan.OutputHeader) - len(plan.Columns)
	keep = make([]int, 0, len(plan.OutputHeader))
	for i := 0; i < inputCols; i++ {
		keep = append(keep, i)
	}
	for j, c := range plan.Columns {
		if len(d.Fields) == 0 || slices.Contains(d.Fields, c) {
			keep = append(keep, inputCols+j)
		}
	}
	matchCol, emailCol = -1, -1
	if d.IndividualOnly {
		for j, c := range plan.Columns {
			switch c {
			case MatchTypeColumn:
				matchCol = inputCols + j
			case "email":
				emailCol = inputCols + j
			}
		}
	}
	return keep, matchCol, emailCol
}

// openResult reads the full result, unzipped; the caller closes it.
func openResult(ctx context.Context, store *blobstore.Store, plan *Plan, res *Outcome) (io.Reader, func() error, error) {
	src, err := store.ReadAll(ctx, res.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("read result: %w", err)
	}
	if !plan.Zip {
		return bytes.NewReader(src), func() error { return nil }, nil
	}
	_, rc, err := listfile.OpenZip(bytes.NewReader(src), int64(len(src)), listfile.Limits{})
	if err != nil {
		return nil, nil, fmt.Errorf("open zipped result: %w", err)
	}
	return rc, rc.Close, nil
}

// writeDelivered stores the narrowed body at delivered.Key (zipped like the
// result) and records its size and digest.
func writeDelivered(ctx context.Context, store *blobstore.Store, plan *Plan, delivered *Outcome, body *bytes.Buffer) error {
	wr, err := store.NewWriter(ctx, delivered.Key, &blob.WriterOptions{ContentType: ContentType(delivered.FileName)})
	if err != nil {
		return err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(wr, h)}
	if plan.Zip {
		err = listfile.WriteZip(cw, zipEntryName(plan.ZipEntry, delivered.FileName), body)
	} else {
		_, err = io.Copy(cw, body)
	}
	if cerr := wr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write delivered result: %w", err)
	}
	delivered.Bytes = cw.n
	delivered.SHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}
