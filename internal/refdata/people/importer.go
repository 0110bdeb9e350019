package people

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ImportOptions configures Import. The zero value is usable.
type ImportOptions struct {
	// Comma is the field delimiter (default ',').
	Comma rune
	// BatchSize is the number of records per Store.Upsert (default
	// DefaultImportBatch).
	BatchSize int
	// ContinueOnError skips malformed rows, collecting their errors, instead
	// of stopping at the first one.
	ContinueOnError bool
	// MaxErrors bounds the errors collected with ContinueOnError (default
	// 100): one more malformed row stops the import with ErrTooManyErrors.
	MaxErrors int
}

// ImportResult counts what Import did.
type ImportResult struct {
	Rows     int        // data rows read, malformed ones included
	Imported int        // rows written to the store
	Failed   int        // malformed rows
	Errors   []RowError // errors of the malformed rows, at most MaxErrors (+1 when stopped)
}

// RowError reports one malformed input row. It holds the line number, the
// column and a reason, never the row's values.
type RowError struct {
	Line   int    // line where the row starts; the header is line 1
	Column string // column at fault, "" when the row as a whole is malformed
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Column, e.Reason)
}

// ErrTooManyErrors stops an import with ContinueOnError after more than
// MaxErrors malformed rows.
var ErrTooManyErrors = errors.New("people: import: too many malformed rows")

// Import reads a delimited file with a header row, whose column names are
// those of Columns (any subset that includes "email", in any order, matched
// case-insensitively), and upserts its rows into s in batches, streaming.
// The interests column holds names separated by ';' or '|', alt_emails the
// person's other addresses separated by ';'.
//
// A file whose header has no email column but a phone column is a phone
// status file instead (columns of PhoneColumns, rows checked by
// ParsePhoneStatus), upserted into s's PhoneStore the same way.
//
// A malformed row (wrong number of fields, broken quoting, invalid email or
// field value) either stops the import, after the rows before it have been
// written, with an error that wraps its *RowError, or, with
// ContinueOnError, is skipped and reported in the result. A problem with
// the header or the store stops the import with an error.
func Import(ctx context.Context, s Store, r io.Reader, opt ImportOptions) (ImportResult, error) {
	var res ImportResult
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultImportBatch
	}
	if opt.MaxErrors <= 0 {
		opt.MaxErrors = 100
	}
	cr := csv.NewReader(r)
	if opt.Comma != 0 {
		cr.Comma = opt.Comma
	}
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return res, errors.New("people: import: empty input, no header")
	}
	if err != nil {
		return res, fmt.Errorf("people: import: header: %w", err)
	}
	if isPhoneHeader(header) {
		return importPhones(ctx, s, cr, header, opt)
	}
	cols, err := importColumns(header)
	if err != nil {
		return res, err
	}

	// Reading and parsing (this goroutine's reader below) overlaps with
	// writing the previous batch (the loop at the end): one batch in flight.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	full := make(chan []Record, 1)
	free := make(chan []Record, 2)
	var readErr error
	go func() {
		defer close(full)
		rd := importReader{cr: cr, header: header, cols: cols, opt: opt, res: &res}
		readErr = rd.run(ctx, full, free)
	}()
	var writeErr error
	for batch := range full {
		if writeErr != nil {
			continue // drain
		}
		if err := s.Upsert(ctx, batch); err != nil {
			writeErr = fmt.Errorf("people: import: %w", err)
			cancel()
			continue
		}
		res.Imported += len(batch)
		select {
		case free <- batch[:0]:
		default:
		}
	}
	if writeErr != nil {
		return res, writeErr
	}
	return res, readErr
}

// DefaultImportBatch is the default ImportOptions.BatchSize. Large
// transactions make bulk loads into the embedded store much faster (each
// commit rewrites the B+tree pages it touches); at most two batches are in
// memory at once (one being read, one being written), about 25 MB each at
// this size.
const DefaultImportBatch = 50_000

type importReader struct {
	cr     *csv.Reader
	header []string
	cols   importCols
	opt    ImportOptions
	res    *ImportResult // Rows, Failed and Errors; Imported is the writer's
}

// run reads rows into batches and sends them to full; it returns the error
// that stops the import, if any.
func (rd *importReader) run(ctx context.Context, full chan<- []Record, free <-chan []Record) error {
	res, opt := rd.res, rd.opt
	batch := make([]Record, 0, opt.BatchSize)
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		select {
		case full <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case batch = <-free:
		default:
			batch = make([]Record, 0, opt.BatchSize)
		}
		return nil
	}
	// fail records a malformed row; it returns non-nil when the import stops.
	fail := func(e RowError) error {
		res.Failed++
		res.Errors = append(res.Errors, e)
		if opt.ContinueOnError && len(res.Errors) <= opt.MaxErrors {
			return nil
		}
		if err := send(); err != nil {
			return err
		}
		if opt.ContinueOnError {
			return fmt.Errorf("%w (%d); the last: %w", ErrTooManyErrors, res.Failed, &res.Errors[len(res.Errors)-1])
		}
		return fmt.Errorf("people: import: %w", &res.Errors[len(res.Errors)-1])
	}
	for {
		if len(batch) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		row, line, bad, err := rd.readRow()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		res.Rows++
		if bad != nil {
			if err := fail(*bad); err != nil {
				return err
			}
			continue
		}
		batch = append(batch, Record{})
		if ferr := rd.fill(&batch[len(batch)-1], row); ferr != nil {
			batch = batch[:len(batch)-1]
			if err := fail(RowError{Line: line, Column: ferr.Field, Reason: ferr.Reason}); err != nil {
				return err
			}
			continue
		}
		if len(batch) == opt.BatchSize {
			if err := send(); err != nil {
				return err
			}
		}
	}
	return send()
}

// readRow reads the next row and the line it starts on. A malformed row
// comes back as bad (it counts as a row); err is io.EOF at the end, or the
// error that stops the import.
func (rd *importReader) readRow() (row []string, line int, bad *RowError, err error) {
	row, err = rd.cr.Read()
	if err == io.EOF {
		return nil, 0, nil, err
	}
	if err != nil {
		var pe *csv.ParseError
		if !errors.As(err, &pe) {
			return nil, 0, nil, fmt.Errorf("people: import: %w", err)
		}
		return nil, 0, &RowError{Line: pe.StartLine, Reason: "malformed CSV: " + pe.Err.Error()}, nil
	}
	line, _ = rd.cr.FieldPos(0)
	if len(row) != len(rd.header) {
		reason := fmt.Sprintf("%d fields, the header has %d", len(row), len(rd.header))
		return nil, 0, &RowError{Line: line, Reason: reason}, nil
	}
	return row, line, nil, nil
}

// fill sets rec from row, then normalizes and validates it; it returns the
// first invalid field.
func (rd *importReader) fill(rec *Record, row []string) *FieldError {
	for i, f := range rd.cols.fields {
		if f != nil {
			*f.get(rec) = row[i]
		}
	}
	if rd.cols.interests >= 0 {
		var err error
		if rec.Interests, err = ParseInterests(row[rd.cols.interests]); err != nil {
			return err.(*FieldError)
		}
	}
	if rd.cols.altEmails >= 0 {
		rec.AltEmails = ParseAltEmails(row[rd.cols.altEmails])
	}
	rec.Normalize()
	if err := rec.Validate(); err != nil {
		return err.(*FieldError)
	}
	return nil
}

// importCols maps the columns of a people file: fields[i] is column i's
// field (nil for interests and alt_emails, whose indexes are kept, -1 when
// absent).
type importCols struct {
	fields               []*field
	interests, altEmails int
}

// importColumns maps header cells to fields. Its errors name columns by
// position only: a file without a header would otherwise put personal data
// in them.
func importColumns(header []string) (importCols, error) {
	c := importCols{fields: make([]*field, len(header)), interests: -1, altEmails: -1}
	seen := map[string]bool{}
	for i, h := range header {
		h = headerName(h)
		if seen[h] {
			return c, fmt.Errorf("people: import: header: column %d repeats an earlier column", i+1)
		}
		seen[h] = true
		switch h {
		case ColInterests:
			c.interests = i
			continue
		case ColAltEmails:
			c.altEmails = i
			continue
		}
		f := fieldByName[h]
		if f == nil {
			return c, fmt.Errorf("people: import: header: column %d is not a known column (want names from %s)",
				i+1, strings.Join(Columns(), ","))
		}
		c.fields[i] = f
	}
	if !seen[ColEmail] {
		return c, fmt.Errorf("people: import: header: no %q column (or, for a phone status file, no %q column)", ColEmail, ColPhone)
	}
	return c, nil
}

func headerName(h string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
}
