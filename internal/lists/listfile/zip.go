package listfile

import (
	"archive/zip"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// maxListedNames is how many entry names a "more than one file" message
// lists, and maxNameLen how long each may be, to keep messages readable.
const (
	maxListedNames = 5
	maxNameLen     = 60
)

// OpenZip opens a zip archive that must hold exactly one .csv or .txt file
// and returns that file's base name and a reader of its uncompressed
// content. Directory entries and macOS/Windows junk (__MACOSX/, ._*,
// .DS_Store, Thumbs.db, desktop.ini) are ignored. The reader counts the
// bytes it actually produces and fails with ErrZipTooLarge ("expands beyond
// N bytes") past lim.MaxExpandedBytes, or with ErrZipRatio past
// lim.MaxExpansionRatio times size (when that is the lower bound),
// whatever the headers claim (zip bombs); when the declared size already
// exceeds the limit, OpenZip itself returns that error, before any
// inflating (so the REST API refuses such an upload at once).
//
// Errors about the archive are *InputError with one of the ErrZip*
// reasons, ErrNotZip or ErrZipCorrupt; other errors come from r.
func OpenZip(r io.ReaderAt, size int64, lim Limits) (name string, rc io.ReadCloser, err error) {
	if size < 0 {
		return "", nil, inputErr(ErrNotZip, 0, -1, "the file is not a valid zip archive")
	}
	// Offsets in the archive are attacker-controlled: reads outside it are
	// corruption, not I/O failures of r.
	r = boundedReaderAt{r, size}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		if isCorrupt(err) {
			return "", nil, inputErr(ErrNotZip, 0, -1, "the file is not a valid zip archive")
		}
		return "", nil, fmt.Errorf("listfile: reading zip: %w", err)
	}
	var files []*zip.File
	for _, f := range zr.File {
		if !safeZipName(f.Name) {
			return "", nil, inputErr(ErrZipUnsafePath, 0, -1,
				fmt.Sprintf("the zip archive contains an unsafe file name %q (absolute path or \"..\")", truncate(f.Name)))
		}
		if isZipJunk(f) {
			continue
		}
		files = append(files, f)
	}
	switch len(files) {
	case 0:
		return "", nil, inputErr(ErrZipEmpty, 0, -1, "the zip archive contains no file: it must contain exactly one .csv or .txt file")
	case 1:
	default:
		names := make([]string, 0, maxListedNames)
		for i, f := range files {
			if i == maxListedNames {
				break
			}
			names = append(names, fmt.Sprintf("%q", truncate(f.Name)))
		}
		list := strings.Join(names, ", ")
		if len(files) > maxListedNames {
			list += fmt.Sprintf(" and %d more", len(files)-maxListedNames)
		}
		return "", nil, inputErr(ErrZipMultipleFiles, 0, -1,
			fmt.Sprintf("the zip archive contains %d files (%s): it must contain exactly one .csv or .txt file", len(files), list))
	}
	f := files[0]
	name = baseName(f.Name)
	if k, err := KindOf(name); err != nil || k == KindZip {
		return "", nil, inputErr(ErrZipInnerExtension, 0, -1,
			fmt.Sprintf("the file in the zip archive, %q, must be a .csv or .txt file", truncate(name)))
	}
	if f.Flags&0x1 != 0 {
		return "", nil, inputErr(ErrZipEncrypted, 0, -1,
			fmt.Sprintf("the file %q in the zip archive is encrypted: upload an archive without a password", truncate(name)))
	}
	if f.Method != zip.Store && f.Method != zip.Deflate {
		return "", nil, inputErr(ErrZipMethod, 0, -1,
			fmt.Sprintf("the file %q in the zip archive uses compression method %d: only stored and deflated files are supported", truncate(name), f.Method))
	}
	limit, byRatio := lim.expansionLimit(size)
	tooLarge := func() error { return tooLargeZip(limit) }
	if byRatio {
		tooLarge = func() error { return tooHighRatio(limit, size, lim.ratioOf()) }
	}
	if f.UncompressedSize64 > uint64(limit) {
		return "", nil, tooLarge()
	}
	inner, err := f.Open()
	if err != nil {
		if isCorrupt(err) {
			return "", nil, inputErr(ErrZipCorrupt, 0, -1, "the zip archive is corrupt: "+err.Error())
		}
		return "", nil, fmt.Errorf("listfile: opening zip entry: %w", err)
	}
	return name, &limitedZipReader{rc: inner, limit: limit, declared: int64(f.UncompressedSize64), tooLarge: tooLarge}, nil
}

func tooLargeZip(limit int64) error {
	return inputErr(ErrZipTooLarge, 0, limit,
		fmt.Sprintf("the file in the zip archive expands beyond %d bytes", limit))
}

// tooHighRatio is the error of a zip whose file expands past ratio times
// the archive's size (limit bytes).
func tooHighRatio(limit, archiveSize, ratio int64) error {
	return inputErr(ErrZipRatio, 0, limit,
		fmt.Sprintf("the file in the zip archive expands beyond %d bytes, %d times the archive's %d bytes: "+
			"a list compresses far less than that (a zip bomb?); upload it unzipped or compressed less", limit, ratio, archiveSize))
}

// limitedZipReader enforces the expansion limit on bytes actually read and
// turns corrupt-data errors into bad-input errors.
type limitedZipReader struct {
	rc       io.ReadCloser
	limit    int64
	declared int64 // the size the archive claims: a hint, never trusted
	n        int64
	err      error
	// tooLarge is the error past limit (the size or the ratio's); nil is
	// the size's.
	tooLarge func() error
}

func (z *limitedZipReader) Read(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	if rem := z.limit - z.n + 1; int64(len(p)) > rem {
		p = p[:rem] // read one byte past the limit to detect it
	}
	n, err := z.rc.Read(p)
	z.n += int64(n)
	if z.n > z.limit {
		n -= int(z.n - z.limit)
		z.err = tooLargeZip(z.limit)
		if z.tooLarge != nil {
			z.err = z.tooLarge()
		}
		return n, z.err
	}
	if err != nil && err != io.EOF {
		if isCorrupt(err) {
			err = inputErr(ErrZipCorrupt, 0, -1, "the zip archive is corrupt: "+err.Error())
		}
		z.err = err
	}
	return n, err
}

func (z *limitedZipReader) Close() error { return z.rc.Close() }

// DeclaredSize returns the uncompressed size that the archive's headers
// claim for the reader OpenZip returned (-1 for another reader). It is
// only a hint, for planning before the content is read: the reader itself
// enforces the limit on the bytes it produces.
func DeclaredSize(rc io.Reader) int64 {
	if z, ok := rc.(*limitedZipReader); ok {
		return z.declared
	}
	return -1
}

// isCorrupt reports errors caused by the archive's content.
func isCorrupt(err error) bool {
	var ce flate.CorruptInputError
	return errors.As(err, &ce) || errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrAlgorithm) ||
		errors.Is(err, zip.ErrChecksum) || errors.Is(err, errOutsideArchive) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

var errOutsideArchive = errors.New("offset outside the archive")

// boundedReaderAt confines reads to [0, size) and reports reads outside it
// with errOutsideArchive and short reads at the end with io.EOF itself, so
// that the errors of the underlying ReaderAt are always real I/O errors.
type boundedReaderAt struct {
	r    io.ReaderAt
	size int64
}

func (b boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > b.size {
		return 0, errOutsideArchive
	}
	short := false
	if rem := b.size - off; int64(len(p)) > rem {
		p = p[:rem]
		short = true
	}
	n, err := b.r.ReadAt(p, off)
	if err == io.EOF {
		if n == len(p) {
			err = nil
		} else {
			return n, fmt.Errorf("listfile: zip source ended at offset %d, before its size %d", off+int64(n), b.size)
		}
	}
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// safeZipName rejects absolute names and any ".." component, with either
// separator (zips made on Windows may use backslashes).
func safeZipName(name string) bool {
	if name == "" {
		return false
	}
	if name[0] == '/' || name[0] == '\\' {
		return false
	}
	if len(name) >= 2 && name[1] == ':' { // C:\ or C:/ or C:name
		return false
	}
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return false
		}
	}
	return true
}

// isZipJunk reports entries that archivers add on their own and users do
// not see: directories and macOS/Windows metadata.
func isZipJunk(f *zip.File) bool {
	name := f.Name
	if strings.HasSuffix(name, "/") || strings.HasSuffix(name, `\`) || f.FileInfo().IsDir() {
		return true
	}
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == "__MACOSX" {
			return true
		}
	}
	base := baseName(name)
	return strings.HasPrefix(base, "._") || base == ".DS_Store" || base == "Thumbs.db" || base == "desktop.ini"
}

func truncate(s string) string {
	if len(s) <= maxNameLen {
		return s
	}
	return s[:maxNameLen] + "…"
}

// WriteZip writes a zip archive with a single deflated entry name whose
// content is read from r, for returning results in the form users uploaded.
// The entry is compressed at flate.BestSpeed: result files are large and
// compression speed matters more than the last few percent of size.
func WriteZip(w io.Writer, name string, r io.Reader) error {
	if name == "" || !safeZipName(name) || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("listfile: invalid zip entry name %q", name)
	}
	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestSpeed)
	})
	fw, err := zw.CreateHeader(&zip.FileHeader{
		Name:     name,
		Method:   zip.Deflate,
		Modified: time.Now(),
	})
	if err != nil {
		return fmt.Errorf("listfile: writing zip: %w", err)
	}
	if _, err := io.Copy(fw, r); err != nil {
		return fmt.Errorf("listfile: writing zip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("listfile: writing zip: %w", err)
	}
	return nil
}
