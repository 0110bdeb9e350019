package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"gocloud.dev/blob"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
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
// It streams: memory does not grow with the result.
func Restrict(ctx context.Context, store *blobstore.Store, keys blobstore.ListKeys, plan *Plan, res *Outcome, d Delivery) (*Outcome, error) {
	plain, closeResult, err := openResult(ctx, store, plan, res)
	if err != nil {
		return nil, err
	}
	defer closeResult()
	delivered := &Outcome{Key: keys.Prefix() + "result/delivered-" + res.FileName, FileName: res.FileName, Reporting: res.Reporting}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wr, err := store.NewWriter(wctx, delivered.Key, &blob.WriterOptions{ContentType: ContentType(delivered.FileName), BufferSize: 1 << 20})
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(wr, h)}
	narrow := func(w io.Writer) error {
		var err error
		delivered.Rows, err = restrictRows(plain, w, plan, d)
		return err
	}
	if plan.Zip {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(narrow(pw)) }()
		err = listfile.WriteZip(cw, zipEntryName(plan.ZipEntry, delivered.FileName), pr)
		pr.CloseWithError(err)
	} else {
		err = narrow(cw)
	}
	if err != nil {
		cancel()
		_ = wr.Close()
		return nil, err
	}
	if err := wr.Close(); err != nil {
		return nil, fmt.Errorf("write delivered result: %w", err)
	}
	delivered.Bytes = cw.n
	delivered.SHA256 = hex.EncodeToString(h.Sum(nil))
	return delivered, nil
}

// restrictRows copies the result rows from plain to out with only the
// delivered columns, and returns the data rows written. Each kept cell is
// copied byte for byte, so the input's cells stay as the result had them
// and the escaped cells stay escaped (see deliveredCell).
func restrictRows(plain io.Reader, out io.Writer, plan *Plan, d Delivery) (int64, error) {
	keep, matchCol, emailCol := deliveredColumns(plan, d)
	inputCols := len(plan.OutputHeader) - len(plan.Columns)
	w := listfile.NewWriter(out, plan.Delimiter, plan.CRLF)
	rd := listfile.NewReader(plain, listfile.Dialect{Delimiter: plan.Delimiter, EmailColumn: 1}, listfile.Limits{})
	var row []byte
	var rows int64
	for first := true; ; first = false {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rows, fmt.Errorf("read result row: %w", err)
		}
		household := false
		if !first && matchCol >= 0 {
			mt := rec.Field(matchCol)
			household = mt != "" && mt != "Individual"
		}
		row = row[:0]
		for j, i := range keep {
			if j > 0 {
				row = append(row, plan.Delimiter)
			}
			if household && (i == matchCol || i == emailCol) {
				continue // blanked
			}
			row = deliveredCell(row, rec, i, i >= inputCols || plan.EscapeFormulas)
		}
		if err := w.WriteRaw(row, 1, 0, nil); err != nil {
			return rows, fmt.Errorf("write delivered row: %w", err)
		}
		if !first {
			rows++
		}
	}
	return rows, w.Flush()
}

// deliveredCell appends field i of rec as the result has it. A cell of an
// escaped column (escaped: the service's columns, and the input's with
// EscapeFormulas) that still starts a formula comes from a result merged
// before escaping existed, and is escaped now; an escaped cell (starting
// with a quote) is copied as it is, never escaped twice.
func deliveredCell(row []byte, rec *listfile.Record, i int, escaped bool) []byte {
	if escaped {
		if v := rec.Field(i); listfile.IsFormula(v) {
			return listfile.AppendFormulaEscaped(row, v)
		}
	}
	return append(row, rec.RawField(i)...)
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

// openResult opens the result for reading, unzipped; the caller closes it.
func openResult(ctx context.Context, store *blobstore.Store, plan *Plan, res *Outcome) (io.Reader, func() error, error) {
	if !plan.Zip {
		r, err := store.NewReader(ctx, res.Key, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("read result: %w", err)
		}
		return r, r.Close, nil
	}
	ra, size, err := store.NewReaderAt(ctx, res.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("read result: %w", err)
	}
	// The service zipped the result itself: its ratio is not a user's.
	_, rc, err := listfile.OpenZip(ra, size, listfile.Limits{MaxExpansionRatio: -1})
	if err != nil {
		return nil, nil, fmt.Errorf("open zipped result: %w", err)
	}
	return rc, rc.Close, nil
}
