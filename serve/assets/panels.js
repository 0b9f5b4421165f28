// qkv serve's look-inside panels, beside app.js (which loads after this file and calls these):
// the heads removed from every answer (clicked in the attention grid), the head table's
// heatmaps and the logit lens with a target's direct logit attribution. Uses app.js's el(),
// api(), color(), fmt(), currentRun() and state at call time.
'use strict';

// --- heads removed (the "ablate" field of every question) ------------------------------------

// The --ablate name of a head: its attention site's head prefix (the server's "head_prefix":
// "cross.", or "" for a model's only site), then layer and head counted from 0.
function headName(prefix, layer, head) {
  return prefix + layer + '.' + head;
}

// An attention site's title as the model gives it, from a head table's "sites" ([{name,
// title}], inspect/site_json.hpp); a name not listed is its own title.
function siteTitle(sites, name) {
  const s = (sites || []).find(x => x && x.name === name);
  return s && typeof s.title === 'string' ? s.title : name;
}

function removedHeads() {
  return [...state.ablated].sort((a, b) => a.localeCompare(b, undefined, {numeric: true}));
}

function ablateSpec() {
  return removedHeads().join(',');
}

// Removes the heads, or puts them back when every one is removed already; then asks again.
function toggleHeads(names) {
  const back = names.every(n => state.ablated.has(n));
  for (const n of names) {
    if (back) state.ablated.delete(n);
    else state.ablated.add(n);
  }
  state.ablationRun = currentRun() && currentRun().name;
  showAblation();
  refresh();
}

function clearAblation() {
  if (!state.ablated.size) return;
  state.ablated.clear();
  showAblation();
  refresh();
}

// The "ablated:" line and the marks on the grid's maps.
function showAblation() {
  const list = removedHeads();
  document.getElementById('ablated').textContent = 'ablated: ' + (list.length ? list.join(', ')
                                                                              : 'none');
  document.getElementById('clear-ablation').disabled = list.length === 0;
  for (const c of document.querySelectorAll('canvas.map'))
    c.parentElement.classList.toggle('ablated', state.ablated.has(c.dataset.name));
}

// Another run has other heads: its answers start with none removed, and the panels of the
// run before are emptied.
function forgetOtherRun() {
  const run = currentRun();
  for (const id of ['heads', 'lens']) {
    const box = document.getElementById(id);
    if (box.dataset.run && run && box.dataset.run !== run.name) {
      box.replaceChildren();
      box.dataset.state = '';
      document.getElementById(id + '-status').textContent = '';
    }
  }
  if (run && state.ablationRun && run.name !== state.ablationRun) {
    state.ablated.clear();
    state.ablationRun = null;
    showAblation();
  }
}

// --- the head table ----------------------------------------------------------------------------

// The head table's columns are the server's (/api/head_columns, and "columns" in each table):
// its own measures, then the score registry's (interp/head_scores.hpp), each {name, title,
// unit, max (when bounded), decimals, attention, probe, description}. No score is named here.
function headColumn(name) {
  return state.headColumns.find(c => c.name === name);
}

// -1..1 as red (negative), white (0), blue (positive).
function signedColor(x) {
  if (x >= 0) return color(x);
  const t = Math.min(1, -x);
  return 'rgb(' + [255, 255 - 155 * t, 255 - 155 * t].map(Math.round).join(',') + ')';
}

async function scoreHeads() {
  const run = currentRun();
  const box = document.getElementById('heads'), status = document.getElementById('heads-status');
  if (!run) return;
  box.dataset.state = 'busy';
  const cut = ablateSpec();
  status.textContent = 'scoring every head' + (cut ? ' with ' + cut + ' removed' : '') + '...';
  try {
    const checkpoint = document.getElementById('checkpoint').value || 'best';
    const t = await api('/api/runs/' + encodeURIComponent(run.name) + '/heads',
                        {checkpoint, ablate: cut});
    renderHeads(t);
    box.dataset.run = run.name;
    status.textContent = run.name + (cut ? ' with ' + cut + ' removed' : '') + ': ' + t.split +
                         ' loss ' + t.loss.toFixed(4) + ' over ' + t.batches +
                         ' batches; pattern scores on repeated sequences of 2 \u00d7 ' +
                         t.probe_length + ' tokens. Hover a cell for its value.';
    box.dataset.state = 'done';
  } catch (e) {
    box.replaceChildren();
    status.textContent = e.message;
    box.dataset.state = 'error';
  }
}

function renderHeads(t) {
  const groups = new Map();
  for (const r of t.heads) {
    if (!groups.has(r.attention)) groups.set(r.attention, []);
    groups.get(r.attention).push(r);
  }
  const box = document.getElementById('heads');
  box.replaceChildren();
  for (const [attention, rows] of groups) {
    const maps = el('div', {class: 'heatmaps'});
    // the table's columns in its order; an attention has those of its kind
    for (const column of t.columns)
      if (rows[0][column.name] !== undefined) maps.append(heatmap(column, rows));
    box.append(el('div', {class: 'head-group', 'data-attention': attention},
                  el('h4', {text: siteTitle(t.sites, attention)}),
                  maps));
  }
}

// One column of one attention: layers as rows, heads as columns, each cell's value on hover
// (the caption's hover: what the column is). Labelled from 0 as --ablate names heads and `qkv
// report` labels them (L1, head 0: head 1.0).
function heatmap(column, rows) {
  const score = column.name;
  const layers = 1 + Math.max(...rows.map(r => r.layer));
  const heads = 1 + Math.max(...rows.map(r => r.index));
  const scale = Math.max(1e-12, ...rows.map(r => Math.abs(r[score])));
  const table = el('table', {class: 'heatmap', 'data-score': score});
  table.append(el('caption', {text: column.title,
                              title: column.description + ' (' + column.unit + ')'}));
  const top = el('tr', {}, el('th'));
  for (let h = 0; h < heads; h++) top.append(el('th', {text: 'head ' + h}));
  table.append(top);
  for (let l = 0; l < layers; l++) {
    const tr = el('tr', {}, el('th', {text: 'L' + l}));
    for (let h = 0; h < heads; h++) {
      const r = rows.find(x => x.layer === l && x.index === h);
      const v = r[score], x = v / scale;
      tr.append(el('td', {title: r.head + ' ' + score + ': ' + v.toFixed(column.decimals),
                          'data-value': v,
                          class: Math.abs(x) > 0.6 ? 'dark' : '',
                          style: 'background:' + signedColor(x)}, fmt(v)));
    }
    table.append(tr);
  }
  return table;
}

// --- the logit lens ------------------------------------------------------------------------------

// The lens of the current input and (with a target token) its direct logit attribution, from
// one request: a model the attribution does not apply to still shows its lens, with the
// attribution's error below it.
async function askLens() {
  const run = currentRun(), text = document.getElementById('text').value;
  const box = document.getElementById('lens'), status = document.getElementById('lens-status');
  if (!run || !text) return;
  const target = document.getElementById('target').value.trim();
  const body = {text, checkpoint: document.getElementById('checkpoint').value || 'best',
                ablate: ablateSpec(), top: 5};
  if (target) body.target = target;
  box.dataset.state = 'busy';
  box.dataset.run = run.name;
  status.textContent = '';
  try {
    const j = await api('/api/runs/' + encodeURIComponent(run.name) + '/lens', body);
    renderLens(j);
    if (j.attribution) renderAttribution(j.attribution);
    if (j.attribution_error) status.textContent = j.attribution_error;
  } catch (e) {
    box.replaceChildren();
    status.textContent = e.message;
    box.dataset.state = 'error';
    return;
  }
  box.dataset.state = 'done';
}

function renderLens(j) {
  const table = el('table', {class: 'lens'});
  table.append(el('caption', {text: 'after \u201c' + j.position + '\u201d the model predicts \u201c' +
                                    j.prediction + '\u201d; each layer read through the output'}));
  table.append(el('tr', {}, el('th', {text: 'layer'}), el('th', {text: 'rank'}),
                  el('th', {text: 'probability of \u201c' + j.prediction + '\u201d'}),
                  el('th', {text: 'top tokens'})));
  for (const l of j.layers) {
    const p = el('td', {}, el('span', {class: 'bar', style: 'width:' + Math.round(l.probability * 80) +
                                                            'px'}),
                 l.probability.toFixed(3));
    const tops = l.top.map(t => (t.token === ' ' ? '_' : t.token) + ' ' + t.probability.toFixed(3));
    table.append(el('tr', {'data-layer': l.layer}, el('td', {text: l.layer}),
                    el('td', {text: String(l.rank)}), p, el('td', {text: tops.join('   ')})));
  }
  document.getElementById('lens').replaceChildren(table);
}

// Each part's share of the target's logit as a bar left (negative) or right (positive) of 0.
function renderAttribution(a) {
  const scale = Math.max(1e-12, ...a.parts.map(p => Math.abs(p.logit)));
  const table = el('table', {class: 'attribution'});
  table.append(el('caption', {text: 'direct logit attribution of \u201c' + a.target +
                                    '\u201d (logit ' + a.logit.toFixed(3) + ')'}));
  for (const p of a.parts) {
    const w = Math.round(Math.abs(p.logit) / scale * 120) + 'px';
    const bar = cls => el('span', {class: 'bar ' + cls, style: 'width:' + w});
    table.append(el('tr', {'data-part': p.part}, el('td', {text: p.part}),
                    el('td', {class: 'neg'}, p.logit < 0 ? bar('minus') : ''),
                    el('td', {class: 'pos'}, p.logit >= 0 ? bar('plus') : ''),
                    el('td', {text: p.logit.toFixed(4)})));
  }
  document.getElementById('lens').append(table);
}
