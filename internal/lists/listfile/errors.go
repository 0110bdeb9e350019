package listfile

import (
	"errors"
	"strconv"
)

// Reasons for bad input. Every error this package returns because of the
// content of a user's file is an *InputError whose Reason is one of these,
// so callers can match a specific case with errors.Is and otherwise tell
// bad input (show it to the user) from I/O failure (retry or alert).
var (
	ErrInvalidDialect    = errors.New("invalid dialect")
	ErrExtension         = errors.New("unsupported file extension")
	ErrBinary            = errors.New("binary data")
	ErrNotText           = errors.New("not delimited text")
	ErrBareCR            = errors.New("bare carriage return line endings")
	ErrUnterminatedQuote = errors.New("unterminated quoted field")
	ErrRecordTooLarge    = errors.New("record too large")
	ErrNoData            = errors.New("no data rows")
	ErrEmailColumn       = errors.New("email column out of range")
	ErrNotZip            = errors.New("not a zip archive")
	ErrZipCorrupt        = errors.New("corrupt zip archive")
	ErrZipEmpty          = errors.New("no file in zip archive")
	ErrZipMultipleFiles  = errors.New("more than one file in zip archive")
	ErrZipUnsafePath     = errors.New("unsafe path in zip archive")
	ErrZipInnerExtension = errors.New("unsupported file type in zip archive")
	ErrZipMethod         = errors.New("unsupported zip compression method")
	ErrZipEncrypted      = errors.New("encrypted zip archive")
	ErrZipTooLarge       = errors.New("zip content too large")
	ErrZipRatio          = errors.New("zip expansion ratio too high")
)

// InputError reports a problem with the content of a user's file. Msg is
// written for the end user; Reason lets code classify the problem.
type InputError struct {
	Reason error  // one of the Err* sentinels of this package
	Line   int64  // 1-based physical line of the problem, 0 when not applicable
	Offset int64  // byte offset of the problem, -1 when not applicable
	Msg    string // precise, user-facing description
}

// Error returns the user-facing message.
func (e *InputError) Error() string { return e.Msg }

// Unwrap exposes Reason so errors.Is(err, ErrNoData) works.
func (e *InputError) Unwrap() error { return e.Reason }

// IsBadInput reports whether err was caused by the content of the input
// (as opposed to an I/O failure), so the caller can report it to the user
// instead of retrying.
func IsBadInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

func inputErr(reason error, line, offset int64, msg string) *InputError {
	return &InputError{Reason: reason, Line: line, Offset: offset, Msg: msg}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
