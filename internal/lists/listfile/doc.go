// Package listfile reads and writes the delimited list files (.csv, .txt,
// or a .zip holding exactly one of those) that users upload to the email
// data service.
//
// The processing pipeline is:
//
//  1. The controller calls [OpenZip] when the upload is a .zip, then [Scan]
//     on the plain stream. Scan validates the file once (binary data,
//     unterminated quotes, oversized records, the email column) and returns
//     a [Plan] that splits the data records into contiguous byte ranges
//     ([Shard]) that start on record boundaries.
//  2. Each worker opens its shard with [NewShardReader] (or
//     [NewRangeReader]) and streams records with [Reader.Next], appending
//     service columns with [Writer.WriteRaw], which copies the original
//     record bytes untouched and formula-escapes the service columns
//     ([EscapeFormula]; [Record.AppendEscaped] escapes input cells too,
//     for lists that ask for it).
//  3. A merge step writes the output header with [Writer.WriteFields]
//     ([SynthesizeHeader] or [PadHeader] build it) and concatenates the
//     shards' outputs; [WriteZip] can wrap the result.
//
// Scan and Reader share one record parser, so the records a set of shard
// readers yields are exactly the records Scan counted, in order.
//
// # Format
//
// The format is RFC 4180 with tolerances for what real exports contain:
//
//   - Records end with LF or CRLF. A lone CR is NOT a line terminator: it is
//     kept as data (classic Mac CR-only files are rejected by Scan with
//     [ErrBareCR] when the first record shows one, so users get a precise
//     message instead of one giant record).
//   - A field that starts with '"' is quoted: it may contain the delimiter,
//     CR and LF, and "" stands for one quote. The quote closes at the first
//     '"' not followed by another '"'. Any text after the closing quote up to
//     the next delimiter is kept literally and appended to the value
//     ("ab"c reads as abc).
//   - A '"' inside an unquoted field is an ordinary character (lazy quotes).
//   - Empty lines (LF or CRLF alone) are not records; a line holding only
//     spaces or delimiters is a record.
//   - A UTF-8 byte order mark at the start of a file is skipped.
//   - A NUL byte anywhere is an error: the upload is binary, not text.
//   - Text is not required to be valid UTF-8 (Latin-1 exports are common);
//     bytes are passed through unchanged.
//
// Every bad-input error is an [*InputError] whose Reason is one of the Err*
// sentinels, so callers can tell a user's bad file ([IsBadInput]) from an
// I/O failure and show the message as is.
package listfile
