// The console: sign in, upload, watch the lists, read a result, buy and
// download. It uses the public REST routes and GET /v5/lists, /v5/key.
import { key, call, getJSON, upload, ApiError } from './api.js';
import { DELIMITERS, parseRows, detectDelimiter, emailColumn, hasHeader, readHead } from './preview.js';
import { barChart } from './chart.js';

const $ = (id) => document.getElementById(id);
const SERVICE_NAMES = {
  email_validation: 'Email validation', email_append: 'Email append', email_intelligence: 'Demographics (email intelligence)',
  fraud: 'Fraud prevention', demographics: 'Demographics lookups',
};
const STATUS_WORDS = {
  safetosend: 'Safe to send: deliverable and low risk',
  valid: 'Valid, but not confirmed deliverable: may bounce',
  invalid: 'Invalid: do not send (bad syntax, no such domain or mailbox)',
  trap: 'Risky: spam trap, disposable or high-risk address; do not send',
  unknown: 'Unknown: could not be checked (timeout or system error)',
};
const LIST_STATUS = {
  Pending: 'Waiting to start', Processing: 'Processing', Processed: 'Report ready (not bought yet)',
  Results: 'Results ready', Failed: 'Failed',
};

const state = { info: null, file: null, rows: [], column: 0, lists: new Map(), cursor: '', order: [],
  samples: new Map(), pollDelay: 1000, pollTimer: 0, open: 0, codes: null };

function say(id, text, kind = 'err') {
  const p = $(id);
  p.textContent = text;
  p.className = 'msg ' + (text ? kind : '');
}

function fmtBytes(n) {
  const u = ['B', 'kB', 'MB', 'GB'];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

function fmtDuration(s) {
  if (!isFinite(s) || s < 0) return '';
  if (s < 60) return `${Math.max(1, Math.round(s))} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

// ---- sign in ----

async function signIn(k) {
  say('signin-msg', '');
  try {
    state.info = await getJSON('/v5/key', { k });
  } catch (e) {
    key.clear();
    say('signin-msg', e.status === 401 ? 'That API key is not valid: it is wrong or has been revoked.' : e.message);
    showSignedOut();
    return false;
  }
  key.set(k);
  showSignedIn();
  return true;
}

function showSignedOut() {
  $('app').hidden = true; $('who').hidden = true; $('signin').hidden = false;
  clearTimeout(state.pollTimer);
}

function signOut(message) {
  key.clear();
  state.lists.clear(); state.order = []; state.info = null;
  $('lists-table').tBodies[0].replaceChildren();
  $('detail').hidden = true;
  showSignedOut();
  if (message) say('signin-msg', message);
  $('key').value = '';
  $('key').focus();
}

function showSignedIn() {
  $('signin').hidden = true; $('app').hidden = false; $('who').hidden = false;
  const names = state.info.services.map((s) => SERVICE_NAMES[s] || s);
  $('who-services').textContent = 'Signed in · this key may use: ' + (names.join(', ') || 'nothing');
  const sel = $('service');
  sel.replaceChildren(...state.info.list_services.map((s) => new Option(SERVICE_NAMES[s] || s, s)));
  if (!state.info.list_services.length) {
    say('upload-msg', 'This API key is not enabled for any list service, so it cannot upload lists.');
  }
  updateActions();
  refreshLists(true);
}

// Any 401 after sign-in means the key was revoked meanwhile.
function handle(e, msgId) {
  if (e instanceof ApiError && e.status === 401) { signOut(e.message); return; }
  say(msgId, e.message || String(e));
}

// ---- upload ----

function updateActions() {
  const svc = $('service').value;
  const report = state.info && state.info.purchasable.includes(svc);
  const radio = document.querySelector('input[name=action][value=report]');
  radio.disabled = !report;
  if (!report) document.querySelector('input[name=action][value=process]').checked = true;
  $('upload-btn').disabled = !state.file || !svc;
}

async function chooseFile(file) {
  say('upload-msg', '');
  if (!/\.(csv|txt|zip)$/i.test(file.name)) {
    say('upload-msg', `"${file.name}" is not a .csv, .txt or .zip file.`);
    return;
  }
  state.file = file;
  $('preview').hidden = false;
  let text = null;
  try {
    text = await readHead(file);
  } catch (e) {
    // A .zip the preview cannot read: the server still can; ask for the column.
    $('preview-info').textContent = `${file.name} (${fmtBytes(file.size)}): no preview (${e.message}); say below which column holds the emails.`;
  }
  state.preview = text !== null;
  $('zip-column').hidden = state.preview;
  $('preview-table').hidden = !state.preview;
  $('column-help').hidden = !state.preview;
  if (state.preview) {
    const delim = detectDelimiter(text);
    $('delimiter').value = delim;
    const rows = parseRows(text, DELIMITERS[delim], 6);
    $('header').checked = hasHeader(rows);
    state.column = emailColumn(rows);
    state.text = text;
    renderPreview();
  }
  updateActions();
}

function renderPreview() {
  const delim = $('delimiter').value;
  const rows = parseRows(state.text, DELIMITERS[delim], 6);
  const header = $('header').checked;
  const width = Math.max(1, ...rows.map((r) => r.length));
  state.column = Math.min(state.column, width - 1);
  const heads = header && rows.length ? rows[0] : [];
  const tr = document.createElement('tr');
  for (let i = 0; i < width; i++) {
    const th = document.createElement('th');
    th.scope = 'col';
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = heads[i] ? `${i + 1}: ${heads[i]}` : `Column ${i + 1}`;
    b.setAttribute('aria-pressed', String(i === state.column));
    b.dataset.column = String(i);
    b.addEventListener('click', () => { state.column = i; renderPreview(); $('preview-table').querySelector(`[data-column="${i}"]`).focus(); });
    th.append(b);
    tr.append(th);
  }
  $('preview-table').tHead.replaceChildren(tr);
  const body = (header ? rows.slice(1) : rows).slice(0, 5).map((r) => {
    const row = document.createElement('tr');
    for (let i = 0; i < width; i++) {
      const td = document.createElement('td');
      td.textContent = r[i] ?? '';
      if (i === state.column) td.className = 'chosen';
      row.append(td);
    }
    return row;
  });
  $('preview-table').tBodies[0].replaceChildren(...body);
  const words = { comma: 'commas', tab: 'tabs', pipe: 'pipes' }[delim];
  $('preview-info').textContent = `${state.file.name} (${fmtBytes(state.file.size)}): columns separated by ${words}; ` +
    (header ? 'the first row holds column names' : 'no header row') + `; emails in column ${state.column + 1}.`;
}

async function submitUpload(ev) {
  ev.preventDefault();
  say('upload-msg', '');
  const column = state.preview ? state.column + 1 : Number($('column-number').value);
  const q = new URLSearchParams({
    service: $('service').value, email_column: String(column), header: String($('header').checked),
    delimiter: $('delimiter').value, action: document.querySelector('input[name=action]:checked').value,
  });
  if ($('callback').value.trim()) q.set('callback_url', $('callback').value.trim());
  $('upload-progress').hidden = false;
  $('upload-btn').disabled = true;
  try {
    const res = await upload(q, state.file, (loaded, total, speed) => {
      $('up-bar').max = total || 1; $('up-bar').value = loaded;
      $('up-text').textContent = `${fmtBytes(loaded)} of ${fmtBytes(total)} sent, ${fmtBytes(speed)}/s`;
    });
    say('upload-msg', `Uploaded: list ${res.list_id} is queued. Follow it below.`, 'ok');
    state.open = res.list_id;
    refreshLists(true);
  } catch (e) {
    handle(e, 'upload-msg');
  } finally {
    updateActions();
  }
}

// ---- lists ----

const active = (l) => l.status === 'Pending' || l.status === 'Processing';

// eta from the progress seen across polls: rows left over the rate since
// the first sample of this list.
function eta(l) {
  const now = performance.now();
  let s = state.samples.get(l.list_id);
  if (!s || l.completed_count < s.done) { s = { t: now, done: l.completed_count }; state.samples.set(l.list_id, s); }
  const rate = (l.completed_count - s.done) / ((now - s.t) / 1000);
  if (!active(l) || !(rate > 0) || !l.records) return '';
  return `about ${fmtDuration((l.records - l.completed_count) / rate)} left`;
}

function listRow(l) {
  const tr = document.createElement('tr');
  tr.dataset.listId = String(l.list_id);
  const cell = (text, cls) => { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.append(td); return td; };
  cell(l.name);
  cell(SERVICE_NAMES[l.service] || l.service);
  cell(LIST_STATUS[l.status] || l.status).dataset.status = l.status;
  const td = cell('');
  const bar = document.createElement('progress');
  const done = l.status === 'Processed' || l.status === 'Results';
  bar.max = Math.max(1, l.records); bar.value = done ? bar.max : Math.min(l.completed_count, bar.max);
  bar.setAttribute('aria-label', `Progress of ${l.name}`);
  const text = document.createElement('span');
  text.textContent = ` ${done ? l.records : l.completed_count} of ${l.records || '?'} ${eta(l)}`;
  td.append(bar, text);
  cell(new Date(l.created_at).toLocaleString());
  const open = document.createElement('button');
  open.type = 'button'; open.className = 'secondary';
  open.textContent = 'Open'; open.setAttribute('aria-label', `Open ${l.name} (list ${l.list_id})`);
  open.addEventListener('click', () => openList(l.list_id, true));
  tr.append(document.createElement('td')); tr.lastChild.append(open);
  return tr;
}

// renderLists keeps the row of a list that did not change (and the DOM
// untouched when no list did), so that polling never takes the keyboard
// focus away or moves a button under the pointer.
function renderLists() {
  const body = $('lists-table').tBodies[0];
  const old = new Map([...body.rows].map((r) => [r.dataset.listId, r]));
  const rows = state.order.map((id) => {
    const l = state.lists.get(id), sig = JSON.stringify(l), r = old.get(String(id));
    if (r && r.dataset.sig === sig) return r;
    const nr = listRow(l);
    nr.dataset.sig = sig;
    return nr;
  });
  if (rows.length !== body.rows.length || rows.some((r, i) => body.rows[i] !== r)) {
    // Remove the stale rows, then insert the new ones where they go: a
    // kept row is never moved (moving it would drop its focus).
    const keep = new Set(rows);
    [...body.rows].forEach((r) => { if (!keep.has(r)) r.remove(); });
    rows.forEach((r, i) => { if (body.rows[i] !== r) body.insertBefore(r, body.rows[i] || null); });
  }
  $('more').hidden = !state.cursor;
  const n = state.order.length;
  $('lists-status').textContent = n ? `${n} list${n > 1 ? 's' : ''} shown, newest first.` : 'No lists yet: upload one above.';
  $('lists-status').className = 'muted';
}

// refreshLists reads the newest page (and keeps older pages loaded with
// "Show older lists"); it polls again sooner while lists run and backs
// off, up to 30 s, while nothing changes.
async function refreshLists(reset) {
  clearTimeout(state.pollTimer);
  if (reset) state.pollDelay = 1000;
  let changed = false, openChanged = false;
  try {
    const page = await getJSON('/v5/lists?limit=50');
    for (const l of page.lists) {
      const old = state.lists.get(l.list_id);
      if (!old || old.status !== l.status || old.completed_count !== l.completed_count) {
        changed = true;
        if (l.list_id === state.open) openChanged = true;
      }
      state.lists.set(l.list_id, l);
      if (!state.order.includes(l.list_id)) state.order.push(l.list_id);
    }
    if (!state.cursor && state.order.length <= page.lists.length) state.cursor = page.next_cursor || '';
    sortOrder();
    renderLists();
    if (openChanged) openList(state.open, false);
  } catch (e) {
    handle(e, 'lists-status');
    if (!key.get()) return;
  }
  const running = [...state.lists.values()].some(active);
  state.pollDelay = changed && running ? 1000 : Math.min(state.pollDelay * 2, running ? 5000 : 30000);
  if (!document.hidden) state.pollTimer = setTimeout(() => refreshLists(false), state.pollDelay);
}

function sortOrder() {
  state.order.sort((a, b) => {
    const la = state.lists.get(a), lb = state.lists.get(b);
    return lb.created_at.localeCompare(la.created_at) || lb.list_id - la.list_id;
  });
}

async function moreLists() {
  try {
    const page = await getJSON('/v5/lists?limit=50&cursor=' + encodeURIComponent(state.cursor));
    for (const l of page.lists) { state.lists.set(l.list_id, l); if (!state.order.includes(l.list_id)) state.order.push(l.list_id); }
    state.cursor = page.next_cursor || '';
    sortOrder();
    renderLists();
  } catch (e) { handle(e, 'lists-status'); }
}

// ---- one list's result ----

async function codes() {
  if (!state.codes) state.codes = await (await fetch('codes.json')).json();
  return state.codes;
}

function table(caption, head, rows) {
  const t = document.createElement('table');
  t.createCaption().textContent = caption;
  const hr = t.createTHead().insertRow();
  head.forEach((h, i) => { const th = document.createElement('th'); th.scope = 'col'; th.textContent = h; if (i && i === head.length - 1) th.className = 'num'; hr.append(th); });
  const body = t.createTBody();
  for (const r of rows) {
    const tr = body.insertRow();
    r.forEach((v, i) => { const td = tr.insertCell(); td.textContent = String(v); if (i === r.length - 1) td.className = 'num'; });
  }
  return t;
}

const pct = (n, d) => d > 0 ? `${(100 * n / d).toFixed(1)}%` : '–';

async function resultView(st, summary) {
  const svc = summary.service;
  const rep = st.services[svc]?.reporting || st.reporting || {};
  const out = [];
  const facts = document.createElement('dl');
  facts.className = 'facts';
  const fact = (k, v) => { const dt = document.createElement('dt'); dt.textContent = k; const dd = document.createElement('dd'); dd.textContent = v; facts.append(dt, dd); };
  fact('List', `${st.name} (list ${st.list_id})`);
  fact('Service', SERVICE_NAMES[svc] || svc);
  fact('Status', LIST_STATUS[st.status] || st.status);
  fact('Rows', String(st.records));
  fact('Created', new Date(st.created_at).toLocaleString());
  if (st.services[svc]?.error) fact('Error', st.services[svc].error);
  out.push(facts);
  if (rep.status) {
    const order = ['safetosend', 'valid', 'invalid', 'trap', 'unknown'];
    const keys = Object.keys(rep.status).sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
    const bars = keys.map((k) => ({ key: `status:${k}`, label: k, count: rep.status[k], cls: k }));
    const h = document.createElement('h3'); h.textContent = 'Outcome by status';
    out.push(h, barChart('Addresses by status', bars, st.records),
      table('What each status means', ['Status', 'Meaning', 'Addresses'], keys.map((k) => [k, STATUS_WORDS[k] || '', rep.status[k]])));
  }
  if (rep.status_code) {
    const meanings = await codes();
    const keys = Object.keys(rep.status_code).sort((a, b) => rep.status_code[b] - rep.status_code[a] || a - b);
    const bars = keys.map((k) => ({ key: `status_code:${k}`, label: `${k}: ${meanings[k]?.meaning || 'code ' + k}`, count: rep.status_code[k], cls: meanings[k]?.status }));
    const h = document.createElement('h3'); h.textContent = 'Outcome by status code';
    out.push(h, barChart('Addresses by status code', bars, st.records),
      table('Status codes in plain words', ['Code', 'Meaning', 'Addresses'], keys.map((k) => [k, meanings[k]?.meaning || 'not documented', rep.status_code[k]])));
  }
  const extra = [];
  const one = (field, label) => { const m = rep[field]; if (m) extra.push([label, m.true ?? Object.values(m).reduce((a, b) => a + b, 0)]); };
  one('duplicate', 'Duplicates (repeats of an earlier row)');
  one('correction', 'Corrections suggested for mistyped addresses');
  one('from_history', 'Verdicts from the verification history (not probed again)');
  if (extra.length) out.push(table('Also counted', ['What', 'Rows'], extra));
  if (svc === 'email_append' && rep.email_match_type) {
    const m = rep.email_match_type;
    const rows = Object.keys(m).map((k) => [k, pct(m[k], st.records), m[k]]);
    const total = Object.values(m).reduce((a, b) => a + b, 0);
    rows.push(['Any match', pct(total, st.records), total]);
    out.push(table('Match rates', ['Match', 'Rate', 'Rows'], rows));
  } else if (svc === 'email_intelligence') {
    const rows = Object.keys(rep).filter((f) => rep[f]['Total Count'] !== undefined)
      .map((f) => [f, pct(rep[f]['Total Count'], st.records), rep[f]['Total Count']]);
    if (rows.length) out.push(table('Match rates by field', ['Field', 'Rate', 'Rows'], rows));
  }
  const known = new Set(['status', 'status_code', 'duplicate', 'correction', 'from_history', 'email_match_type']);
  const rest = Object.keys(rep).filter((f) => !known.has(f) && !(svc === 'email_intelligence' && rep[f]['Total Count'] !== undefined));
  for (const f of rest) out.push(table(`Counts by ${f}`, [f, 'Rows'], Object.entries(rep[f]).map(([k, v]) => [k, v])));
  return out;
}

function actions(st, summary) {
  const row = document.createElement('div');
  row.className = 'row';
  if (st.status === 'Processed' && st.action === 'report') {
    const b = document.createElement('button');
    b.type = 'button'; b.id = 'buy'; b.textContent = 'Buy the results…';
    b.addEventListener('click', () => buy(summary));
    row.append(b);
  }
  if (st.status === 'Results') {
    const b = document.createElement('button');
    b.type = 'button'; b.id = 'download'; b.textContent = 'Download the result file';
    b.addEventListener('click', () => download(summary));
    row.append(b);
  }
  return row;
}

async function openList(id, focus) {
  state.open = id;
  // A later call wins: an answer that arrives after a newer one is dropped.
  const seq = state.openSeq = (state.openSeq || 0) + 1;
  const summary = state.lists.get(id);
  $('detail').hidden = false;
  if (focus) say('detail-msg', '');
  try {
    const st = await getJSON(`/v5/list/${id}`);
    if (seq !== state.openSeq) return;
    // Re-render only what changed, so that a poll never replaces the
    // buttons under the user's pointer or keyboard focus.
    const sig = JSON.stringify(st);
    if (!focus && $('detail-body').dataset.listId === String(id) && state.detailSig === sig) return;
    const body = [...await resultView(st, summary), actions(st, summary)];
    if (seq !== state.openSeq) return;
    state.detailSig = sig;
    $('detail-h').textContent = `3. Result of ${st.name}`;
    $('detail-body').replaceChildren(...body);
    $('detail-body').dataset.listId = String(id);
    $('detail-body').dataset.status = st.status;
  } catch (e) { handle(e, 'detail-msg'); }
  if (focus) $('detail-h').focus();
}

function buy(summary) {
  const dlg = $('confirm');
  $('confirm-text').textContent = `Buying "${summary.name}" (list ${summary.list_id}, ${summary.records} rows) delivers the ` +
    `${SERVICE_NAMES[summary.service] || summary.service} results as a file you can download, and is billed to your account. ` +
    'A list is delivered once; this cannot be undone.';
  dlg.returnValue = '';
  dlg.showModal();
  dlg.addEventListener('close', async () => {
    if (dlg.returnValue !== 'buy') return;
    say('detail-msg', 'Buying…', 'ok');
    let done = '';
    try {
      const resp = await call('POST', `/v5/list/${summary.list_id}/purchase`, { body: '{}', headers: { 'Content-Type': 'application/json' } });
      done = resp.status === 202 ? 'Purchase recorded; the results are being prepared.' : 'Bought: the results are ready to download.';
    } catch (e) { handle(e, 'detail-msg'); return; }
    refreshLists(true);
    await openList(summary.list_id, false);
    say('detail-msg', done, 'ok');
  }, { once: true });
}

async function download(summary) {
  try {
    const resp = await call('GET', `/v5/list/${summary.list_id}/results`);
    const blob = await resp.blob();
    const cd = resp.headers.get('Content-Disposition') || '';
    const name = (/filename="?([^";]+)"?/.exec(cd) || [])[1] || `list-${summary.list_id}-results`;
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    say('detail-msg', `Downloaded ${name} (${fmtBytes(blob.size)}).`, 'ok');
  } catch (e) { handle(e, 'detail-msg'); }
}

// ---- wiring ----

function wire() {
  $('signin-form').addEventListener('submit', (e) => { e.preventDefault(); signIn($('key').value.trim()); });
  $('signout').addEventListener('click', () => signOut(''));
  $('file').addEventListener('change', () => { if ($('file').files[0]) chooseFile($('file').files[0]); });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault(); drop.classList.remove('over');
    if (e.dataTransfer.files[0]) chooseFile(e.dataTransfer.files[0]);
  });
  $('delimiter').addEventListener('change', renderPreview);
  $('header').addEventListener('change', renderPreview);
  $('service').addEventListener('change', updateActions);
  $('upload-form').addEventListener('submit', submitUpload);
  $('more').addEventListener('click', moreLists);
  document.addEventListener('visibilitychange', () => { if (!document.hidden && key.get()) refreshLists(true); });
  if (key.get()) signIn(key.get());
}

wire();
