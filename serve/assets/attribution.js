// qkv serve's "why this output" panels, beside app.js and panels.js (whose el(), api(), fmt(),
// signedColor(), siteTitle(), currentRun() and ablateSpec() it uses at call time):
// - token attribution: the input's output tokens (a translation, a language model's greedy
//   continuation, a classifier's class), each clickable; clicking one shades the input tokens
//   and the earlier output tokens by its scores (POST .../attribute: `qkv attribute --json`'s
//   numbers), with a "rather than" token for the contrastive logit difference;
// - attribution patching: the estimate of every head (layers x heads, one table per attention)
//   for a clean and a corrupted input (POST .../patch: `qkv patch --approx --json`), and a button
//   that patches the top K exactly (the heads, as `qkv patch` patches them, and the K largest
//   cells, as `qkv patch --approx --check K` does), with the correlations.
'use strict';

const attrState = {answer: null, row: -1};

function attrBase(run) {
  return '/api/runs/' + encodeURIComponent(run.name);
}

function attrCan(run, what) {
  return ((run && run.facts && run.facts.capabilities) || []).includes(what);
}

// The options that apply to the chosen run: a language model's count of scored tokens.
function attrShowOptions() {
  document.getElementById('attr-tokens-label').hidden = !attrCan(currentRun(), 'generate');
}

function attrTokenText(t) {
  return t === ' ' ? '_' : t;
}

// --- token attribution ---------------------------------------------------------------------

async function askAttribution() {
  const run = currentRun(), text = document.getElementById('text').value;
  const box = document.getElementById('attr'), status = document.getElementById('attr-status');
  if (!run) return;
  const num = id => Number(document.getElementById(id).value);
  const body = {text, checkpoint: document.getElementById('checkpoint').value || 'best',
                ablate: ablateSpec(), method: document.getElementById('attr-method').value,
                steps: num('attr-steps')};
  const contrast = document.getElementById('attr-contrast').value.trim();
  const target = document.getElementById('attr-target').value.trim();
  if (contrast) body.contrast = contrast;
  if (target) body.target = target;
  if (attrCan(run, 'generate')) body.tokens = num('attr-tokens');
  box.dataset.state = 'busy';
  box.dataset.run = run.name;
  status.textContent = body.method + ' of ' + run.name + '...';
  try {
    const a = await api(attrBase(run) + '/attribute', body);
    attrState.answer = a;
    renderAttributionTokens(a);
    status.textContent = 'Click an output token: the input tokens and the earlier output tokens ' +
                         'are shaded by its ' + a.method + (a.contrast === null ? '' :
                         ' (against \u201c' + a.contrast + '\u201d)') +
                         ', blue for positive, red for negative. Hover a token for its score.';
    box.dataset.state = 'done';
  } catch (e) {
    box.replaceChildren();
    status.textContent = e.message;
    box.dataset.state = 'error';
  }
}

function renderAttributionTokens(a) {
  const outs = el('div', {class: 'attr-line', id: 'attr-outputs'},
                  el('span', {class: 'label', text: attrCan(currentRun(), 'classify')
                                                   ? 'class: ' : 'output: '}));
  a.outputs.forEach((o, r) => {
    const s = el('span', {class: 'attr-out', 'data-row': r, tabindex: 0, role: 'button',
                          text: attrTokenText(o.token)});
    s.addEventListener('click', () => shadeRow(r));
    s.addEventListener('keydown', ev => { if (ev.key === 'Enter') shadeRow(r); });
    outs.append(s);
  });
  const input = el('div', {class: 'attr-line', id: 'attr-inputs'},
                   el('span', {class: 'label', text: 'input: '}));
  a.inputs.forEach((t, j) => input.append(el('span', {class: 'attr-tok', 'data-side': 'input',
                                                       'data-col': j, text: attrTokenText(t)})));
  const lines = [outs, input];
  if (a.context.length) {
    const ctx = el('div', {class: 'attr-line', id: 'attr-context'},
                   el('span', {class: 'label', text: 'earlier output: '}));
    a.context.forEach((t, j) => ctx.append(el('span', {class: 'attr-tok', 'data-side': 'context',
                                                       'data-col': j, text: attrTokenText(t)})));
    lines.push(ctx);
  }
  lines.push(el('div', {class: 'hint', id: 'attr-row'}));
  document.getElementById('attr').replaceChildren(...lines);
  attrState.row = -1;
  shadeRow(0);
}

// Row r's scores on the tokens, each shaded by its share of the row's largest |score|; context
// tokens the row does not read (at and after its own position) are greyed, without a value.
function shadeRow(r) {
  const a = attrState.answer;
  if (!a || !a.outputs[r]) return;
  const o = a.outputs[r];
  attrState.row = r;
  document.getElementById('attr').dataset.row = r;
  for (const s of document.querySelectorAll('#attr .attr-out'))
    s.classList.toggle('chosen', Number(s.dataset.row) === r);
  const scale = Math.max(1e-12, ...o.inputs.map(Math.abs), ...o.context.map(Math.abs));
  for (const s of document.querySelectorAll('#attr .attr-tok')) {
    const j = Number(s.dataset.col);
    const v = (s.dataset.side === 'input' ? o.inputs : o.context)[j];
    if (v === undefined) {
      s.removeAttribute('data-value');
      s.className = 'attr-tok unseen';
      s.title = 'not read by this output token';
      s.style.background = '';
      continue;
    }
    s.dataset.value = String(v);
    s.className = 'attr-tok' + (Math.abs(v) / scale > 0.6 ? ' dark' : '');
    s.style.background = signedColor(v / scale);
    s.title = a.method + ' of \u201c' + o.token + '\u201d: ' + v.toFixed(4);
  }
  let line = '\u201c' + o.token + '\u201d (output ' + (r + 1) + ' of ' + a.outputs.length + ')';
  if (o.completeness_error !== undefined)
    line += ': scores sum to ' + o.sum.toFixed(4) + ', f(input) - f(baseline) = ' +
            (o.value - o.baseline_value).toFixed(4) + ', completeness error ' +
            (100 * o.completeness_error).toFixed(2) + '%';
  document.getElementById('attr-row').textContent = line;
}

// --- attribution patching ------------------------------------------------------------------

async function askPatching(check) {
  const run = currentRun();
  const box = document.getElementById('patch'), status = document.getElementById('patch-status');
  if (!run) return;
  const cleanBox = document.getElementById('patch-clean');
  if (!cleanBox.value) cleanBox.value = document.getElementById('text').value;
  const body = {clean: cleanBox.value, corrupt: document.getElementById('patch-corrupt').value,
                checkpoint: document.getElementById('checkpoint').value || 'best',
                ablate: ablateSpec()};
  if (check) body.check = check;
  box.dataset.state = 'busy';
  box.dataset.run = run.name;
  status.textContent = check ? 'estimating, then patching the top ' + check + ' exactly...'
                             : 'estimating every head...';
  try {
    const j = await api(attrBase(run) + '/patch', body);
    renderPatching(j);
    status.textContent = 'clean answer \u201c' + j.clean_answer + '\u201d, corrupted \u201c' +
                         j.corrupt_answer + '\u201d; logit difference ' + j.clean_diff.toFixed(4) +
                         ' clean, ' + j.corrupt_diff.toFixed(4) + ' corrupted. Each cell: the ' +
                         'share of that difference patching the head would restore (1: all).';
    box.dataset.state = 'done';
  } catch (e) {
    box.replaceChildren();
    status.textContent = e.message;
    box.dataset.state = 'error';
  }
}

// One attention's heads, layers as rows and heads as columns (from 0, as --ablate names them),
// a cell per head in values (a name -> number map; a head without one is blank).
function patchHeatmap(title, kind, heads, values) {
  const layers = 1 + Math.max(...heads.map(h => h.layer));
  const count = 1 + Math.max(...heads.map(h => h.index));
  const shown = heads.filter(h => values.has(h.head)).map(h => Math.abs(values.get(h.head)));
  const scale = Math.max(1e-12, ...shown);
  const table = el('table', {class: 'heatmap', 'data-kind': kind});
  table.append(el('caption', {text: title}));
  const top = el('tr', {}, el('th'));
  for (let h = 0; h < count; h++) top.append(el('th', {text: 'head ' + h}));
  table.append(top);
  for (let l = 0; l < layers; l++) {
    const tr = el('tr', {}, el('th', {text: 'L' + l}));
    for (let h = 0; h < count; h++) {
      const head = heads.find(x => x.layer === l && x.index === h);
      if (!head || !values.has(head.head)) {
        tr.append(el('td', {class: 'blank', title: head ? head.head + ': not patched' : ''}));
        continue;
      }
      const v = values.get(head.head), x = v / scale;
      tr.append(el('td', {title: head.head + ' ' + kind + ': ' + v.toFixed(4),
                          'data-head': head.head, 'data-value': v,
                          class: Math.abs(x) > 0.6 ? 'dark' : '',
                          style: 'background:' + signedColor(x)}, fmt(v)));
    }
    table.append(tr);
  }
  return table;
}

function correlationText(c) {
  return c === null ? 'undefined (fewer than 2, or one column constant)' : c.toFixed(4);
}

function renderPatching(j) {
  const groups = new Map();
  for (const h of j.heads) {
    if (!groups.has(h.attention)) groups.set(h.attention, []);
    groups.get(h.attention).push(h);
  }
  const estimate = new Map(j.heads.map(h => [h.head, h.restored]));
  const exact = new Map(j.exact_heads ? j.exact_heads.heads.map(h => [h.head, h.exact]) : []);
  const box = document.getElementById('patch');
  box.replaceChildren();
  for (const [attention, heads] of groups) {
    const maps = el('div', {class: 'heatmaps'},
                    patchHeatmap('estimate', 'estimate', heads, estimate));
    if (j.exact_heads) maps.append(patchHeatmap('exact', 'exact', heads, exact));
    box.append(el('div', {class: 'head-group', 'data-attention': attention},
                  el('h4', {text: siteTitle(j.sites, attention)}), maps));
  }
  if (!j.exact_heads) return;
  box.append(el('p', {class: 'hint', id: 'patch-heads-correlation',
                      'data-correlation': String(j.exact_heads.correlation),
                      text: 'the top ' + j.exact_heads.k + ' heads by |estimate|, patched ' +
                            'exactly: correlation of estimate and exact ' +
                            correlationText(j.exact_heads.correlation)}));
  const table = el('table', {class: 'next', id: 'patch-check'});
  table.append(el('caption', {text: 'the ' + j.check.k + ' largest estimates of single cells ' +
                                    '(a head at one position, the residual stream at one ' +
                                    'position), patched exactly; correlation ' +
                                    correlationText(j.check.correlation)}));
  table.append(el('tr', {}, ...['cell', 'position', 'estimate', 'exact'].map(t => el('th', {text: t}))));
  for (const c of j.check.cells)
    table.append(el('tr', {'data-name': c.name, 'data-position': c.position,
                           'data-estimate': c.estimate, 'data-exact': c.exact},
                    el('td', {text: c.name}), el('td', {text: c.position + ' ' + c.label}),
                    el('td', {text: c.estimate.toFixed(4)}), el('td', {text: c.exact.toFixed(4)})));
  box.append(table);
}

// --- wiring ----------------------------------------------------------------------------------

// Another run: its own options, and the panels of the run before emptied.
function attrForgetOtherRun() {
  attrShowOptions();
  const run = currentRun();
  for (const id of ['attr', 'patch']) {
    const box = document.getElementById(id);
    if (box.dataset.run && run && box.dataset.run !== run.name) {
      box.replaceChildren();
      box.dataset.state = '';
      document.getElementById(id + '-status').textContent = '';
    }
  }
}

document.getElementById('attr-go').addEventListener('click', askAttribution);
document.getElementById('patch-go').addEventListener('click', () => askPatching(0));
document.getElementById('patch-exact').addEventListener('click', () => {
  askPatching(Math.max(1, Number(document.getElementById('patch-k').value) || 1));
});
document.getElementById('run').addEventListener('change', attrForgetOtherRun);
// The run list arrives after this file runs: the options follow it once it is there.
new MutationObserver(attrShowOptions).observe(document.getElementById('run'), {childList: true});
