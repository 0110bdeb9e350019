package listfile

import (
	"bytes"
	"fmt"
	"io"
	"sort"
)

// DefaultShardBytes is the shard size Scan uses when shardBytes <= 0.
const DefaultShardBytes = 64 << 20

// MaxShards is the most shards Scan ever plans; it bounds the memory Scan
// spends on candidate boundaries whatever maxShards the caller passes.
const MaxShards = 1 << 16

// sniffBytes is how much of the start of a file Scan inspects to recognise
// files that are not text at all (spreadsheets, PDFs, UTF-16...).
const sniffBytes = 8 << 10

// Plan is the result of Scan: what the controller needs to validate a list
// and fan it out to workers.
type Plan struct {
	Size      int64    // bytes read
	DataStart int64    // offset of the first data record (after a UTF-8 BOM and the header record, if any)
	Header    []string // header fields when Dialect.Header, else nil
	Records   int64    // data records (excluding header); blank lines are not records
	MaxFields int      // widest record seen (header included)
	CRLF      bool     // the first record ended with CRLF (used to keep line endings on output)
	Shards    []Shard
}

// Shard is a contiguous byte range of the file holding whole records, so a
// worker can process it without seeing the rest of the file.
type Shard struct {
	Index     int
	Start     int64 // byte offset where this shard's first record starts
	End       int64 // offset just past its last record (== next shard's Start; last == Size)
	FirstRow  int64 // 0-based data row number of its first record
	Rows      int64
	FirstLine int64 // 1-based physical line of its first record, for messages
}

type candidate struct {
	off, row, line int64
}

// Scan reads a whole plain delimited stream once, validates it and returns
// a Plan that splits the data records into contiguous shards of about
// shardBytes each (DefaultShardBytes when <= 0), never more than maxShards
// (at least 1, at most MaxShards): when the file is large the shards grow
// instead. Every shard is non-empty and starts on a record boundary.
//
// Errors about the content are *InputError (see the Err* sentinels); other
// errors come from reading r.
func Scan(r io.Reader, d Dialect, lim Limits, shardBytes int64, maxShards int) (*Plan, error) {
	return ScanEach(r, d, lim, shardBytes, maxShards, nil)
}

// ScanEach is Scan that also hands each data record, with its 0-based row
// number, to each (when not nil), so that a caller can work on the rows in
// the same pass. The record is valid only during the call; an error from
// each stops the scan and is returned as is.
func ScanEach(r io.Reader, d Dialect, lim Limits, shardBytes int64, maxShards int, each func(row int64, rec *Record) error) (*Plan, error) {
	d, err := d.Validated() // once: the reader below trusts it
	if err != nil {
		return nil, err
	}
	if shardBytes <= 0 {
		shardBytes = DefaultShardBytes
	}
	maxShards = min(max(maxShards, 1), MaxShards)

	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(r, head)
	head = head[:n]
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		if IsBadInput(err) {
			return nil, err
		}
		return nil, fmt.Errorf("listfile: reading input: %w", err)
	}
	if err := sniff(head); err != nil {
		return nil, err
	}
	rd := NewReader(io.MultiReader(bytes.NewReader(head), r), d, lim)

	p := &Plan{}
	// Candidate shard boundaries: the first record at or after every
	// `gran` bytes. When there are too many, the granularity grows and
	// they are thinned out (see thin), so memory stays bounded.
	gran := max(shardBytes/8, 1)
	maxCands := min(max(8*maxShards, 1024), 8*MaxShards)
	var cands []candidate
	next := int64(0)
	first := true
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		p.MaxFields = max(p.MaxFields, rec.NumFields())
		if first {
			first = false
			p.CRLF = rd.term == termCRLF
			if err := checkBareCR(rec); err != nil {
				return nil, err
			}
			rd.countOnly = each == nil // each may read fields
			if d.Header {
				p.Header = rec.Fields()
				continue
			}
		}
		if p.Records == 0 {
			p.DataStart = rec.Offset
		}
		if rec.Offset >= next {
			cands = append(cands, candidate{rec.Offset, p.Records, rec.Line})
			if len(cands) > maxCands {
				cands, gran = thin(cands, gran, maxCands)
			}
			next = cands[len(cands)-1].off + gran
		}
		if each != nil {
			if err := each(p.Records, rec); err != nil {
				return nil, err
			}
		}
		p.Records++
	}
	p.Size = rd.base + int64(rd.w)

	if p.Records == 0 {
		return nil, inputErr(ErrNoData, 0, -1, "the file has no data rows")
	}
	if int(d.EmailColumn) > p.MaxFields {
		return nil, inputErr(ErrEmailColumn, 0, -1,
			fmt.Sprintf("email column %d is beyond the file's %s", d.EmailColumn,
				plural(int64(p.MaxFields), "column", "columns")))
	}
	p.Shards = planShards(cands, p.DataStart, p.Size, p.Records, shardBytes, maxShards)
	return p, nil
}

// thin coarsens the candidate granularity so that about half of maxCands
// candidates remain, keeping them evenly spaced (at least gran apart).
func thin(cands []candidate, gran int64, maxCands int) ([]candidate, int64) {
	span := cands[len(cands)-1].off - cands[0].off
	gran = max(2*gran, span/int64(maxCands/2)+1)
	k := 1
	for _, c := range cands[1:] {
		if c.off >= cands[k-1].off+gran {
			cands[k] = c
			k++
		}
	}
	return cands[:k], gran
}

// planShards picks at most maxShards boundaries among the candidates,
// each as close as possible to an even split of the data bytes.
func planShards(cands []candidate, dataStart, size, records, shardBytes int64, maxShards int) []Shard {
	data := size - dataStart
	n := int64(1)
	if data > shardBytes {
		n = (data + shardBytes - 1) / shardBytes
	}
	n = min(n, int64(maxShards))
	starts := []candidate{cands[0]}
	for i := int64(1); i < n; i++ {
		ideal := dataStart + (data/n)*i + (data%n)*i/n
		j := sort.Search(len(cands), func(k int) bool { return cands[k].off >= ideal })
		if j == len(cands) || (j > 0 && ideal-cands[j-1].off < cands[j].off-ideal) {
			j--
		}
		if c := cands[j]; c.off > starts[len(starts)-1].off {
			starts = append(starts, c)
		}
	}
	shards := make([]Shard, len(starts))
	for i, c := range starts {
		end, endRow := size, records
		if i+1 < len(starts) {
			end, endRow = starts[i+1].off, starts[i+1].row
		}
		shards[i] = Shard{Index: i, Start: c.off, End: end, FirstRow: c.row, Rows: endRow - c.row, FirstLine: c.line}
	}
	return shards
}

// checkBareCR rejects a first record that contains a CR followed by more
// data outside quoted fields: that is a classic Mac (CR-only) file, which
// would otherwise read as one giant record.
func checkBareCR(rec *Record) error {
	for i := 0; i < rec.NumFields(); i++ {
		start := 0
		if i > 0 {
			start = rec.ends[i-1] + 1
		}
		f := rec.Raw[start:rec.ends[i]]
		if len(f) > 0 && f[0] == '"' {
			continue
		}
		if k := bytes.IndexByte(f, '\r'); k >= 0 && start+k+1 < len(rec.Raw) {
			return inputErr(ErrBareCR, rec.Line, rec.Offset+int64(start+k),
				fmt.Sprintf("line %d contains a bare carriage return (CR without LF): classic Mac line endings are not supported; save the file with LF or CRLF line endings", rec.Line))
		}
	}
	return nil
}

// sniff recognises common non-text uploads by their first bytes, to give a
// precise message instead of a parse error deep in the file.
func sniff(head []byte) error {
	notText := func(msg string) error {
		return inputErr(ErrNotText, 0, 0, msg)
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return notText("the file is a zip archive or an Excel .xlsx workbook, not delimited text: export it as CSV")
	case bytes.HasPrefix(head, []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1")):
		return notText("the file is an Excel .xls workbook (or another Office document), not delimited text: export it as CSV")
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return notText("the file is a PDF document, not delimited text")
	case bytes.HasPrefix(head, []byte("\x1F\x8B")):
		return notText("the file is gzip-compressed, not delimited text")
	case bytes.HasPrefix(head, []byte("\xFF\xFE")), bytes.HasPrefix(head, []byte("\xFE\xFF")):
		return notText("the file is UTF-16 encoded text: save it as UTF-8")
	}
	if len(head) == 0 {
		return nil
	}
	ctl := 0
	for _, c := range head {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0 {
			ctl++
		}
	}
	if ctl*10 > len(head) {
		return notText(fmt.Sprintf("the file does not look like text: %d of its first %d bytes are control characters", ctl, len(head)))
	}
	return nil
}
