// qkv serve's page: live curves of the served runs, and one input through a chosen checkpoint
// (outputs, every layer's and head's attention, next-token probabilities), with the heads
// clicked in the grid removed (panels.js: the removed heads, the head table, the logit lens;
// head_curves.js: each head's probe scores while a run trains).
// Talks only to the JSON API of the server that sent it (docs/serve.md); no libraries.
'use strict';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                '#17becf'];
const SVG_NS = 'http://www.w3.org/2000/svg';
// ablated: the heads removed from every answer (--ablate names); again: asked while busy;
// probes: each run's probe records; linkedHead: the head whose map a curve panel asked for;
// headColumns: the head table's columns, the score registry's among them (/api/head_columns).
const state = {runs: [], series: {}, offsets: {}, charts: {}, busy: false, again: false,
               ablated: new Set(), ablationRun: null, probes: {}, linkedHead: null,
               headColumns: []};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'style') e.style.cssText = v;  // CSSOM: allowed by the page's policy
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A JSON API call; an answer that is not 2xx throws its one-line message.
async function api(path, body) {
  const init = body === undefined ? {} : {method: 'POST', body: JSON.stringify(body),
                                         headers: {'Content-Type': 'application/json'}};
  const res = await fetch(path, init);
  const j = await res.json();
  if (!res.ok) throw new Error(j.error || ('HTTP ' + res.status));
  return j;
}

// --- the curves ---------------------------------------------------------------------------

// Which number of a metrics record goes to which chart (null: not this record).
const CURVES = [
  {id: 'train-loss', title: 'Training loss', pick: r => !r.split && r.loss},
  {id: 'valid-loss', title: 'Validation loss', pick: r => r.split === 'valid' && r.loss},
  {id: 'lr', title: 'Learning rate', pick: r => !r.split && r.lr},
  {id: 'exact-match', title: 'Validation exact match',
   pick: r => r.split === 'valid' && r.exact_match},
  {id: 'bleu', title: 'Validation BLEU', pick: r => r.split === 'valid' && r.bleu >= 0 && r.bleu},
  {id: 'entropy', title: 'Attention entropy (mean over layers)', pick: r => meanEntropy(r)},
  // A language model's probe: late-token minus early-token loss; below 0 the context helps.
  {id: 'icl', title: 'In-context learning score (nats)', pick: r => r.probe && r.probe.icl},
];

function meanEntropy(r) {
  if (!r.attention_entropy) return null;
  let sum = 0, n = 0;
  for (const v of Object.values(r.attention_entropy))
    for (const x of v) { sum += x; n++; }
  return n ? sum / n : null;
}

function makeChart(curve) {
  const fig = el('figure', {class: 'chart', id: 'chart-' + curve.id});
  fig.append(el('figcaption', {text: curve.title}));
  const s = svg('svg', {width: 380, height: 200, viewBox: '0 0 380 200'});
  fig.append(s, el('div', {class: 'legend'}));
  fig.hidden = true;  // until it has a point
  document.getElementById('curves').append(fig);
  return {fig, svg: s, curve};
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= step0);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-12; t += step) ticks.push(t);
  return ticks;
}

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

// Redraws one chart from state.series: a polyline per shown run, axes with ticks.
function drawChart(c) {
  const W = 380, H = 200, L = 52, R = 10, T = 10, B = 28;
  const lines = [];
  state.runs.forEach((run, i) => {
    if (!run.shown) return;
    const pts = (state.series[run.name] || {})[c.curve.id] || [];
    if (pts.length) lines.push({run, pts, color: COLORS[i % COLORS.length]});
  });
  c.fig.hidden = lines.length === 0;
  if (!lines.length) return;
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const l of lines)
    for (const [x, y] of l.pts) {
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y1 += Math.abs(y1) * 0.1 + 1e-9; y0 -= Math.abs(y0) * 0.1 + 1e-9; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const s = c.svg;
  s.replaceChildren();
  s.append(svg('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none',
                        stroke: '#ccd'}));
  for (const t of niceTicks(y0, y1, 4)) {
    s.append(svg('line', {x1: L, x2: W - R, y1: sy(t), y2: sy(t), stroke: '#eee'}));
    const tx = svg('text', {x: L - 4, y: sy(t) + 4, 'text-anchor': 'end'});
    tx.textContent = fmt(t);
    s.append(tx);
  }
  for (const t of niceTicks(x0, x1, 5)) {
    const tx = svg('text', {x: sx(t), y: H - B + 14, 'text-anchor': 'middle'});
    tx.textContent = fmt(t);
    s.append(tx);
  }
  const xl = svg('text', {x: W - R, y: H - 2, 'text-anchor': 'end'});
  xl.textContent = 'step';
  s.append(xl);
  const legend = c.fig.querySelector('.legend');
  legend.replaceChildren();
  for (const l of lines) {
    const p = svg('polyline', {fill: 'none', stroke: l.color, 'stroke-width': 1.5,
                               'data-run': l.run.name});
    p.setAttribute('points', l.pts.map(([x, y]) => sx(x).toFixed(1) + ',' + sy(y).toFixed(1))
                                 .join(' '));
    s.append(p);
    const key = el('span', {}, el('i', {style: 'background:' + l.color}), l.run.name);
    legend.append(key);
  }
}

function drawCharts() {
  for (const c of Object.values(state.charts)) drawChart(c);
}

function addRecords(run, records) {
  const series = state.series[run.name] || (state.series[run.name] = {});
  for (const r of records) {
    if (typeof r.step !== 'number') continue;
    for (const curve of CURVES) {
      const v = curve.pick(r);
      if (typeof v === 'number' && isFinite(v) && v !== false)
        (series[curve.id] || (series[curve.id] = [])).push([r.step, v]);
    }
    addProbe(run, r);
    run.lastStep = Math.max(run.lastStep || 0, r.step);
  }
}

// Asks each run for the metrics lines written since the last poll (the server sends only
// complete lines), then redraws.
async function pollMetrics() {
  let grew = false;
  for (const run of state.runs) {
    if (run.saturation) continue;
    try {
      const j = await api('/api/runs/' + encodeURIComponent(run.name) + '/metrics?offset=' +
                          (state.offsets[run.name] || 0));
      if (j.reset) {  // the log was replaced: its records again from the start
        state.series[run.name] = {};
        state.probes[run.name] = [];
        grew = true;
      }
      state.offsets[run.name] = j.next;
      if (j.records.length) { addRecords(run, j.records); grew = true; }
    } catch (e) {
      showError(e.message);
    }
  }
  if (grew) {
    drawCharts();
    renderRunSteps();
    renderHeadCurves();
  }
  const steps = state.runs.filter(r => r.lastStep).map(r => r.name + ' ' + r.lastStep);
  document.getElementById('live').textContent = steps.length ? 'live: step ' + steps.join(', ') : '';
}

// --- the runs -------------------------------------------------------------------------------

const FACTS = ['task', 'model', 'd_model', 'heads', 'encoder_layers', 'decoder_layers', 'd_ff',
               'block_size', 'position', 'optimizer', 'lr', 'batch_size', 'max_steps', 'epochs'];

function renderRuns() {
  const box = document.getElementById('runs');
  box.replaceChildren();
  state.runs.forEach((run, i) => {
    const color = COLORS[i % COLORS.length];
    const card = el('div', {class: 'run-card', style: '--c:' + color, 'data-run': run.name});
    const check = el('input', {type: 'checkbox'});
    check.checked = run.shown;
    check.addEventListener('change', () => { run.shown = check.checked; drawCharts(); });
    card.append(el('label', {}, check, ' ', el('b', {text: run.name})));
    if (run.saturation) {
      card.append(el('div', {text: 'saturation study: ' + run.charts.length + ' charts'}));
    } else {
      const dl = el('dl');
      for (const k of FACTS)
        if (run.facts && run.facts[k] !== undefined)
          dl.append(el('dt', {text: k.replace('_', ' ')}), el('dd', {text: String(run.facts[k])}));
      dl.append(el('dt', {text: 'checkpoints'}),
                el('dd', {text: String((run.checkpoints || []).filter(c => c.startsWith('step-')).length)}));
      dl.append(el('dt', {text: 'step'}), el('dd', {class: 'step', text: '-'}));
      card.append(dl);
    }
    box.append(card);
  });
}

function renderRunSteps() {
  for (const run of state.runs) {
    const dd = document.querySelector('.run-card[data-run="' + CSS.escape(run.name) + '"] .step');
    if (dd) dd.textContent = run.lastStep ? String(run.lastStep) : '-';
  }
}

function renderSaturation() {
  const studies = state.runs.filter(r => r.saturation);
  document.getElementById('saturation-section').hidden = studies.length === 0;
  const box = document.getElementById('saturation');
  box.replaceChildren();
  for (const s of studies) {
    box.append(el('h3', {text: s.name}));
    for (const c of s.charts)
      box.append(el('img', {src: '/api/runs/' + encodeURIComponent(s.name) + '/files/' +
                            encodeURIComponent(c), alt: s.name + ': ' + c, title: c}));
  }
}

function currentRun() {
  return state.runs.find(r => r.name === document.getElementById('run').value);
}

function fillRunChoice() {
  const sel = document.getElementById('run');
  const keep = sel.value;
  sel.replaceChildren();
  for (const r of state.runs)
    if (!r.saturation) sel.append(el('option', {value: r.name, text: r.name}));
  if (keep && state.runs.some(r => r.name === keep)) sel.value = keep;
  fillCheckpoints();
}

// What the page does with the input besides the maps, from what the run can do (the run facts'
// capabilities, run/capability.hpp): sample after it, decode it, or classify it.
const USES = {
  generate: {button: 'Sample', options: 'lm-options', next: 'after'},
  decode: {button: 'Decode', options: 'seq2seq-options', next: 'step (decoder input)'},
  classify: {button: 'Classify', options: null, next: 'read at'},
};
function inputUse(run) {
  const can = (run && run.facts && run.facts.capabilities) || [];
  return Object.keys(USES).find(c => can.includes(c)) || 'decode';
}

function fillCheckpoints() {
  const run = currentRun();
  const sel = document.getElementById('checkpoint');
  const keep = sel.value;
  sel.replaceChildren();
  for (const c of (run && run.checkpoints) || []) sel.append(el('option', {value: c, text: c}));
  if (keep && [...sel.options].some(o => o.value === keep)) sel.value = keep;
  const use = USES[inputUse(run)];
  for (const u of Object.values(USES))
    if (u.options) document.getElementById(u.options).hidden = u.options !== use.options;
  document.getElementById('go').textContent = use.button;
}

// The run list again (checkpoints come and go while a training runs).
async function refreshRuns() {
  try {
    const list = await api('/api/runs');
    for (const r of list) {
      const old = state.runs.find(o => o.name === r.name);
      if (old) Object.assign(old, {checkpoints: r.checkpoints, facts: r.facts});
    }
    fillCheckpoints();
  } catch (e) {
    showError(e.message);
  }
}

// --- one input: outputs, attention grid, next-token probabilities ----------------------------

function showError(msg) {
  document.getElementById('error').textContent = msg || '';
}

// White to blue to dark blue, as the PNG heatmaps of qkv attention.
function color(v) {
  v = Math.max(0, Math.min(1, v));
  const stops = [[255, 255, 255], [107, 174, 214], [8, 48, 107]];
  const t = v * 2, i = Math.min(1, Math.floor(t)), f = t - i;
  const a = stops[i], b = stops[i + 1];
  return 'rgb(' + a.map((x, k) => Math.round(x + (b[k] - x) * f)).join(',') + ')';
}

// A map with its tokens on the axes: the queries down the left, the keys along the top.
// Returns the grid's offset in the canvas, for the hover.
function paintMap(canvas, w, kind, cell, font) {
  const rows = kind.rows.length, cols = kind.cols.length;
  const g = canvas.getContext('2d');
  g.font = font + 'px monospace';
  const widest = list => Math.min(10, Math.max(1, ...list.map(t => t.length)));
  const left = Math.ceil(widest(kind.rows) * font * 0.62) + 4;
  const top = Math.ceil(widest(kind.cols) * font * 0.62) + 4;
  canvas.width = left + cols * cell;
  canvas.height = top + rows * cell;
  g.fillStyle = 'white';
  g.fillRect(0, 0, canvas.width, canvas.height);
  for (let i = 0; i < rows; i++)
    for (let j = 0; j < cols; j++) {
      g.fillStyle = color(w[i * cols + j]);
      g.fillRect(left + j * cell, top + i * cell, cell, cell);
    }
  g.fillStyle = '#1b1f24';
  g.font = font + 'px monospace';
  g.textBaseline = 'middle';
  g.textAlign = 'right';
  kind.rows.forEach((t, i) => g.fillText(t.slice(0, 10), left - 3, top + (i + 0.5) * cell));
  kind.cols.forEach((t, j) => {
    g.save();
    g.translate(left + (j + 0.5) * cell, top - 3);
    g.rotate(-Math.PI / 2);
    g.textAlign = 'left';
    g.fillText(t.slice(0, 10), 0, 0);
    g.restore();
  });
  canvas.grid = {left, top, cell};
  return canvas.grid;
}

function cellAt(canvas, ev, rows, cols) {
  const box = canvas.getBoundingClientRect(), g = canvas.grid;
  const scale = box.width / canvas.width;
  const j = Math.floor(((ev.clientX - box.left) / scale - g.left) / g.cell);
  const i = Math.floor(((ev.clientY - box.top) / scale - g.top) / g.cell);
  return i >= 0 && i < rows && j >= 0 && j < cols ? [i, j] : null;
}

// Hovering a cell shows its query and key tokens and the weight; what() gives the map shown.
function hoverable(canvas, what) {
  const tip = document.getElementById('tip');
  canvas.addEventListener('mousemove', ev => {
    const {kind, w, title} = what();
    const rows = kind.rows.length, cols = kind.cols.length;
    const at = cellAt(canvas, ev, rows, cols);
    if (!at) { tip.hidden = true; return; }
    const [i, j] = at;
    tip.textContent = title + ': ' + kind.rows[i] + ' \u2192 ' + kind.cols[j] + '  ' +
                      w[i * cols + j].toFixed(3);
    tip.style.left = (ev.clientX + 12) + 'px';
    tip.style.top = (ev.clientY + 12) + 'px';
    tip.hidden = false;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
}

// The enlarged map: bigger cells and labels.
function enlarge(kind, w, title) {
  const rows = kind.rows.length, cols = kind.cols.length;
  const cell = Math.max(14, Math.min(40, Math.floor(640 / Math.max(rows, cols))));
  const c = document.getElementById('zoom-canvas');
  paintMap(c, w, kind, cell, 12);
  document.getElementById('zoom-title').textContent = title + ' (rows: queries, columns: keys)';
  document.getElementById('zoom').hidden = false;
  if (!c.hoverable) {  // one listener, reading the map shown now
    c.hoverable = true;
    hoverable(c, () => c.shown);
  }
  c.shown = {kind, w, title};
}

// Every kind's maps, layers as rows and heads as columns. Clicking a map removes its head from
// the answers (again: puts it back), clicking a layer's label every head of that layer; the
// corner button enlarges a map.
function renderGrid(att) {
  const grid = document.getElementById('grid');
  grid.replaceChildren();
  for (const kind of att.kinds) {
    const rows = kind.rows.length, cols = kind.cols.length;
    const cell = Math.max(4, Math.min(16, Math.floor(160 / Math.max(rows, cols))));
    const box = el('div', {class: 'kind', 'data-kind': kind.kind});
    box.append(el('h4', {text: kind.title + ' (' + rows + ' \u00d7 ' + cols + ')'}));
    const table = el('table', {class: 'maps'});
    const head = el('tr', {}, el('th'));
    kind.layers[0].forEach((_, h) => head.append(el('th', {text: 'head ' + (h + 1)})));
    table.append(head);
    kind.layers.forEach((heads, l) => {
      const names = heads.map((_, h) => headName(kind.site.head_prefix, l, h));
      const label = el('th', {class: 'layer-label', text: 'layer ' + (l + 1),
                              title: 'click: remove every head of this layer (again: restore)'});
      label.addEventListener('click', () => toggleHeads(names));
      const tr = el('tr', {}, label);
      heads.forEach((w, h) => {
        const title = kind.title + ', layer ' + (l + 1) + ', head ' + (h + 1);
        const c = el('canvas', {class: 'map', 'data-kind': kind.kind, 'data-layer': l + 1,
                                'data-head': h + 1, 'data-rows': rows, 'data-cols': cols,
                                'data-name': names[h], title: ''});
        c.weights = w;  // kept for the checks of the page's tests
        paintMap(c, w, kind, cell, Math.min(11, Math.max(8, cell - 2)));
        hoverable(c, () => ({kind, w, title: title + ' (' + names[h] + ')'}));
        c.addEventListener('click', () => toggleHeads([names[h]]));
        const big = el('button', {type: 'button', class: 'enlarge', title: 'enlarge',
                                  'aria-label': 'enlarge ' + title, text: '\u2922'});
        big.addEventListener('click', () => enlarge(kind, w, title));
        tr.append(el('td', {}, c, big));
      });
      table.append(tr);
    });
    box.append(table);
    grid.append(box);
  }
  showAblation();
}

function renderNext(next, at) {
  const box = document.getElementById('next');
  const table = el('table', {class: 'next'});
  table.append(el('tr', {}, el('th', {text: at}),
                  el('th', {text: 'most likely next tokens'})));
  next.steps.forEach((s, t) => {
    const td = el('td');
    for (const o of s.top)
      td.append(el('span', {class: 'bar', style: 'width:' + Math.round(o.p * 60) + 'px'}),
                (o.token === ' ' ? '_' : o.token) + ' ' + o.p.toFixed(3) + '   ');
    table.append(el('tr', {}, el('td', {text: (t + 1) + ': ' + s.at}), td));
  });
  box.replaceChildren(table);
}

async function decode(run, text, checkpoint, ablate) {
  const out = document.getElementById('output');
  const beam = Number(document.getElementById('beam').value) || 1;
  const j = await api('/api/runs/' + encodeURIComponent(run.name) + '/translate',
                      {text, beam, checkpoint, ablate});
  out.replaceChildren(el('div', {}, el('span', {class: 'label', text: 'greedy: '}),
                             el('span', {id: 'greedy', text: j.greedy})),
                      el('div', {}, el('span', {class: 'label', text: 'beam ' + j.beam_size + ': '}),
                             el('span', {id: 'beamed', text: j.beam})));
}

// The input's class probabilities, most probable first, each with its bar.
async function classify(run, text, checkpoint, ablate) {
  const out = document.getElementById('output');
  const j = await api('/api/runs/' + encodeURIComponent(run.name) + '/classify',
                      {text, checkpoint, ablate});
  const table = el('table', {id: 'classes', class: 'next', 'data-predicted': j.predicted});
  table.append(el('tr', {}, el('th', {text: 'class'}), el('th', {text: 'probability'})));
  for (const c of [...j.classes].sort((a, b) => b.p - a.p))
    table.append(el('tr', {'data-class': c.class, 'data-p': c.p},
                    el('td', {text: c.class + (c.class === j.predicted ? ' (predicted)' : '')}),
                    el('td', {}, el('span', {class: 'bar', style: 'width:' + Math.round(c.p * 120) + 'px'}),
                       c.p.toFixed(4))));
  out.replaceChildren(table);
}

// Reads the streamed sample (one JSON line per piece) as it arrives.
async function sample(run, prompt, checkpoint, ablate) {
  const out = document.getElementById('output');
  const num = id => Number(document.getElementById(id).value);
  const body = {prompt, checkpoint, ablate, tokens: num('tokens'), temperature: num('temperature'),
                top_k: num('top_k'), top_p: num('top_p'), seed: num('seed')};
  const res = await fetch('/api/runs/' + encodeURIComponent(run.name) + '/generate',
                          {method: 'POST', body: JSON.stringify(body),
                           headers: {'Content-Type': 'application/json'}});
  if (!res.ok) throw new Error((await res.json()).error);
  const shown = el('span', {id: 'sample'});
  out.removeAttribute('data-done');
  out.replaceChildren(el('span', {class: 'label', text: 'sample: '}), el('b', {text: prompt}), shown);
  const reader = res.body.getReader(), dec = new TextDecoder();
  let pending = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    pending += dec.decode(value, {stream: true});
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const j = JSON.parse(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
      if (j.error) throw new Error(j.error);
      if (j.text !== undefined) shown.textContent += j.text;
      if (j.done) out.setAttribute('data-done', 'true');
    }
  }
}

function ask(ev) {
  ev.preventDefault();
  refresh();
}

// The input through the chosen run and checkpoint with the removed heads: maps and next-token
// probabilities (one pass), the output, the lens. Asked again once more when something changed
// while it ran (a head clicked meanwhile).
async function refresh() {
  const run = currentRun();
  if (!run) return;
  if (state.busy) {
    state.again = true;
    return;
  }
  const text = document.getElementById('text').value;
  const checkpoint = document.getElementById('checkpoint').value || 'best';
  const use = inputUse(run);
  const ablate = ablateSpec();
  showError('');
  state.busy = true;
  document.body.setAttribute('data-busy', 'true');
  try {
    const base = '/api/runs/' + encodeURIComponent(run.name);
    // The maps and probabilities first: they are quick; then the (streamed) output.
    const att = await api(base + '/attention', {text, checkpoint, ablate, k: 5});
    renderGrid(att);
    document.getElementById('grid').dataset.run = run.name;
    markLinkedMap();
    renderNext(att, USES[use].next);
    if (use === 'generate') await sample(run, text, checkpoint, ablate);
    else if (use === 'classify') await classify(run, text, checkpoint, ablate);
    else await decode(run, text, checkpoint, ablate);
    document.getElementById('output').setAttribute('data-ablate', ablate);
    await askLens();
  } catch (e) {
    showError(e.message);
  } finally {
    state.busy = false;
    if (state.again) {
      state.again = false;
      refresh();
    } else {
      document.body.setAttribute('data-busy', 'false');
    }
  }
}

async function start() {
  for (const curve of CURVES) state.charts[curve.id] = makeChart(curve);
  try {
    state.runs = (await api('/api/runs')).map(r => Object.assign(r, {shown: true}));
    state.headColumns = (await api('/api/head_columns')).columns;
  } catch (e) {
    showError(e.message);
    return;
  }
  renderRuns();
  renderSaturation();
  fillRunChoice();
  document.getElementById('run').addEventListener('change', () => {
    fillCheckpoints();
    forgetOtherRun();
  });
  document.getElementById('ask').addEventListener('submit', ask);
  document.getElementById('clear-ablation').addEventListener('click', clearAblation);
  document.getElementById('score-heads').addEventListener('click', scoreHeads);
  document.getElementById('lens-go').addEventListener('click', askLens);
  document.getElementById('zoom').addEventListener('click', () => {
    document.getElementById('zoom').hidden = true;
    document.getElementById('tip').hidden = true;
  });
  for (const id of ['hc-run', 'hc-score'])
    document.getElementById(id).addEventListener('change', renderHeadCurves);
  await pollMetrics();
  renderHeadCurves();
  document.body.setAttribute('data-ready', 'true');
  setInterval(pollMetrics, 1000);
  setInterval(refreshRuns, 5000);
}

start();
