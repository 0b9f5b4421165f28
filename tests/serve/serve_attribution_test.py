#!/usr/bin/env python3
"""qkv serve's "why this output" panels: token attribution and attribution patching, through the
real binary, against the commands they answer as.

Trains a short copy run (a translator), a tiny character language model and a tiny dyck
classifier (serve_fixture.py, serve_encoder_test.py's sizes) and serves the three. The API: POST
attribute answers as `qkv attribute --json` does for the same input and options (every method,
a contrast, a given target, the language model's tokens, the classifier's class), number for
number; POST patch as `qkv patch --approx --json` (the estimate of every head and residual
cell), and with "check" K as `qkv patch --approx --check K --json`, its "exact_heads" the K heads
of largest |estimate|, each exact value `qkv patch --json`'s restored fraction of that head,
with their Pearson correlation; bad requests (unknown method, a contrast the vocabulary lacks,
steps 0 or past the bound, tokens past the bound, check past the bound, inputs of different
lengths, too long a target or text, a field of the wrong type) are 400s with one line. Then the
page in headless Chromium (skipped, exit 77, without chromium or python3-websocket): for each run
it presses Attribute and clicks each output token with the mouse; the shaded input and earlier
output tokens must hold that row of `qkv attribute --json`; for the translator with integrated
gradients and a "rather than" token too. The patching panel's estimate heatmap holds `qkv patch
--approx --json`'s heads, and after "Exact on top K" the exact heatmap `qkv patch --json`'s
restored fractions of those heads, with the correlation shown. No console errors.

Usage: serve_attribution_test.py QKV_BINARY SOURCE_DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "apps"))
import serve_fixture as fx  # noqa: E402

failures = []
DYCK = ["--quiet", "--threads", "1", "--train.max_steps", "150", "--train.epochs", "0",
        "--train.eval_every", "50", "--data.train_size", "2000", "--data.valid_size", "100",
        "--data.test_size", "100", "--data.max_len", "12", "--model.d_model", "32",
        "--model.d_ff", "64", "--model.heads", "2", "--model.encoder_layers", "2",
        "--optim.warmup", "10", "--optim.lr", "3e-3"]
COPY_TEXT, COPY_CORRUPT = "3 1 4 1 5", "3 1 4 1 6"
LM_TEXT = "ROMEO: the"
DYCK_TEXT, DYCK_CORRUPT = "( [ ] ( ) )", "( [ ] ( ) ("
# Language-model pairs tried in turn: the first whose two answers differ is patched.
LM_PAIRS = [("ROMEO:", "ROMEO "), ("ROMEO:", "ROMEOe"), ("ROMEO:", "the ki"), ("the king", "the kins")]


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)


def cli(qkv, *args):
    return json.loads(fx.run([qkv, *args, "--json", "--threads", "1"]).stdout)


def same(a, b, path="", tol=1e-12):
    """'' when JSON values a and b are equal (numbers within tol, relative), else where not."""
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}", tol)
            if d:
                return d
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]", tol)
            if d:
                return d
        return ""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return "" if abs(a - b) <= tol * max(1.0, abs(a), abs(b)) else f"{path}: {a} vs {b}"
    return "" if a == b else f"{path}: {a!r} vs {b!r}"


def one_line_400(server, path, body, words, what):
    code, got, _ = server.post(path, body)
    msg = got.get("error", "") if isinstance(got, dict) else str(got)
    check(code == 400 and msg and "\n" not in msg and all(w in msg for w in words),
          f"{what}: a 400 with one line naming it ({code}, {msg!r})")


# --- the API ------------------------------------------------------------------------------------

ATTRIBUTE_CASES = [  # (run, text, body fields, qkv attribute options)
    ("copy", COPY_TEXT, {}, []),
    ("copy", COPY_TEXT, {"method": "input-x-gradient", "contrast": "9"},
     ["--method", "input-x-gradient", "--contrast", "9"]),
    ("copy", COPY_TEXT, {"method": "integrated-gradients", "steps": 16},
     ["--method", "integrated-gradients", "--steps", "16"]),
    ("copy", COPY_TEXT, {"method": "attention-rollout"}, ["--method", "attention-rollout"]),
    ("copy", COPY_TEXT, {"method": "value-zeroing", "target": "3 1 4"},
     ["--method", "value-zeroing", "--target", "3 1 4"]),
    ("lm", LM_TEXT, {"tokens": 4}, ["--tokens", "4"]),
    ("lm", LM_TEXT, {"tokens": 3, "method": "integrated-gradients", "steps": 8, "contrast": "e"},
     ["--tokens", "3", "--method", "integrated-gradients", "--steps", "8", "--contrast", "e"]),
    ("dyck", DYCK_TEXT, {"method": "input-x-gradient", "contrast": "unbalanced"},
     ["--method", "input-x-gradient", "--contrast", "unbalanced"]),
    ("dyck", DYCK_TEXT, {"method": "value-zeroing"}, ["--method", "value-zeroing"]),
]


def api_attribute(server, qkv, runs):
    for run, text, body, opts in ATTRIBUTE_CASES:
        code, got, _ = server.post(f"/api/runs/{run}/attribute", {"text": text, **body})
        want = cli(qkv, "attribute", runs[run], text, *opts)
        diff = same(got, want) if code == 200 else f"HTTP {code}: {got}"
        check(not diff, f"POST {run}/attribute {body} is qkv attribute {' '.join(opts)} --json's "
                        f"({diff or str(len(want['outputs'])) + ' rows'})")
    code, got, _ = server.post("/api/runs/copy/attribute", {"text": COPY_TEXT, "ablate": "cross.0.1"})
    want = cli(qkv, "attribute", runs["copy"], COPY_TEXT, "--ablate", "cross.0.1")
    check(code == 200 and not same(got, want),
          f"POST attribute with ablate is qkv attribute --ablate's ({same(got, want)})")


def lm_pair(qkv, lm):
    for clean, corrupt in LM_PAIRS:
        r = subprocess.run([qkv, "patch", lm, "--clean", clean, "--corrupt", corrupt, "--approx",
                               "--json", "--threads", "1"], capture_output=True, text=True)
        if r.returncode == 0:
            return clean, corrupt
    return None


def api_patch(server, qkv, runs, pairs):
    for run, (clean, corrupt) in pairs.items():
        body = {"clean": clean, "corrupt": corrupt}
        code, got, _ = server.post(f"/api/runs/{run}/patch", body)
        want = cli(qkv, "patch", runs[run], "--clean", clean, "--corrupt", corrupt, "--approx")
        sites = got.pop("sites", None) if code == 200 else None
        names = sorted({h["attention"] for h in want["heads"]})
        check(sites and sorted(s["name"] for s in sites) == names and all(s["title"] for s in sites),
              f"POST {run}/patch names the attentions' sites with their titles ({sites})")
        diff = same(got, want) if code == 200 else f"HTTP {code}: {got}"
        check(not diff, f"POST {run}/patch is qkv patch --approx --json's "
                        f"({diff or str(len(want['heads'])) + ' heads'})")
        k = 3
        code, got, _ = server.post(f"/api/runs/{run}/patch", {**body, "check": k})
        want = cli(qkv, "patch", runs[run], "--clean", clean, "--corrupt", corrupt, "--approx",
                   "--check", str(k))
        exact = cli(qkv, "patch", runs[run], "--clean", clean, "--corrupt", corrupt)
        if code != 200:
            check(False, f"POST {run}/patch check {k}: HTTP {code} {got}")
            continue
        heads = got.pop("exact_heads")
        got.pop("sites")
        diff = same(got, want)
        check(not diff, f"POST {run}/patch check {k}: qkv patch --approx --check {k} --json's "
                        f"cells ({diff or got['check']['cells'][0]})")
        restored = {h["head"]: h["restored"] for h in exact["heads"]}
        estimate = {h["head"]: h["restored"] for h in want["heads"]}
        top = sorted(estimate, key=lambda h: -abs(estimate[h]))[:k]
        mine = [h["head"] for h in heads["heads"]]
        check(heads["k"] == k and sorted(mine) == sorted(top)
              and all(h["exact"] == restored[h["head"]] and h["estimate"] == estimate[h["head"]]
                      for h in heads["heads"]),
              f"POST {run}/patch check {k}: the top {k} heads by |estimate|, each exact value "
              f"qkv patch --json's ({[(h['head'], h['estimate'], h['exact']) for h in heads['heads']]}"
              f" vs {[(h, estimate[h], restored[h]) for h in top]})")
        xs, ys = [h["estimate"] for h in heads["heads"]], [h["exact"] for h in heads["heads"]]
        mx, my = sum(xs) / k, sum(ys) / k
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
        sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
        r = sxy / math.sqrt(sxx * syy)
        check(abs(heads["correlation"] - r) < 1e-9,
              f"POST {run}/patch: the heads' correlation is Pearson's ({heads['correlation']} vs {r})")


def api_bad(server):
    a, p = "/api/runs/copy/attribute", "/api/runs/copy/patch"
    one_line_400(server, a, {"text": COPY_TEXT, "method": "saliencey"}, ["saliency"],
                 "an unknown method")
    one_line_400(server, a, {"text": COPY_TEXT, "contrast": "zz"}, ["'zz'"],
                 "a contrast the vocabulary lacks")
    one_line_400(server, a, {"text": COPY_TEXT, "method": "attention-rollout", "contrast": "9"},
                 ["contrast"], "a contrast with attention rollout")
    one_line_400(server, a, {"text": COPY_TEXT, "steps": 0}, ["steps", "got 0"], "steps 0")
    one_line_400(server, a, {"text": COPY_TEXT, "steps": 100000}, ["steps", "100000"],
                 "steps past the bound")
    one_line_400(server, "/api/runs/lm/attribute", {"text": "ROMEO", "tokens": 1000},
                 ["tokens", "1000"], "tokens past the bound")
    one_line_400(server, a, {"text": COPY_TEXT, "target": " ".join(["1"] * 300)}, ["target"],
                 "a target longer than the model's positions")
    one_line_400(server, a, {"text": "3 " * 3000}, ["bytes"], "a text past the bytes bound")
    one_line_400(server, a, {"text": COPY_TEXT, "steps": "many"}, ["steps"],
                 "a field of the wrong type")
    one_line_400(server, a, {"text": ""}, ["empty"], "an empty text")
    one_line_400(server, p, {"clean": COPY_TEXT, "corrupt": COPY_CORRUPT, "check": 65},
                 ["check", "65"], "check past the bound")
    one_line_400(server, p, {"clean": COPY_TEXT, "corrupt": COPY_CORRUPT, "check": -1},
                 ["check", "-1"], "a negative check")
    one_line_400(server, p, {"clean": COPY_TEXT, "corrupt": "3 1 4"}, ["length"],
                 "inputs of different lengths")
    one_line_400(server, p, {"clean": COPY_TEXT, "corrupt": COPY_TEXT}, ["same answer"],
                 "inputs with the same answer")
    one_line_400(server, p, {"clean": COPY_TEXT, "corrupt": "3 1 x 1 5"}, ["corrupted", "'x'"],
                 "a corrupted input with an unknown symbol")
    code, got, _ = server.get("/api/runs/copy/queue")
    check(code == 200 and got["long"]["running"] == 0 and got["long"]["waiting"] == 0,
          f"no question left in the run's lanes ({got})")


# --- the page -----------------------------------------------------------------------------------

TOKENS = ("[...document.querySelectorAll('#attr .attr-tok')].map(s => [s.dataset.side,"
          " s.dataset.value === undefined ? null : Number(s.dataset.value)])")


def page_attribution(b, page_test, qkv, runs, run, text, fields, opts):
    """Attribute on the page, then a mouse click on each output token: the shaded tokens hold
    that row of qkv attribute --json's (the earlier output tokens it does not read: none)."""
    page_test.choose(b, "#run", run)
    b.type_into("#text", text)
    b.js(f"document.getElementById('attr-method').value = {json.dumps(fields.get('method', 'saliency'))}")
    for key, box in (("contrast", "#attr-contrast"), ("target", "#attr-target")):
        b.type_into(box, fields.get(key, ""))
    for key, box in (("steps", "attr-steps"), ("tokens", "attr-tokens")):
        if key in fields:
            b.js(f"document.getElementById('{box}').value = {fields[key]}")
    b.js("document.getElementById('attr').dataset.state = ''")
    page_test.click(b, *page_test.center(b, "#attr-go"))
    b.wait("['done', 'error'].includes(document.getElementById('attr').dataset.state)", 120,
           f"{run}'s attribution")
    status = b.js("document.getElementById('attr-status').textContent")
    want = cli(qkv, "attribute", runs[run], text, *opts)
    outs = b.js("[...document.querySelectorAll('#attr .attr-out')].map(s => s.textContent)")
    check(len(outs) == len(want["outputs"]) and len(outs) > 0,
          f"{run} {fields}: the output tokens to click ({outs}; {status!r})")
    for r, row in enumerate(want["outputs"]):
        page_test.click(b, *page_test.center(b, f"#attr .attr-out[data-row='{r}']"))
        chosen = b.js("document.getElementById('attr').dataset.row")
        got = b.js(TOKENS)
        inputs = [v for side, v in got if side == "input"]
        context = [v for side, v in got if side == "context"]
        seen = [v for v in context if v is not None]
        unseen = context[len(seen):]
        wanted = row["inputs"] + row["context"]
        diff = same(inputs + seen, wanted) if len(inputs + seen) == len(wanted) else "lengths"
        check(chosen == str(r) and not diff and all(v is None for v in unseen)
              and len(context) == len(want["context"]),
              f"{run} {fields}: clicking output {r} ('{row['token']}') shades the tokens with qkv "
              f"attribute --json's row ({diff or len(wanted)} values)")


HEATMAP = ("[...document.querySelectorAll('#patch table.heatmap[data-kind={kind}] td[data-head]')]"
           ".map(td => [td.dataset.head, Number(td.dataset.value)])")


def page_patching(b, page_test, qkv, runs, run, clean, corrupt, k):
    page_test.choose(b, "#run", run)
    b.type_into("#patch-clean", clean)
    b.type_into("#patch-corrupt", corrupt)
    page_test.click(b, *page_test.center(b, "#patch-go"))
    b.wait("['done', 'error'].includes(document.getElementById('patch').dataset.state)", 120,
           f"{run}'s estimate")
    want = cli(qkv, "patch", runs[run], "--clean", clean, "--corrupt", corrupt, "--approx")
    got = dict(b.js(HEATMAP.replace("{kind}", "estimate")))
    estimate = {h["head"]: h["restored"] for h in want["heads"]}
    check(not same(got, estimate),
          f"{run}: the estimate heatmaps hold qkv patch --approx --json's heads "
          f"({same(got, estimate) or len(got)})")
    b.js(f"document.getElementById('patch-k').value = {k}")
    b.js("document.getElementById('patch').dataset.state = ''")
    page_test.click(b, *page_test.center(b, "#patch-exact"))
    b.wait("['done', 'error'].includes(document.getElementById('patch').dataset.state)", 120,
           f"{run}'s exact patching")
    exact = cli(qkv, "patch", runs[run], "--clean", clean, "--corrupt", corrupt)
    restored = {h["head"]: h["restored"] for h in exact["heads"]}
    top = sorted(estimate, key=lambda h: -abs(estimate[h]))[:k]
    got = dict(b.js(HEATMAP.replace("{kind}", "exact")))
    check(sorted(got) == sorted(top) and not same(got, {h: restored[h] for h in top}),
          f"{run}: after Exact on top {k}, the exact heatmap holds qkv patch --json's restored "
          f"fractions of the top {k} heads ({got})")
    line = b.js("(() => { const p = document.getElementById('patch-heads-correlation');"
                " return p ? p.textContent : ''; })()")
    cells = b.js("document.querySelectorAll('#patch-check tr[data-name]').length")
    check("correlation" in line and cells == k,
          f"{run}: the correlation and the {k} checked cells shown ({line!r}, {cells})")


def page(qkv, runs, server, chromium, work, pairs):
    sys.path.insert(0, os.path.join(HERE, "..", "apps"))
    import serve_browser_test as page_test
    b = page_test.Browser(chromium, tempfile.mkdtemp(prefix="profile_", dir=work))
    try:
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true'", 60, "the page to load")
        page_attribution(b, page_test, qkv, runs, "copy", COPY_TEXT, {}, [])
        page_attribution(b, page_test, qkv, runs, "copy", COPY_TEXT,
                         {"method": "integrated-gradients", "steps": 16, "contrast": "9"},
                         ["--method", "integrated-gradients", "--steps", "16", "--contrast", "9"])
        page_attribution(b, page_test, qkv, runs, "lm", LM_TEXT, {"tokens": 5}, ["--tokens", "5"])
        page_attribution(b, page_test, qkv, runs, "dyck", DYCK_TEXT,
                         {"method": "input-x-gradient", "contrast": "unbalanced"},
                         ["--method", "input-x-gradient", "--contrast", "unbalanced"])
        for run, (clean, corrupt) in pairs.items():
            page_patching(b, page_test, qkv, runs, run, clean, corrupt, 3)
        b.screenshot(os.path.join(work, "attribution.png"))
        problems = b.problems()
        check(problems == [], f"no console messages, script errors or failed loads ({problems})")
    finally:
        b.close()
    return page_test.failures


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="qkv_serve_attribution_")
    server = None
    skipped = False
    try:
        copy, lm = fx.train_runs(qkv, source, work)
        dyck = os.path.join(work, "dyck")
        fx.run([qkv, "train", os.path.join(source, "configs", "dyck.toml"), "--run-dir", dyck, *DYCK])
        runs = {"copy": copy, "lm": lm, "dyck": dyck}
        pairs = {"copy": (COPY_TEXT, COPY_CORRUPT), "dyck": (DYCK_TEXT, DYCK_CORRUPT)}
        found = lm_pair(qkv, lm)
        check(found is not None, f"a language-model pair whose two answers differ, to patch "
                                 f"(tried {LM_PAIRS}; add one that the run tells apart)")
        if found:
            pairs["lm"] = found
        server = fx.Server(qkv, [copy, lm, dyck])
        api_attribute(server, qkv, runs)
        api_patch(server, qkv, runs, pairs)
        api_bad(server)
        chromium = fx.chromium_for_pages()
        if chromium:
            failures.extend(page(qkv, runs, server, chromium, work, pairs))
        else:
            skipped = True
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return fx.exit_status(failures, skipped)


if __name__ == "__main__":
    sys.exit(main())
