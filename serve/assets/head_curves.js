// qkv serve's "Heads while training": the probe records a training with a [probe] section
// appends to metrics.jsonl ({"step", "probe": {"attentions": {NAME: {"layers", "heads", SCORE:
// [[per head] per layer]}}, "icl"}}), drawn as small multiples as `qkv report` draws them: for
// one run, attention and score, a panel per head (layers as rows, heads as columns) with that
// head's score against step, every panel on the same y range. The panels are built once per
// choice and their lines redrawn as records arrive. Clicking a panel marks that head's map in
// the attention grid. Which attentions there are, their order, titles and head names are the
// run's attention sites (the run facts' "sites", which the server reads from the run's config
// without loading it); a score's title, unit, range and format are its column's
// (state.headColumns, from the server's score registry). Uses app.js's el(), svg(), fmt(),
// state, currentRun(), fillCheckpoints() and panels.js's headName(), headColumn(),
// forgetOtherRun() at call time; app.js calls addProbe(), renderHeadCurves() and
// markLinkedMap().
'use strict';

const PANEL = {w: 120, h: 56, top: 14};  // one head's panel; its line below a 14 px label row

// Keeps a record's probe: state.probes[run] is [{step, attentions}] in the order logged.
function addProbe(run, r) {
  const p = r.probe;
  if (!p || typeof p !== 'object' || !p.attentions || typeof p.attentions !== 'object') return;
  (state.probes[run.name] || (state.probes[run.name] = [])).push({step: r.step,
                                                                  attentions: p.attentions});
}

// True when a (layers, heads) array of arrays.
function isGrid(a, layers, heads) {
  return Array.isArray(a) && a.length === layers &&
         a.every(row => Array.isArray(row) && row.length === heads);
}

// A score's place: its column's (the server's score registry); a score without a column (a
// record of another version) last, by name.
const rank = (list, x) => (list.includes(x) ? list.indexOf(x) : list.length);
const columnNames = () => state.headColumns.map(c => c.name);

// A score's words: its column's title, else (a record of another version) its name.
function scoreTitle(score) {
  const c = headColumn(score);
  return c ? c.title : score.replaceAll('_', ' ');
}

// The attention/score pairs to choose from (as report's probe_head_curves): each of the run's
// attention sites in the model's order, with the scores the run's first probe record has for
// it in the columns' order: [{attention, score, layers, heads, prefix, title}].
function probeChoices(probes, sites) {
  const out = [], names = columnNames();
  const first = probes[0].attentions;
  for (const site of sites) {
    const a = first[site.name];
    if (!a || !(a.layers > 0) || !(a.heads > 0)) continue;
    const scores = Object.keys(a).filter(score => isGrid(a[score], a.layers, a.heads));
    scores.sort((x, y) => rank(names, x) - rank(names, y) || x.localeCompare(y));
    for (const score of scores)
      out.push({attention: site.name, score, layers: a.layers, heads: a.heads,
                prefix: site.head_prefix, title: site.title});
  }
  return out;
}

// The choice's curves: the steps of the records with that layout, and per head
// ([layer * heads + head]) its value at each (NaN where a record lacks it).
function choiceCurves(probes, c) {
  const steps = [], values = Array.from({length: c.layers * c.heads}, () => []);
  for (const p of probes) {
    const a = p.attentions[c.attention];
    if (!a || a.layers !== c.layers || a.heads !== c.heads) continue;
    const grid = isGrid(a[c.score], c.layers, c.heads) ? a[c.score] : null;
    steps.push(p.step);
    for (let l = 0; l < c.layers; l++)
      for (let h = 0; h < c.heads; h++) {
        const v = grid ? grid[l][h] : NaN;
        values[l * c.heads + h].push(typeof v === 'number' && isFinite(v) ? v : NaN);
      }
  }
  return {steps, values};
}

// As `qkv report` titles the same figure: "causal self-attention: induction".
function choiceLabel(c) {
  return c.title + ': ' + scoreTitle(c.score);
}

// Sets a select's options only when they changed (an open list stays open); keeps the value
// chosen, else takes fallback.
function fillOptions(sel, values, labels, fallback) {
  const now = [...sel.options].map(o => o.value);
  if (now.join('\n') !== values.join('\n')) {
    const keep = sel.value;
    sel.replaceChildren(...values.map((v, i) => el('option', {value: v, text: labels[i]})));
    sel.value = values.includes(keep) ? keep : fallback;
  }
}

// The section for the runs with probe records; without any, the line saying how to get them.
function renderHeadCurves() {
  const runs = state.runs.filter(r => (state.probes[r.name] || []).length);
  document.getElementById('head-curves-off').hidden = runs.length > 0;
  document.getElementById('head-curves-on').hidden = runs.length === 0;
  if (!runs.length) return;
  const runSel = document.getElementById('hc-run');
  const names = runs.map(r => r.name);
  const look = currentRun();
  fillOptions(runSel, names, names, look && names.includes(look.name) ? look.name : names[0]);
  const probes = state.probes[runSel.value];
  const run = runs.find(r => r.name === runSel.value);
  const choices = probeChoices(probes, (run.facts && run.facts.sites) || []);
  const scoreSel = document.getElementById('hc-score');
  const keys = choices.map(c => c.attention + '/' + c.score);
  // A score of one kind of attention first (a pattern: what forms), not one every head has.
  const pattern = choices.find(c => (headColumn(c.score) || {}).attention !== 'any') ||
                  choices[0];
  fillOptions(scoreSel, keys, choices.map(choiceLabel),
              pattern ? pattern.attention + '/' + pattern.score : '');
  const c = choices[keys.indexOf(scoreSel.value)];
  const box = document.getElementById('head-curves');
  if (!c) {
    box.replaceChildren();
    box.dataset.key = '';
    return;
  }
  const key = [runSel.value, c.attention, c.score, c.layers, c.heads].join('|');
  if (box.dataset.key !== key) buildPanels(box, runSel.value, c, key);
  drawPanels(c, choiceCurves(probes, c));
}

// The grid of empty panels: layers as rows and heads as columns, labelled from 0 as `qkv
// report` labels them ("L1", "head 0"), each panel named as --ablate names its head ("1.0").
function buildPanels(box, run, c, key) {
  const table = el('table', {class: 'head-curves', 'data-attention': c.attention,
                             'data-score': c.score});
  const top = el('tr', {}, el('th'));
  for (let h = 0; h < c.heads; h++) top.append(el('th', {text: 'head ' + h}));
  table.append(top);
  for (let l = 0; l < c.layers; l++) {
    const tr = el('tr', {}, el('th', {text: 'L' + l}));
    for (let h = 0; h < c.heads; h++) {
      const name = headName(c.prefix, l, h);
      const s = svg('svg', {class: 'head-panel', width: PANEL.w, height: PANEL.h, tabindex: 0,
                            role: 'button', 'data-name': name, 'data-layer': l,
                            'data-head': h, 'aria-label': 'head ' + name + ': show its map'});
      const label = svg('text', {x: 3, y: 11, class: 'name'});
      label.textContent = name;
      s.append(svg('rect', {x: 0.5, y: 0.5, width: PANEL.w - 1, height: PANEL.h - 1}),
               svg('path', {class: 'line'}), label, svg('text', {x: PANEL.w - 3, y: 11,
                                                                  class: 'last'}),
               svg('title'));
      const go = () => linkToMap(run, name);
      s.addEventListener('click', go);
      s.addEventListener('keydown', ev => {
        if (ev.key !== 'Enter' && ev.key !== ' ') return;
        ev.preventDefault();  // a space would scroll the page too
        go();
      });
      tr.append(el('td', {}, s));
    }
    table.append(tr);
  }
  box.replaceChildren(table);
  box.dataset.key = key;
}

// Each panel's line, last value and hover text, on the shared x (steps) and y ranges: 0..the
// column's bound (a share of attention: 1), else 0..the largest value (the entropy, nats). A
// score without a column (a record of another version) is taken as a share, as qkv report does.
function drawPanels(c, {steps, values}) {
  const column = headColumn(c.score) || {unit: 'share of attention', max: 1, decimals: 4};
  let top = 0;
  for (const v of values) for (const y of v) if (isFinite(y)) top = Math.max(top, y);
  const y0 = 0, y1 = column.max !== undefined ? column.max : Math.max(top, 1e-3);
  const x0 = Math.min(...steps), x1 = Math.max(...steps);
  const sx = x => 2 + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (PANEL.w - 4);
  const sy = y => PANEL.top + (1 - Math.max(0, Math.min(1, (y - y0) / (y1 - y0)))) *
                                  (PANEL.h - PANEL.top - 3);
  const word = scoreTitle(c.score);
  for (const s of document.querySelectorAll('#head-curves svg.head-panel')) {
    const k = Number(s.dataset.layer) * c.heads + Number(s.dataset.head);
    let d = '', pen = false, last = NaN, n = 0, lastStep = null;
    values[k].forEach((y, i) => {
      if (!isFinite(y)) { pen = false; return; }
      d += (pen ? ' L' : ' M') + sx(steps[i]).toFixed(1) + ' ' + sy(y).toFixed(1);
      pen = true, last = y, n++, lastStep = steps[i];
    });
    const path = s.querySelector('path');
    if (d) path.setAttribute('d', d.trim());
    else path.removeAttribute('d');  // no value logged yet
    s.dataset.points = n;
    s.dataset.value = isFinite(last) ? last : '';
    s.querySelector('text.last').textContent = isFinite(last) ? last.toFixed(2) : '';
    s.querySelector('title').textContent =
        'head ' + s.dataset.name + ': ' + word +
        (isFinite(last) ? ' ' + last.toFixed(column.decimals) + ' at step ' + lastStep
                        : ' not logged') +
        '; click: its attention map';
  }
  const box = document.getElementById('head-curves');
  Object.assign(box.dataset, {x0, x1, y0, y1});
  document.getElementById('head-curves-range').textContent =
      steps.length + ' probe record' + (steps.length === 1 ? '' : 's') + ', steps ' + x0 +
      ' to ' + x1 + '; every panel\u2019s y axis: ' +
      column.unit + ' from 0 to ' + fmt(y1);
}

// --- a panel's head in the attention grid --------------------------------------------------------

// Clicking a panel: that run becomes the one looked inside, and its head's map is marked (now
// if the grid shows that run's maps, else once an input is run).
function linkToMap(run, name) {
  // fresh: just clicked; toMap: its map not yet scrolled to
  state.linkedHead = {run, name, fresh: true, toMap: true};
  const sel = document.getElementById('run');
  if (sel.value !== run) {
    sel.value = run;
    fillCheckpoints();
    forgetOtherRun();
  }
  markLinkedMap();
}

// After each grid drawn (and each panel clicked): outlines the linked head's map, scrolled to
// once, or says what to do to see it. A grid drawn for another run ends the link.
function markLinkedMap() {
  const link = state.linkedHead, grid = document.getElementById('grid');
  const status = document.getElementById('map-link');
  for (const td of grid.querySelectorAll('td.linked')) td.classList.remove('linked');
  if (link && !link.fresh && grid.dataset.run && grid.dataset.run !== link.run)
    state.linkedHead = null;
  if (!state.linkedHead) {
    status.textContent = '';
    return;
  }
  const map = grid.dataset.run === link.run &&
              grid.querySelector('canvas.map[data-name="' + CSS.escape(link.name) + '"]');
  if (map) {
    map.parentElement.classList.add('linked');
    status.textContent = link.run + ': head ' + link.name + '\u2019s map is outlined (from ' +
                         'Heads while training)';
    if (link.toMap) map.scrollIntoView({block: 'center'});
    link.toMap = link.fresh = false;
    return;
  }
  const button = document.getElementById('go').textContent;
  status.textContent =
      (grid.dataset.run === link.run ? 'the grid has no map of head ' + link.name
       : (grid.dataset.run ? 'the maps below are ' + grid.dataset.run + '\u2019s'
                           : 'no attention maps yet') +
         ': type an input above and press ' + button + ' to see ' + link.run + '\u2019s head ' +
         link.name + ' (its map will be outlined)');
  if (link.fresh) {
    status.scrollIntoView({block: 'center'});
    document.getElementById('text').focus({preventScroll: true});
  }
  link.fresh = false;
}
