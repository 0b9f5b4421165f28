#!/usr/bin/env python3
"""qkv serve in a real browser: headless Chromium, driven through its DevTools protocol.

Trains a short copy run and a tiny character LM and first serves those two alone: with no probe
records yet the page says how to log them. Then keeps a third copy run training (its heads
probed every 10 steps), runs a short qkv saturation, serves the four folders (serve_fixture.py)
and opens the page in headless Chromium (a fresh profile, no network but the server). For the
copy run it types an input, presses Decode and waits for the grid; for the LM it types a prompt,
presses Sample and waits for the streamed sample. Each time it checks that the grid has layers x
heads maps of every kind, that every map's rows sum to 1 (and the LM's maps are causal), that
the output text appears and is what `qkv translate` / `qkv generate` print, and that hovering a
cell and a map's enlarge button work; for the copy run it also picks an earlier checkpoint in
the selector and checks that it answers as `qkv translate --checkpoint` does. Clicking a head's
map (and a layer's label) removes those heads: the outputs become `qkv translate --ablate`'s,
the maps are marked, and clear restores the first answer. The heads panel's heatmaps hold `qkv
heads --json`'s numbers, one per column of the server's list (GET /api/head_columns: the score
registry's) that an attention has, in its order, with its title and description, and a column
the page has never seen in an answer is drawn too; the lens panel's table has `qkv lens --json`'s ranks, and with a
target token the attribution's bars. It checks that the training curve of the live run gains
points while the page is open, and that the live run's per-head grid in "Heads while training"
(its 1 + 1 layers x 2 heads, chosen in the run selector) holds the numbers of the probe records
its training wrote (read from its metrics.jsonl on disk, as many as the panels have points) and
gains points in place as the training writes more. It appends probe records (a [probe]
training's lines, made-up numbers of the runs' layers and heads) to the LM's and the copy run's
metrics.jsonl while the page is open (every score the server's list says a probe records) and
checks the per-head grid of "Heads while training" for 2 x 2 layouts of every attention (layers x heads panels named as --ablate names heads, holding
the appended numbers, growing in place), the icl curve, and that a panel's click outlines its
head's map; that no console message, script error or failed load is reported (an injected
error must be caught, so the listener is known to work), and saves screenshots that must not be
blank.

Usage: serve_browser_test.py QKV_BINARY SOURCE_DIR [--screenshot FILE.png] [--keep DIR]
Exit 0: passed; 1: failed; 77: skipped (no chromium or no python3-websocket).
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402

SKIP = 77
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-proxy-server", "--hide-scrollbars", "--remote-debugging-port=0",
         "--window-size=1280,1800"]
failures = []


def check(ok, what):
    print(("  ok: " if ok else "  FAILED: ") + what)
    if not ok:
        failures.append(what)


class Browser:
    """One Chromium with one page, spoken to over the DevTools websocket."""

    def __init__(self, chromium, profile):
        import websocket
        self.proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.stderr = []
        url = None
        deadline = time.time() + 60
        while time.time() < deadline and url is None:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr.append(line)
            if line.startswith("DevTools listening on "):
                url = line.split(" ", 3)[3].strip()
        if url is None:
            raise SystemExit("FAILED: chromium gave no DevTools address: " + "".join(self.stderr))
        threading.Thread(target=self._drain, daemon=True).start()
        browser = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.ws, self.next_id, self.events = browser, 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.session = session
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def call(self, method, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if getattr(self, "session", None) and not method.startswith("Target."):
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            r = json.loads(self.ws.recv())
            if r.get("id") == self.next_id:
                if "error" in r:
                    raise RuntimeError(f"{method}: {r['error']}")
                return r.get("result", {})
            if "method" in r:
                self.events.append(r)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, seconds=60, what=""):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.js(expr):
                return True
            time.sleep(0.2)
        check(False, f"waited {seconds} s for {what or expr}")
        return False

    def problems(self):
        """Console messages, script errors and failed loads reported so far."""
        self.js("1")  # collects the events that arrived meanwhile
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                out.append(f"console.{p['type']}: " +
                           " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append("exception: " + d.get("exception", {}).get("description", d["text"]))
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']} {p['entry'].get('url', '')}")
        return out

    def screenshot(self, path, clip=None):
        """The whole page, or clip {x, y, width, height} of it (CSS pixels from its top left)."""
        extra = {"clip": {**clip, "scale": 1}} if clip else {}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         **extra)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))

    def type_into(self, selector, text):
        self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = '';"
                f" e.focus(); }})()")
        self.call("Input.insertText", text=text)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        fx.stop(self.proc)


# Every map on the page: its kind, layer, head, shape, the largest row-sum error and, for a
# causal map, the largest weight above the diagonal.
MAPS = """(() => [...document.querySelectorAll('canvas.map')].map(c => {
  const r = Number(c.dataset.rows), k = Number(c.dataset.cols), w = c.weights;
  let err = 0, future = 0;
  for (let i = 0; i < r; i++) {
    let s = 0;
    for (let j = 0; j < k; j++) { s += w[i * k + j]; if (j > i) future = Math.max(future, w[i * k + j]); }
    err = Math.max(err, Math.abs(s - 1));
  }
  const drawn = c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some(v => v < 250);
  return {kind: c.dataset.kind, layer: Number(c.dataset.layer), head: Number(c.dataset.head),
          rows: r, cols: k, n: w.length, err, future, drawn, width: c.getBoundingClientRect().width};
}))()"""


def check_grid(b, want, what):
    maps = b.js(MAPS)
    for kind, (layers, heads) in want.items():
        mine = [m for m in maps if m["kind"] == kind]
        cells = sorted((m["layer"], m["head"]) for m in mine)
        check(cells == [(l, h) for l in range(1, layers + 1) for h in range(1, heads + 1)],
              f"{what}: {kind}: {layers} layers x {heads} heads of maps ({len(mine)})")
        check(mine and all(m["err"] < 2e-3 and m["n"] == m["rows"] * m["cols"] and m["drawn"]
                           and m["width"] > 0 for m in mine),
              f"{what}: {kind}: every map drawn, its rows summing to 1 "
              f"(largest error {max((m['err'] for m in mine), default=None)})")
    check(len(maps) == sum(l * h for l, h in want.values()), f"{what}: no other maps ({len(maps)})")
    return maps


def center(b, selector):
    """The middle of the element, scrolled into view, in the viewport's pixels."""
    return b.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                " return [r.left + r.width / 2, r.top + r.height / 2]; })()")


def click(b, x, y):
    for kind in ("mousePressed", "mouseReleased"):
        b.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def hover_and_enlarge(b):
    # The middle of the first cell (below and right of the token labels).
    box = b.js("(() => { const c = document.querySelector('canvas.map'), g = c.grid;"
               " c.scrollIntoView({block: 'center'});"
               " const r = c.getBoundingClientRect(), s = r.width / c.width;"
               " return [r.left + (g.left + g.cell / 2) * s, r.top + (g.top + g.cell / 2) * s]; })()")
    b.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0], y=box[1])
    tip = b.js("(() => { const t = document.getElementById('tip'); return t.hidden ? '' : t.textContent; })()")
    check("\u2192" in tip and "layer 1, head 1" in tip, f"hovering a cell shows the tokens and the weight ({tip!r})")
    click(b, *center(b, "button.enlarge"))
    big = b.js("(() => !document.getElementById('zoom').hidden && document.getElementById('zoom-canvas').width)()")
    check(bool(big) and big > 100, f"a map's enlarge button enlarges it ({big} px wide)")
    b.js("document.getElementById('zoom').click()")
    check(b.js("document.querySelectorAll('td.ablated').length") == 0,
          "enlarging a map removes no head")


OUTPUTS = "[document.getElementById('greedy').textContent, document.getElementById('beamed').textContent]"


def answered(b, spec):
    """Waits for the page's answer with the heads spec removed; its (greedy, beam) outputs."""
    b.wait(f"document.body.dataset.busy === 'false' && document.getElementById('output')"
           f".dataset.ablate === {json.dumps(spec)}", 60, f"the answer without {spec or 'none'}")
    return b.js(OUTPUTS)


def ablate_in_grid(b, qkv, copy, text, head, layer_label):
    """Clicking the map of head (a cross-attention head: its output changes) removes it from the
    answers; clicking a layer's label removes that layer's heads; clear restores the first."""
    first = b.js(OUTPUTS)
    selector = f"canvas.map[data-name='{head}']"
    click(b, *center(b, selector))
    got = answered(b, head)
    cli = [fx.run([qkv, "translate", copy, text, "--ablate", head, *beam]).stdout.strip()
           for beam in ([], ["--beam", "4"])]
    check(got == cli and got != first,
          f"clicking {head}'s map: the outputs become qkv translate --ablate {head}'s "
          f"({first} -> {got}, cli {cli})")
    marked = b.js("[...document.querySelectorAll('td.ablated canvas')].map(c => c.dataset.name)")
    line = b.js("document.getElementById('ablated').textContent")
    check(marked == [head] and line == f"ablated: {head}",
          f"the removed head is marked and listed ({marked}, {line!r})")
    kind, layer = layer_label
    label = (f"div.kind[data-kind='{kind}'] tr:nth-child({layer + 2}) th.layer-label")
    click(b, *center(b, label))
    names = b.js(f"[...document.querySelectorAll(\"canvas.map[data-kind='{kind}']"
                 f"[data-layer='{layer + 1}']\")].map(c => c.dataset.name)")
    spec = ",".join(sorted({head, *names}))
    got = answered(b, spec)
    cli = fx.run([qkv, "translate", copy, text, "--ablate", spec]).stdout.strip()
    check(len(names) == 2 and got[0] == cli,
          f"clicking {kind} layer {layer + 1}'s label removes its heads {names}: "
          f"qkv translate --ablate {spec}'s output ({got[0]!r})")
    click(b, *center(b, "#clear-ablation"))
    got = answered(b, "")
    check(got == first and b.js("document.querySelectorAll('td.ablated').length") == 0
          and b.js("document.getElementById('ablated').textContent") == "ablated: none",
          f"clear restores the first answer and the marks ({got})")


def heads_panel(b, qkv, copy, columns):
    """The heads panel: qkv heads --json's numbers, a heatmap per column of the server's list
    (the score registry's) that an attention's rows have, in its order, with its words; and a
    column the page has never seen, drawn as well (the page names no score itself)."""
    click(b, *center(b, "#score-heads"))
    b.wait("['done', 'error'].includes(document.getElementById('heads').dataset.state)", 120,
           "the head table")
    status = b.js("document.getElementById('heads-status').textContent")
    cells = b.js("[...document.querySelectorAll('table.heatmap')].map(t => [t.closest('.head-group')"
                 ".dataset.attention, t.dataset.score, [...t.querySelectorAll('td')].map(td =>"
                 " [td.title, Number(td.dataset.value)])])")
    cli = json.loads(fx.run([qkv, "heads", copy, "--json", "--threads", "1"]).stdout)
    want = {(r["attention"], k): [] for r in cli["heads"] for k in r
            if k not in ("attention", "head", "layer", "index")}
    for r in cli["heads"]:  # layer by layer, head by head: the cells' order
        for k, v in r.items():
            if (r["attention"], k) in want:
                want[(r["attention"], k)].append((f"{r['head']} {k}", v))
    mine = {(a, k): [(t.rsplit(":", 1)[0], v) for t, v in c] for a, k, c in cells}
    check(len(cells) == 19 and mine == want,
          f"heads: 19 heatmaps (2 x 2 cells) of qkv heads --json's numbers ({len(cells)}; {status!r})")
    titles = b.js("[...document.querySelectorAll('table.heatmap td')].slice(0, 2).map(t => t.title)")
    check(all(":" in t for t in titles), f"heads: each cell's value on hover ({titles})")
    groups = b.js("[...document.querySelectorAll('#heads .head-group h4')].map(h => h.textContent)")
    check(groups == ["encoder self-attention", "decoder self-attention", "cross-attention"],
          f"heads: each attention titled as qkv report titles it ({groups})")
    labels = b.js("[...document.querySelectorAll('table.heatmap')].map(t =>"
                  " [...t.querySelectorAll('th')].map(th => th.textContent).join('|'))")
    check(labels and all(x == "|head 0|head 1|L0|L1" for x in labels),
          f"heads: rows L0, L1 and columns head 0, head 1, counted from 0 as --ablate ({labels[:1]})")
    shown = b.js(HEATMAP_COLUMNS)
    want = {a: [[c["name"], c["title"], c["description"] + " (" + c["unit"] + ")"]
                for c in columns if c["name"] in rows[0]]
            for a, rows in group_rows(cli["heads"]).items()}
    check(shown == want and {"encoder", "decoder", "cross"} == set(want),
          f"heads: each attention's heatmaps are the server's columns its rows have, in order, "
          f"titled and described as it says ({shown})")
    # A column the page has never heard of, in the answer the page draws: a heatmap of it too,
    # first as the answer lists it, in its format (a score added to the registry shows so).
    made_up = {"name": "made_up_score", "title": "made-up score", "unit": "nats", "decimals": 2,
               "attention": "any", "probe": True, "description": "a score no file of the page names"}
    rows = [dict(r, made_up_score=0.125 * r["index"] + r["layer"]) for r in cli["heads"]]
    table = {**cli, "columns": [made_up] + columns, "heads": rows}
    b.js(f"renderHeads({json.dumps(table)})")
    shown = b.js(HEATMAP_COLUMNS)
    hover = b.js("(document.querySelector('table.heatmap[data-score=made_up_score] td') || {}).title")
    check(all(cs[0] == ["made_up_score", "made-up score", made_up["description"] + " (nats)"]
              and cs[1:] == want[a] for a, cs in shown.items()) and set(shown) == set(want)
          and hover == "encoder.0.0 made_up_score: 0.00",
          f"heads: a column the page never saw is drawn first in every attention, in its format "
          f"({hover!r}; {[cs[0] for cs in shown.values()]})")
    b.js(f"renderHeads({json.dumps(cli)})")  # the real table again (the same numbers)
    check(b.js(HEATMAP_COLUMNS) == want, "heads: the real table drawn again")


# Each attention's heatmaps: [name, caption, caption's hover] in the panel's order.
HEATMAP_COLUMNS = """(() => { const out = {};
  for (const g of document.querySelectorAll('#heads .head-group'))
    out[g.dataset.attention] = [...g.querySelectorAll('table.heatmap')].map(t =>
        [t.dataset.score, t.querySelector('caption').textContent,
         t.querySelector('caption').title]);
  return out; })()"""


def group_rows(heads):
    """The head table's rows by attention, in their order."""
    out = {}
    for r in heads:
        out.setdefault(r["attention"], []).append(r)
    return out


def lens_panel(b, qkv, run, text, target):
    rows = b.js("[...document.querySelectorAll('#lens table.lens tr[data-layer]')].map(r =>"
                " [r.dataset.layer, Number(r.children[1].textContent)])")
    cli = json.loads(fx.run([qkv, "lens", run, text, "--json", "--target", target]).stdout)
    check(rows == [[l["layer"], l["rank"]] for l in cli["layers"]],
          f"lens: a row per layer with qkv lens's ranks ({rows})")
    parts = b.js("[...document.querySelectorAll('#lens table.attribution tr[data-part]')].map(r =>"
                 " r.dataset.part)")
    bars = b.js("document.querySelectorAll('#lens table.attribution .bar').length")
    check(parts == [p["part"] for p in cli["attribution"]["parts"]] and bars == len(parts),
          f"lens: a bar per part of {target!r}'s logit ({parts})")


def points(b, run):
    return b.js(f"(() => {{ const p = document.querySelector('#chart-train-loss polyline[data-run=\"{run}\"]');"
                " return p ? p.points.numberOfItems : 0; })()")


def ask(b, run, text, extra_js=""):
    b.js(f"(() => {{ const s = document.getElementById('run'); s.value = {json.dumps(run)};"
         f" s.dispatchEvent(new Event('change')); {extra_js} }})()")
    b.type_into("#text", text)
    b.js("document.getElementById('go').click()")
    b.wait("document.body.dataset.busy === 'false' && document.querySelector('canvas.map') !== null",
           120, f"the answer for {run}")
    err = b.js("document.getElementById('error').textContent")
    check(err == "", f"{run}: no error shown ({err!r})")


def png_ok(path):
    with open(path, "rb") as f:
        data = f.read()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30000, len(data)


# --- heads while training: probe records appended to a served run's metrics.jsonl -------------

# The head table's columns as the server lists them (GET /api/head_columns: the score
# registry's, interp/head_scores.hpp), read once the server runs. The probe records below carry
# every score it names, so a score added to the registry is checked on the page too.
COLUMNS = []


def column(name):
    return next(c for c in COLUMNS if c["name"] == name)


def probed(attention):
    """The scores a [probe] training records for an attention of this kind, in order."""
    return [c["name"] for c in COLUMNS
            if c["probe"] and c["attention"] in ("any", "cross" if attention == "cross" else "self")]


def probe_scores(step, names, salt):
    """A 2 x 2 grid of made-up values for each score name (within its bound, else up to 2: the
    entropy's nats), different at every step, layer and head."""
    out = {}
    for k, name in enumerate(names):
        scale = column(name).get("max", 2.0)
        out[name] = [[round(scale * ((step * 7 + l * 13 + h * 5 + k * 3 + salt) % 97) / 97, 4)
                      for h in range(2)] for l in range(2)]
    return out


def lm_probe(step):
    """A probe record as a training of a 2-layer, 2-head language model logs it."""
    return {"step": step, "probe": {"seconds": 0.01, "icl": round(-0.01 * step, 4),
                                    "attentions": {"self": {"layers": 2, "heads": 2,
                                                            **probe_scores(step, probed("self"),
                                                                           0)}},
                                    "sites": [{"name": "self", "title": "causal self-attention"}]}}


def copy_probe(step):
    """... and as a training of the 2 + 2 layer encoder-decoder logs it (no icl)."""
    # the attentions' keys sorted, as the training writes them; "sites" gives the model's order
    atts = {a: {"layers": 2, "heads": 2, **probe_scores(step, probed(a), salt)}
            for a, salt in (("cross", 3), ("decoder", 2), ("encoder", 1))}
    sites = [{"name": "encoder", "title": "encoder self-attention"},
             {"name": "decoder", "title": "decoder self-attention"},
             {"name": "cross", "title": "cross-attention"}]
    return {"step": step, "probe": {"seconds": 0.02, "attentions": atts, "sites": sites}}


def append_lines(path, records):
    """What a training does: whole JSON lines added to the end of the log."""
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


PANELS = """(() => { const box = document.getElementById('head-curves');
  return {y0: Number(box.dataset.y0), y1: Number(box.dataset.y1),
          panels: [...box.querySelectorAll('svg.head-panel')].map(s => ({
            name: s.dataset.name, layer: Number(s.dataset.layer), head: Number(s.dataset.head),
            points: Number(s.dataset.points), value: Number(s.dataset.value),
            corner: s.querySelector('text.last').textContent,
            hover: s.querySelector('title').textContent, d: s.querySelector('path').getAttribute('d'),
            kept: s.kept === true}))}; })()"""


def drawn_values(d, y0, y1):
    """The values a panel's line was drawn at, read back from its path (the page's geometry:
    a 56 px panel, the line between y 14 and 53)."""
    ys = [float(t) for t in d.replace("M", " ").replace("L", " ").split()][1::2]
    return [y0 + (1 - (y - 14) / 39) * (y1 - y0) for y in ys]


def check_panels(b, records, attention, score, prefix, what, got=None):
    """Every head's panel (got: the PANELS read, else read now): named as --ablate names it, its
    line through the records' values, its last value in the corner and on hover; the shared y
    range."""
    got = got or b.js(PANELS)
    panels = got["panels"]
    cells = sorted((p["layer"], p["head"], p["name"]) for p in panels)
    grid = records[0]["probe"]["attentions"][attention]
    layers, heads = grid["layers"], grid["heads"]
    check(cells == [(l, h, f"{prefix}{l}.{h}") for l in range(layers) for h in range(heads)],
          f"{what}: {layers} layers x {heads} heads of panels named {prefix}L.H ({cells})")
    labels = b.js("[...document.querySelectorAll('#head-curves table.head-curves th')]"
                  ".map(t => t.textContent)")
    check(labels == [""] + [f"head {h}" for h in range(heads)] + [f"L{l}" for l in range(layers)],
          f"{what}: rows and columns labelled from 0 as qkv report labels them ({labels})")
    top = max(v for r in records for row in r["probe"]["attentions"][attention][score] for v in row)
    want_y1 = column(score).get("max", max(top, 1e-3))
    digits = column(score)["decimals"]
    check(got["y0"] == 0 and abs(got["y1"] - want_y1) < 1e-12,
          f"{what}: every panel on the y range 0..{want_y1} ({got['y0']}..{got['y1']})")
    bad = []
    for p in panels:
        want = [r["probe"]["attentions"][attention][score][p["layer"]][p["head"]]
                for r in records]
        drawn = drawn_values(p["d"], got["y0"], got["y1"])
        if (p["points"] != len(want) or len(drawn) != len(want) or p["value"] != want[-1]
                or p["corner"] != f"{want[-1]:.2f}" or f"{want[-1]:.{digits}f}" not in p["hover"]
                or any(abs(a - w) > 0.003 * want_y1 for a, w in zip(drawn, want))):
            bad.append((p["name"], p["points"], p["corner"], p["hover"],
                        f"{len(want)} values ending {want[-3:]}"))
    check(not bad, f"{what}: each panel's line, corner and hover hold the {len(records)} "
          f"records' values ({bad or 'all ' + str(len(panels))})")
    return panels


def choose(b, selector, value):
    b.js(f"(() => {{ const s = document.querySelector({json.dumps(selector)});"
         f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()")


def in_view(b, selector):
    return b.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                " if (!e) return false; const r = e.getBoundingClientRect();"
                " return r.top >= 0 && r.bottom <= innerHeight; })()")


LINKED = "[...document.querySelectorAll('#grid td.linked canvas.map')].map(c => c.dataset.name)"

# The live run's training probes its heads every 10 steps (a probe of its 1 + 1 layer model
# takes about a third of the time of those 10 steps).
LIVE_PROBE = ["--probe.every", "10"]


def probe_records(run):
    """The probe records the training has written to the run's metrics.jsonl so far (whole
    lines only: the last may be half written)."""
    with open(os.path.join(run, "metrics.jsonl")) as f:
        lines = f.read().split("\n")[:-1]
    return [r for r in map(json.loads, lines) if "probe" in r]


def check_live_panels(b, live, attention, score, prefix, what):
    """The panels shown, then the log read from disk (so it holds every record the page has):
    the panels must hold the first records, as many as they have points. Returns that count."""
    got = b.js(PANELS)
    records = probe_records(live)
    n = got["panels"][0]["points"] if got["panels"] else 0
    check(0 < n <= len(records), f"{what}: the page shows {n} of the {len(records)} probe "
          "records written so far")
    if n > 0 and records:
        check_panels(b, records[:n], attention, score, prefix, what, got)
    return n


def every_choice():
    """An encoder-decoder's choices: its attentions in the order of the record's sites (from
    input to output), each with the scores the probe records for it, in the server's order."""
    return [f"{a}/{s}" for a in ("encoder", "decoder", "cross") for s in probed(a)]


def live_heads_while_training(b, live):
    """The live run's own probe records, written by its training while the page is open: the
    per-head grid of its layers and heads holds the logged numbers and gains points in place."""
    b.wait("[...document.getElementById('hc-run').options].some(o => o.value === 'live')", 30,
           "live among the runs with probe records")
    choose(b, "#hc-run", "live")
    check(b.js("document.getElementById('head-curves-off').hidden &&"
               " !document.getElementById('head-curves-on').hidden"),
          "live: with probe records the section is shown, the line about [probe] hidden")
    options = b.js("[...document.getElementById('hc-score').options].map(o => o.value)")
    check(options == every_choice(), f"live: every attention's scores ({options})")
    choose(b, "#hc-score", "decoder/previous_token")
    before = check_live_panels(b, live, "decoder", "previous_token", "decoder.",
                               "live, decoder previous token")
    b.js("document.querySelectorAll('#head-curves svg.head-panel').forEach(s => s.kept = true)")
    deadline = time.time() + 60
    while len(probe_records(live)) < before + 3 and time.time() < deadline:
        time.sleep(0.2)
    b.wait(f"[...document.querySelectorAll('#head-curves svg.head-panel')]"
           f".every(s => Number(s.dataset.points) >= {before + 3})", 60,
           "the live panels to gain the training's new probe records")
    after = check_live_panels(b, live, "decoder", "previous_token", "decoder.",
                              "live, decoder previous token, later")
    kept = b.js("[...document.querySelectorAll('#head-curves svg.head-panel')].every(s => s.kept)")
    check(after >= before + 3 and kept,
          f"live: the panels grew in place from {before} to {after} points as the training probed")
    choose(b, "#hc-score", "cross/entropy")
    check_live_panels(b, live, "cross", "entropy", "cross.", "live, cross entropy")


def heads_while_training(b, copy, lm):
    """Probe records appended to the LM's log while the page is open: the per-head grid
    appears, grows without being rebuilt, holds the numbers; a panel's click outlines its
    head's map. Then the encoder-decoder's attentions, linked before its maps are drawn."""
    log = os.path.join(lm, "metrics.jsonl")
    first = [lm_probe(s) for s in (20, 40, 60)]
    append_lines(log, first)
    b.wait("[...document.getElementById('hc-run').options].some(o => o.value === 'lm')", 30,
           "lm among the runs with probe records")
    choose(b, "#hc-run", "lm")
    b.wait("document.querySelectorAll('#head-curves svg.head-panel').length === 4", 30,
           "the LM's per-head grid")
    options = b.js("[...document.getElementById('hc-score').options].map(o => o.textContent)")
    titles = [column(s)["title"] for s in probed("self")]
    check(options == ["causal self-attention: " + t for t in titles] and
          titles[:4] == ["entropy", "previous token", "duplicate token", "induction"],
          f"lm: the section shows the run's attention and scores, titled as the server says "
          f"({options})")
    choose(b, "#hc-score", "self/induction")
    check_panels(b, first, "self", "induction", "", "lm, 3 probes")
    b.js("document.querySelectorAll('#head-curves svg.head-panel').forEach(s => s.kept = true)")
    more = [lm_probe(s) for s in (80, 100)]
    append_lines(log, more)
    b.wait("[...document.querySelectorAll('#head-curves svg.head-panel')]"
           ".every(s => s.dataset.points === '5')", 30, "the panels to gain the new points")
    panels = check_panels(b, first + more, "self", "induction", "", "lm, 5 probes")
    check(all(p["kept"] for p in panels), "lm: the panels grew in place (the grid was not rebuilt)")
    icl = b.js("(() => { const p = document.querySelector('#chart-icl polyline[data-run=\"lm\"]');"
               " return p ? p.points.numberOfItems : 0; })()")
    check(icl == 5 and not b.js("document.getElementById('chart-icl').hidden"),
          f"lm: the in-context learning score joins the curves ({icl} points)")
    choose(b, "#hc-score", "self/entropy")
    check_panels(b, first + more, "self", "entropy", "", "lm, entropy")

    # The LM's maps are in the grid (the last input asked): a click outlines head 1.0's map.
    click(b, *center(b, "#head-curves svg.head-panel[data-name='1.0']"))
    b.wait(f"{LINKED}.length === 1", 10, "the clicked head's map outlined")
    check(b.js(LINKED) == ["1.0"] and in_view(b, "#grid td.linked"),
          f"lm: clicking panel 1.0 outlines map 1.0 and scrolls to it ({b.js(LINKED)})")

    # The encoder-decoder: its three attentions, named encoder./decoder./cross.L.H.
    copy_records = [copy_probe(s) for s in (50, 100)]
    append_lines(os.path.join(copy, "metrics.jsonl"), copy_records)
    b.wait("[...document.getElementById('hc-run').options].some(o => o.value === 'copy')", 30,
           "copy among the runs with probe records")
    choose(b, "#hc-run", "copy")
    options = b.js("[...document.getElementById('hc-score').options].map(o => o.value)")
    check(options == every_choice(), f"copy: every attention's scores ({options})")
    choose(b, "#hc-score", "cross/alignment")
    check_panels(b, copy_records, "cross", "alignment", "cross.", "copy, cross alignment")
    choose(b, "#hc-score", "decoder/induction")
    check_panels(b, copy_records, "decoder", "induction", "decoder.", "copy, decoder induction")
    choose(b, "#hc-score", "cross/alignment")
    click(b, *center(b, "#head-curves svg.head-panel[data-name='cross.0.1']"))
    status = b.js("document.getElementById('map-link').textContent")
    check(b.js(LINKED) == [] and "lm\u2019s" in status and "Decode" in status and
          b.js("document.getElementById('run').value") == "copy",
          f"copy: with the LM's maps shown, the click says to decode first ({status!r})")
    ask(b, "copy", "3 1 4 1 5", "document.getElementById('target').value = '';")
    check(b.js(LINKED) == ["cross.0.1"] and in_view(b, "#grid td.linked"),
          f"copy: once decoded, map cross.0.1 is outlined and in view ({b.js(LINKED)})")


def main():
    args = sys.argv[1:]
    opts = {}
    for key in ("--screenshot", "--keep"):
        if key in args:
            i = args.index(key)
            opts[key] = os.path.abspath(args[i + 1])
            del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(args[0]), os.path.abspath(args[1])
    chromium = fx.chromium_for_pages()
    if not chromium:
        print("SKIPPED: needs chromium and python3-websocket (scripts/install-deps.sh)")
        return SKIP
    work = opts.get("--keep") or tempfile.mkdtemp(prefix="qkv_serve_browser_")
    os.makedirs(work, exist_ok=True)
    live = server = first_server = b = None
    try:
        copy, lm = fx.train_runs(qkv, source, work)
        sat = os.path.join(work, "saturation")
        fx.run([qkv, "saturation", "--out", sat, "--d-k", "4,16,64", "--samples", "500",
                "--rows", "50", "--batch", "2", "--train-steps", "0", "--threads", "1"])
        b = Browser(chromium, tempfile.mkdtemp(prefix="profile_", dir=work))
        # Before any run has probe records (the live run probes from its step 0): the page of
        # the two finished runs says how to log them.
        server = fx.Server(qkv, [copy, lm])
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true'", 60, "the page to load")
        off = b.js("document.getElementById('head-curves-off').hidden ? ''"
                   " : document.getElementById('head-curves-off').textContent")
        check("[probe]" in off and b.js("document.getElementById('head-curves-on').hidden"),
              f"no run has probe records: one line says how to log them ({off[:60]!r})")
        first_server = server
        live, live_dir = fx.start_live(qkv, source, work, LIVE_PROBE)
        server = fx.Server(qkv, [copy, lm, live_dir, sat])
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true' &&"
               " document.querySelector('.run-card[data-run=\"live\"]') !== null", 60,
               "the page of the four runs to load")
        first_server.stop()  # once its page is gone (its polls would fail)
        code, answer, _ = server.get("/api/head_columns")
        COLUMNS[:] = answer["columns"] if code == 200 else []
        check(code == 200 and len(COLUMNS) >= 8 and len(probed("self")) >= 4,
              f"/api/head_columns lists the head table's columns ({code}, {len(COLUMNS)})")
        title = b.js("document.title")
        check(title == "qkv serve", f"the page's title ({title!r})")
        cards = b.js("[...document.querySelectorAll('.run-card')].map(c => c.dataset.run)")
        check(cards == ["copy", "lm", "live", "saturation"], f"a card per folder ({cards})")
        b.wait("[...document.querySelectorAll('#saturation img')].every(i => i.complete)", 30,
               "the saturation charts")
        shown = b.js("[...document.querySelectorAll('#saturation img')].map(i => i.naturalWidth > 0)")
        check(len(shown) >= 5 and all(shown), f"the saturation study's charts are shown ({shown})")

        # The live run: its training curve grows while the page is open.
        b.wait("document.querySelector('#chart-train-loss polyline[data-run=\"live\"]') !== null",
               30, "the live run's curve")
        before = points(b, "live")
        b.wait(f"(() => {{ const p = document.querySelector('#chart-train-loss polyline[data-run=\"live\"]');"
               f" return p && p.points.numberOfItems > {before} + 2; }})()", 60,
               "the live curve to gain points")
        after = points(b, "live")
        check(after > before + 2, f"the live run's training-loss curve grew from {before} to {after} points")
        charts = b.js("[...document.querySelectorAll('figure.chart')].filter(f => !f.hidden).map(f => f.id)")
        for c in ("chart-train-loss", "chart-valid-loss", "chart-lr", "chart-exact-match",
                  "chart-entropy"):
            check(c in charts, f"chart {c} shown")

        # A copy-task input: greedy and beam outputs, three kinds of maps, 2 layers x 2 heads.
        ask(b, "copy", "3 1 4 1 5")
        greedy = b.js("document.getElementById('greedy').textContent")
        beamed = b.js("document.getElementById('beamed').textContent")
        cli = fx.run([qkv, "translate", copy, "3 1 4 1 5"]).stdout.strip()
        cli_beam = fx.run([qkv, "translate", copy, "3 1 4 1 5", "--beam", "4"]).stdout.strip()
        check(greedy == cli and beamed == cli_beam and greedy != "",
              f"copy: the greedy and beam outputs appear, as qkv translate's ({greedy!r}, {beamed!r})")
        check_grid(b, {"encoder_self": (2, 2), "decoder_self": (2, 2), "cross": (2, 2)}, "copy")
        rows = b.js("document.querySelectorAll('#next table tr').length")
        check(rows == len(cli.split()) + 2, f"copy: next-token probabilities at each output step ({rows - 1})")
        hover_and_enlarge(b)
        best_next = b.js("document.getElementById('next').textContent")
        lens_rows = b.js("document.querySelectorAll('#lens table.lens tr[data-layer]').length")
        check(lens_rows == 3, f"copy: the lens panel has the embedding's and each layer's row ({lens_rows})")
        # A target on this post-LN model: one answer, the lens kept and the attribution's reason.
        b.js("document.getElementById('target').value = '4';"
             " document.getElementById('lens-go').click()")
        b.wait("document.getElementById('lens').dataset.state === 'done'", 60, "the copy lens")
        lens_rows = b.js("document.querySelectorAll('#lens table.lens tr[data-layer]').length")
        why = b.js("document.getElementById('lens-status').textContent")
        check(lens_rows == 3 and "pre-LN" in why and
              b.js("document.querySelector('#lens table.attribution') === null"),
              f"copy: with a target the lens stays and the attribution says why not ({why!r})")
        b.js("document.getElementById('target').value = ''")
        ablate_in_grid(b, qkv, copy, "3 1 4 1 5", "cross.0.1", ("decoder_self", 1))
        heads_panel(b, qkv, copy, COLUMNS)

        # The checkpoint selector: an earlier checkpoint answers as qkv translate --checkpoint does.
        kept = b.js("[...document.getElementById('checkpoint').options].map(o => o.value)")
        check("step-00000100" in kept and "best" in kept,
              f"copy: the kept checkpoints are offered ({kept})")
        ask(b, "copy", "3 1 4 1 5", "document.getElementById('checkpoint').value = 'step-00000100';")
        early = b.js("document.getElementById('greedy').textContent")
        cli_early = fx.run([qkv, "translate", copy, "3 1 4 1 5",
                            "--checkpoint", "step-00000100"]).stdout.strip()
        check(early == cli_early,
              f"copy: step-00000100 decodes as qkv translate --checkpoint does ({early!r})")
        check(b.js("document.getElementById('next').textContent") != best_next,
              "copy: step-00000100's next-token probabilities are not the best checkpoint's")
        ask(b, "copy", "3 1 4 1 5", "document.getElementById('checkpoint').value = 'best';")
        shot = opts.get("--screenshot") or os.path.join(work, "copy.png")
        b.js("window.scrollTo(0, 0)")
        b.screenshot(shot)
        ok, size = png_ok(shot)
        check(ok, f"screenshot of the copy run's page, not blank ({size} bytes): {shot}")

        # The LM: a streamed sample, causal maps, 2 layers x 2 heads.
        ask(b, "lm", "ROMEO:", "document.getElementById('tokens').value = 40;"
            " document.getElementById('seed').value = 3;"
            " document.getElementById('target').value = 'a';")
        b.wait("document.getElementById('output').dataset.done === 'true'", 60, "the sample to end")
        sample = b.js("document.getElementById('sample').textContent")
        cli = fx.run([qkv, "generate", lm, "--prompt", "ROMEO:", "--tokens", "40", "--seed", "3",
                      "--quiet"]).stdout
        check(len(sample) > 0 and "ROMEO:" + sample == cli.rstrip("\n"),
              f"lm: the streamed sample appears, as qkv generate's ({sample!r})")
        maps = check_grid(b, {"causal": (2, 2)}, "lm")
        lens_panel(b, qkv, lm, "ROMEO:", "a")
        left = b.js("document.querySelectorAll('#heads table').length")
        check(left == 0, f"lm: the copy run's head table is gone ({left} tables)")
        check(all(m["future"] == 0 for m in maps), "lm: every map is causal (no weight on a later token)")
        b.screenshot(os.path.join(work, "lm.png"))
        ok, size = png_ok(os.path.join(work, "lm.png"))
        check(ok, f"screenshot of the LM's page, not blank ({size} bytes)")

        live_heads_while_training(b, live_dir)
        heads_while_training(b, copy, lm)
        b.js("window.scrollTo(0, 0)")
        b.screenshot(os.path.join(work, "heads.png"))

        problems = b.problems()
        check(problems == [], f"no console messages, script errors or failed loads ({problems})")
        # The negative control: an error thrown on the page must be seen by the listener.
        b.js("setTimeout(() => no_such_function(), 0)")
        time.sleep(0.5)
        check(any("no_such_function" in p for p in b.problems()),
              "an injected script error is caught (the listener works)")
    finally:
        if b:
            b.close()
        for s in (first_server, server):
            if s:
                s.stop()
        if live:
            fx.stop(live)
        if not opts.get("--keep"):
            shutil.rmtree(work, ignore_errors=True)
    print("FAILED: " + "; ".join(failures) if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
