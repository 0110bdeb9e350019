// A horizontal bar chart in SVG, written by hand: no library, no inline
// style (the Content-Security-Policy forbids it); colours come from
// app.css by class. bars: [{label, count, cls, key}].

const NS = 'http://www.w3.org/2000/svg';

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

export function barChart(title, bars, total) {
  const rowH = 28, labelW = 300, countW = 110, barW = 300;
  const width = labelW + barW + countW, height = bars.length * rowH + 8;
  const max = Math.max(1, ...bars.map((b) => b.count));
  const id = 'c' + Math.random().toString(36).slice(2, 8);
  const svg = el('svg', { class: 'chart', role: 'img', viewBox: `0 0 ${width} ${height}`, width: '100%',
    'aria-labelledby': `${id}-t`, preserveAspectRatio: 'xMinYMin meet' });
  svg.append(el('title', { id: `${id}-t` }, `${title}: ` + bars.map((b) => `${b.label} ${b.count}`).join(', ')));
  bars.forEach((b, i) => {
    const y = i * rowH + 4;
    const g = el('g', { 'data-key': b.key, 'data-count': b.count });
    g.append(el('text', { x: 0, y: y + 18 }, b.label));
    g.append(el('rect', { x: labelW, y: y + 4, height: rowH - 10, width: Math.max(1, Math.round(barW * b.count / max)),
      class: `bar-${b.cls || 'other'}` }));
    const pct = total > 0 ? ` (${(100 * b.count / total).toFixed(1)}%)` : '';
    g.append(el('text', { x: labelW + barW + 8, y: y + 18 }, `${b.count}${pct}`));
    svg.append(g);
  });
  return svg;
}
