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

// hasHeader: the first row holds no address while later rows do, or it
// reads like names (email, mail, e-mail) of columns.
export function hasHeader(rows) {
  if (rows.length < 2) return false;
  const col = emailColumn(rows);
  const first = rows[0][col] || '';
  if (/^e-?mail/i.test(first.trim())) return true;
  return !looksEmail(first) && rows.slice(1).some((r) => looksEmail(r[col] || ''));
}

// readHead returns the first bytes of file as text.
export async function readHead(file) {
  return file.slice(0, PREVIEW_BYTES).text();
}
