// Reads the first rows of a list file in the browser (never uploaded for
// this), guesses the delimiter and whether the first row is a header, and
// finds the column that looks most like email addresses.

export const DELIMITERS = { comma: ',', tab: '\t', pipe: '|' };
const EMAIL = /^[^@\s"]+@[^@\s"]+\.[^@\s"]+$/;
const PREVIEW_BYTES = 64 * 1024;

// parseRows splits text into rows of fields, honouring double quotes as
// CSV does (a quoted field may hold the delimiter or a doubled quote).
export function parseRows(text, delim, maxRows) {
  const rows = [];
  let row = [], field = '', quoted = false;
  for (let i = 0; i < text.length && rows.length < maxRows; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === delim) { row.push(field); field = ''; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field); rows.push(row); row = []; field = '';
    } else field += c;
  }
  if ((field !== '' || row.length) && rows.length < maxRows) { row.push(field); rows.push(row); }
  return rows.filter((r) => r.length > 1 || r[0] !== '');
}

// detectDelimiter picks the delimiter that splits the first lines into the
// same number of fields, more than one, most consistently.
export function detectDelimiter(text) {
  let best = 'tab', bestScore = -1;
  for (const [name, d] of Object.entries(DELIMITERS)) {
    const rows = parseRows(text, d, 20);
    if (!rows.length) continue;
    const n = rows[0].length;
    const same = rows.filter((r) => r.length === n).length / rows.length;
    const score = n > 1 ? same * 10 + Math.min(n, 10) / 10 : 0;
    if (score > bestScore) { best = name; bestScore = score; }
  }
  return best;
}

const looksEmail = (s) => EMAIL.test(s.trim());

// emailColumn is the 0-based column with the most addresses in rows.
export function emailColumn(rows) {
  const counts = [];
  for (const r of rows) r.forEach((v, i) => { counts[i] = (counts[i] || 0) + (looksEmail(v) ? 1 : 0); });
  let best = 0;
  counts.forEach((c, i) => { if (c > (counts[best] || 0)) best = i; });
  return best;
}

// Column names a list's header holds: the email column's, and the name
// and postal ones of an email append list (which has no addresses).
const HEAD_NAMES = /^(e-?mail.*|(first|last|middle)[ _-]?name|first|last|zip([ _-]?code)?|postal[ _-]?code|street|city|state)$/i;

// hasHeader: the first row holds no address while later rows do, or it
// reads like names of columns (email, first name, zip...).
export function hasHeader(rows) {
  if (rows.length < 2) return false;
  const col = emailColumn(rows);
  const first = rows[0][col] || '';
  if (/^e-?mail/i.test(first.trim())) return true;
  if (rows[0].some((v) => HEAD_NAMES.test(v.trim())) && !rows[1].some((v) => HEAD_NAMES.test(v.trim()))) return true;
  return !looksEmail(first) && rows.slice(1).some((r) => looksEmail(r[col] || ''));
}

// readHead returns the first bytes of file as text; of a .zip, the first
// bytes of its first file (stored or deflated, as list files are zipped),
// inflated by the browser's own DecompressionStream.
export async function readHead(file) {
  if (/\.zip$/i.test(file.name)) return readZipHead(file);
  return file.slice(0, PREVIEW_BYTES).text();
}

async function readZipHead(file) {
  const h = new DataView(await file.slice(0, 30).arrayBuffer());
  if (h.byteLength < 30 || h.getUint32(0, true) !== 0x04034b50) throw new Error('this .zip file does not start with a file');
  const method = h.getUint16(8, true), size = h.getUint32(18, true);
  const start = 30 + h.getUint16(26, true) + h.getUint16(28, true);
  // The size is 0 when the zip writer put it after the data: read on; the
  // preview stops early anyway.
  let body = file.slice(start, size > 0 ? start + size : file.size).stream();
  if (method === 8) body = body.pipeThrough(new DecompressionStream('deflate-raw'));
  else if (method !== 0) throw new Error('this .zip file is compressed in a way the preview cannot read');
  const reader = body.getReader();
  const chunks = [];
  let n = 0;
  try {
    while (n < PREVIEW_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      n += value.length;
    }
  } catch {
    // Bytes after the first file's end: what was read is the preview.
  }
  reader.cancel().catch(() => {});
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) { all.set(c, at); at += c.length; }
  return new TextDecoder().decode(all.subarray(0, PREVIEW_BYTES));
}
