package people

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// isPhoneHeader reports whether a header is a phone status file's: a phone
// column and no email column.
func isPhoneHeader(header []string) bool {
	phone := false
	for _, h := range header {
		switch headerName(h) {
		case ColEmail:
			return false
		case ColPhone:
			phone = true
		}
	}
	return phone
}

// phoneColumns maps a phone status header: the index of each PhoneColumns
// name, -1 when absent. Errors name columns by position only.
func phoneColumns(header []string) ([]int, error) {
	names := PhoneColumns()
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = -1
	}
	for i, h := range header {
		j := slices.Index(names, headerName(h))
		if j < 0 {
			return nil, fmt.Errorf("people: import: header: column %d is not a phone status column (want names from %s)",
				i+1, strings.Join(names, ","))
		}
		if idx[j] >= 0 {
			return nil, fmt.Errorf("people: import: header: column %d repeats an earlier column", i+1)
		}
		idx[j] = i
	}
	return idx, nil
}

// importPhones is Import for a phone status file: rows are checked by
// ParsePhoneStatus and written with s's UpsertPhones in batches.
func importPhones(ctx context.Context, s Store, cr *csv.Reader, header []string, opt ImportOptions) (ImportResult, error) {
	var res ImportResult
	ps, ok := s.(PhoneStore)
	if !ok {
		return res, errors.New("people: import: this store keeps no phone status data")
	}
	idx, err := phoneColumns(header)
	if err != nil {
		return res, err
	}
	rd := importReader{cr: cr, header: header}
	batch := make([]PhoneStatus, 0, min(opt.BatchSize, 10_000))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := ps.UpsertPhones(ctx, batch); err != nil {
			return fmt.Errorf("people: import: %w", err)
		}
		res.Imported += len(batch)
		batch = batch[:0]
		return nil
	}
	col := func(row []string, j int) string {
		if idx[j] < 0 {
			return ""
		}
		return row[idx[j]]
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		row, line, bad, err := rd.readRow()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		res.Rows++
		if bad == nil {
			p, ferr := ParsePhoneStatus(PhoneStatusRow{Phone: col(row, 0), Country: col(row, 1), Status: col(row, 2), Prepaid: col(row, 3), ConnectedScore: col(row, 4)})
			if ferr == nil {
				if batch = append(batch, p); len(batch) == cap(batch) {
					if err := flush(); err != nil {
						return res, err
					}
				}
				continue
			}
			fe := ferr.(*FieldError)
			bad = &RowError{Line: line, Column: fe.Field, Reason: fe.Reason}
		}
		res.Failed++
		res.Errors = append(res.Errors, *bad)
		if opt.ContinueOnError && len(res.Errors) <= opt.MaxErrors {
			continue
		}
		if err := flush(); err != nil {
			return res, err
		}
		if opt.ContinueOnError {
			return res, fmt.Errorf("%w (%d); the last: %w", ErrTooManyErrors, res.Failed, bad)
		}
		return res, fmt.Errorf("people: import: %w", bad)
	}
	return res, flush()
}
