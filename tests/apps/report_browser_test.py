#!/usr/bin/env python3
"""qkv report in a real browser: headless Chromium loads the pages of real runs.

Trains two short copy-task runs (scaled and unscaled attention), runs a short qkv saturation,
writes three reports (one run, the two runs compared, the saturation folder) and loads each in
headless Chromium with a checker script added to a copy of the page. The checker records every
error event (scripts, failed images, Content-Security-Policy violations) and, at the load event,
checks every chart (present, laid out, a line of two or more points or bars), every image,
every internal link and the one <title>; it writes its verdict into the DOM, which --dump-dom
prints. Chromium's own console log (--enable-logging=stderr) must be silent too. A screenshot
of each page is taken. A deliberately broken copy of the comparison page must fail the checker,
so the check is known to be able to fail.

Usage: report_browser_test.py QKV_BINARY SOURCE_DIR [--keep DIR]
Exit 0: passed; 1: failed; 77: skipped (no chromium), which ctest reports as skipped.
Needs only the Python standard library (run with /usr/bin/python3).
"""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_fixture import run  # noqa: E402  (a command that must succeed)

SKIP = 77
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
]

# Added right after <head> in a copy of the page: listens from the start, judges at load.
CHECKER = r"""<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    if (e.message) errors.push('script error: ' + e.message);
    else if (e.target && e.target.tagName) errors.push('failed to load: ' + e.target.tagName);
  }, true);
  document.addEventListener('securitypolicyviolation', function (e) {
    errors.push('blocked by the page policy: ' + e.blockedURI);
  });
  window.addEventListener('load', function () {
    var v = {errors: errors, charts: [], images: [], broken_links: [],
             titles: document.querySelectorAll('head > title').length,
             expected_charts: Number(document.querySelector('main').getAttribute('data-charts')),
             load_ms: performance.now()};
    document.querySelectorAll('figure.chart').forEach(function (f) {
      var c = {id: f.id, kind: f.getAttribute('data-kind'), ok: false, why: ''};
      var svg = f.querySelector('svg');
      if (!svg) { c.why = 'no svg'; v.charts.push(c); return; }
      var box = svg.getBoundingClientRect();
      if (box.width < 200 || box.height < 100) {
        c.why = 'laid out at ' + box.width + ' x ' + box.height;
      } else if (c.kind === 'bars') {
        c.ok = svg.querySelectorAll('rect > title').length > 0;
        if (!c.ok) c.why = 'no bars';
      } else {
        var most = 0;
        svg.querySelectorAll('polyline').forEach(function (p) {
          most = Math.max(most, p.points.numberOfItems);
        });
        c.ok = most >= 2;
        c.points = most;
        if (!c.ok) c.why = 'no line of two or more points';
      }
      v.charts.push(c);
    });
    document.querySelectorAll('img').forEach(function (i) {
      if (!(i.complete && i.naturalWidth > 0)) v.images.push(i.alt || 'an image');
    });
    document.querySelectorAll('a[href^="#"]').forEach(function (a) {
      var id = a.getAttribute('href').slice(1);
      if (!document.getElementById(id)) v.broken_links.push(id);
    });
    v.checked_ms = performance.now();  // after the checks forced layout
    var pre = document.createElement('pre');
    pre.id = 'qkv-verdict';
    pre.textContent = JSON.stringify(v);
    document.body.appendChild(pre);
  });
})();
</script>
"""


class Basics(html.parser.HTMLParser):
    """Static checks: <title> outside inline SVG, ids, internal links, external references."""

    def __init__(self):
        super().__init__()
        self.svg_depth = 0
        self.titles = 0
        self.ids = []
        self.links = []
        self.external = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg_depth += 1
        if tag == "title" and self.svg_depth == 0:
            self.titles += 1
        if tag in ("script", "link", "iframe", "object", "embed"):
            self.scripts += 1
        if "id" in a:
            self.ids.append(a["id"])
        for key in ("href", "src"):
            ref = a.get(key)
            if ref is None:
                continue
            if ref.startswith("#"):
                self.links.append(ref[1:])
            elif not ref.startswith("data:image/"):
                self.external.append(ref[:80])

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg_depth -= 1


def static_problems(page):
    b = Basics()
    b.feed(page)
    problems = []
    if b.titles != 1:
        problems.append(f"{b.titles} <title> elements outside SVG, want 1")
    dup = sorted({i for i in b.ids if b.ids.count(i) > 1})
    if dup:
        problems.append(f"duplicate ids: {dup}")
    broken = sorted(set(b.links) - set(b.ids))
    if broken:
        problems.append(f"links to missing ids: {broken}")
    if b.external:
        problems.append(f"external references: {b.external}")
    if b.scripts:
        problems.append(f"{b.scripts} script/link/iframe/object/embed element(s)")
    return problems


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def load_in_chromium(chromium, page_path, work, shot):
    """Loads a checker copy of the page; returns (verdict or None, console lines, problems)."""
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    # The page forbids scripts (CSP); the checker copy allows inline ones and nothing else.
    checked = page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';", 1)
    checked = checked.replace("<head>", "<head>\n" + CHECKER, 1)
    copy = os.path.join(work, os.path.basename(page_path) + ".checked.html")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(checked)
    profile = tempfile.mkdtemp(prefix="qkv_chromium_", dir=work)
    try:
        r = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2400",
             f"--screenshot={shot}", "--dump-dom", "file://" + os.path.abspath(copy)],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    problems = []
    if r.returncode != 0:
        problems.append(f"chromium exited with {r.returncode}: {r.stderr[-500:]}")
    m = re.search(r'<pre id="qkv-verdict">(.*?)</pre>', r.stdout, re.S)
    verdict = None
    if not m:
        problems.append("no verdict in the DOM (the checker did not run)")
    else:
        verdict = json.loads(html.unescape(m.group(1)))
    return verdict, console, problems


def verdict_problems(verdict, console):
    p = []
    if verdict is None:
        return ["no verdict"]
    p += [f"page error: {e}" for e in verdict["errors"]]
    p += [f"console: {c}" for c in console]
    if verdict["titles"] != 1:
        p.append(f"{verdict['titles']} titles in <head>")
    if len(verdict["charts"]) != verdict["expected_charts"] or not verdict["charts"]:
        p.append(f"{len(verdict['charts'])} charts on the page, it says {verdict['expected_charts']}")
    p += [f"chart {c['id']}: {c['why']}" for c in verdict["charts"] if not c["ok"]]
    p += [f"image not shown: {i}" for i in verdict["images"]]
    p += [f"link to a missing id: #{l}" for l in verdict["broken_links"]]
    return p


def check_page(chromium, page_path, work, want_titles):
    """All checks of one page; returns the list of problems (empty: passed)."""
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    problems = static_problems(page)
    for t in want_titles:
        if f">{t}</text>" not in page:
            problems.append(f"no chart titled '{t}'")
    shot = page_path[:-5] + ".png"
    verdict, console, load = load_in_chromium(chromium, page_path, work, shot)
    problems += load + verdict_problems(verdict, console)
    size = png_size(shot) if os.path.exists(shot) else None
    if size is None or size[0] != 1280 or os.path.getsize(shot) < 20000:
        problems.append(f"screenshot {shot} missing or blank ({size})")
    if verdict:
        print(f"  {os.path.basename(page_path)}: {len(verdict['charts'])} charts, "
              f"{len(page) // 1024} KB, load event at {verdict['load_ms']:.0f} ms, laid out and "
              f"checked at {verdict['checked_ms']:.0f} ms, screenshot {size}")
    return problems


def train_runs(qkv, source, work):
    common = ["--quiet", "--threads", "1", "--train.max_steps", "60", "--train.eval_every", "20",
              "--train.log_every", "5", "--train.eval_examples", "10", "--data.train_size", "500",
              "--data.valid_size", "10", "--data.test_size", "10", "--optim.warmup", "20",
              "--model.d_model", "16", "--model.d_ff", "32", "--model.heads", "2",
              "--train.log_attention_entropy", "true"]
    procs = []
    for name, scale in (("scaled", "0.0"), ("unscaled", "1.0")):
        cmd = [qkv, "train", os.path.join(source, "configs", "copy.toml"), "--run-dir",
               os.path.join(work, name), *common, "--model.attention_scale", scale]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)))
    for cmd, p in procs:
        out = p.communicate()[0]
        if p.returncode != 0:
            raise SystemExit(f"FAILED: {' '.join(cmd)}\n{out}")


def main():
    args = sys.argv[1:]
    keep = None
    if "--keep" in args:
        keep = args[args.index("--keep") + 1]
        del args[args.index("--keep"):args.index("--keep") + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(args[0]), os.path.abspath(args[1])
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIPPED: no chromium on PATH (Debian package chromium, installed by "
              "scripts/install-deps.sh): the report is not checked in a browser")
        return SKIP
    work = keep or tempfile.mkdtemp(prefix="qkv_report_browser_")
    os.makedirs(work, exist_ok=True)
    try:
        t0 = time.time()
        train_runs(qkv, source, work)
        sat = os.path.join(work, "saturation")
        run([qkv, "saturation", "--out", sat, "--d-k", "4,16,64,256", "--samples", "2000",
             "--rows", "200", "--batch", "2", "--train-steps", "20", "--train-d-model", "32",
             "--threads", "1"])
        pages = {
            "one.html": [os.path.join(work, "scaled"), "--heads"],
            "compare.html": [os.path.join(work, "scaled"), os.path.join(work, "unscaled")],
            "saturation.html": [sat],
        }
        for page, dirs in pages.items():
            run([qkv, "report", *dirs, "--out", os.path.join(work, page), "--examples", "2"])
        curves = ["Training loss", "Validation loss", "Learning rate", "Gradient norm",
                  "Validation token accuracy", "Validation exact match",
                  "Attention entropy, encoder self-attention",
                  "Attention entropy, decoder self-attention", "Attention entropy, cross-attention"]
        want = {"one.html": curves, "compare.html": curves,
                "saturation.html": ["Copy task: training loss, scaled against unscaled"]}
        print(f"  runs, saturation and reports written in {time.time() - t0:.1f} s")
        failed = False
        for page in pages:
            problems = check_page(chromium, os.path.join(work, page), work, want[page])
            for p in problems:
                print(f"  {page}: {p}")
            failed = failed or bool(problems)

        # The negative control: a script error, a dangling link, an external image and an empty
        # chart must each be caught, or the checks above prove nothing.
        with open(os.path.join(work, "compare.html"), encoding="utf-8") as f:
            page = f.read()
        broken = page.replace("</main>", "<a href=\"#nowhere\">x</a><script>no_such_function();"
                              "</script><img src=\"https://example.invalid/x.png\" alt=\"x\"></main>")
        broken = re.sub(r"points='[^']*'", "points=''", broken)
        broken_path = os.path.join(work, "broken.html")
        with open(broken_path, "w", encoding="utf-8") as f:
            f.write(broken)
        found = check_page(chromium, broken_path, work, [])
        print(f"  negative control, broken.html: {len(found)} problems found, as it should")
        problems = "\n".join(found)
        for must in ("no_such_function", "#nowhere", "example.invalid", "no line of two or more"):
            if must not in problems:
                print(f"  negative control: the broken page's '{must}' went unnoticed")
                failed = True
        print("FAILED" if failed else "passed: three pages load cleanly in Chromium; the broken "
              "page fails the same checks")
        return 1 if failed else 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
