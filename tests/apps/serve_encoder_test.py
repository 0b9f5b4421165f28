#!/usr/bin/env python3
"""qkv serve with an encoder-only classifier: a tiny dyck run (2 layers x 2 heads, under a
second) served beside nothing else.

The JSON API: the run's facts carry capabilities ["classify"]; POST classify answers as `qkv
classify --json` does (with "ablate" as `--ablate`); translate and generate are refused (400)
naming qkv classify; POST attention gives the encoder's self-attention over <cls> and the
brackets, 2 layers x 2 heads, and its next-token steps read at <cls> over the class names; POST
lens is `qkv lens --json`'s. Then the page in headless Chromium (skipped, exit 77, without
chromium or python3-websocket): the button says Classify, no decode or sample options show;
typing an input and pressing it draws the grid (every map's rows summing to 1) and the class
probabilities, most probable first, summing to 1, predicted as `qkv classify` predicts; the lens
panel has qkv lens's ranks; clicking a head's map removes it (the probabilities become `qkv
classify --ablate`'s, the head marked and listed) and clear restores them; "Score heads" draws
the head panels of the classifier's one attention site, titled as the model titles it, with `qkv
heads --json`'s numbers; "Heads while training" (the run trained with a probe every 50 steps)
shows the one site as the run's facts title it (read from its config, without its weights;
the records' own "sites" are removed first),
its panels named L.H with the probe records' numbers, and clicking panel 1.0 outlines head
1.0's map in the grid; no console errors.

Usage: serve_encoder_test.py QKV_BINARY SOURCE_DIR
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402

failures = []
TINY = ["--quiet", "--threads", "1", "--train.max_steps", "150", "--train.epochs", "0",
        "--train.eval_every", "50", "--data.train_size", "2000", "--data.valid_size", "100",
        "--data.test_size", "100", "--data.max_len", "12", "--model.d_model", "32",
        "--model.d_ff", "64", "--model.heads", "2", "--model.encoder_layers", "2",
        "--optim.warmup", "10", "--optim.lr", "3e-3", "--probe.every", "50"]
TEXT = "( [ ] ( ) )"


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)


def api(server, qkv, run):
    code, runs, _ = server.get("/api/runs")
    facts = runs[0]["facts"] if code == 200 and runs else {}
    check(facts.get("capabilities") == ["classify"] and "classifier" in facts.get("model", ""),
          f"the run's facts: capabilities classify, an encoder-only classifier ({facts})")
    sites = [{k: s.get(k) for k in ("name", "title", "head_prefix", "layers", "heads")}
             for s in facts.get("sites", [])]
    check(sites == [{"name": "self", "title": "self-attention", "head_prefix": "", "layers": 2,
                     "heads": 2}],
          f"the run's facts: its one attention site, from its config ({sites})")
    code, got, _ = server.post("/api/runs/dyck/classify", {"text": TEXT})
    cli = json.loads(fx.run([qkv, "classify", run, TEXT, "--json"]).stdout)
    check(code == 200 and got["predicted"] == cli["predicted"] and got["tokens"] == cli["tokens"]
          and all(abs(a["p"] - b["p"]) < 1e-12 for a, b in zip(got["classes"], cli["classes"])),
          f"POST classify answers as qkv classify --json ({code}, {got})")
    code, got, _ = server.post("/api/runs/dyck/classify", {"text": TEXT, "ablate": "0.1"})
    cli = json.loads(fx.run([qkv, "classify", run, TEXT, "--json", "--ablate", "0.1"]).stdout)
    check(code == 200 and [c["p"] for c in got["classes"]] == [c["p"] for c in cli["classes"]],
          f"POST classify with ablate answers as qkv classify --ablate ({code}, {got})")
    for what, body in (("translate", {"text": TEXT}), ("generate", {"prompt": "("})):
        code, got, _ = server.post(f"/api/runs/dyck/{what}", body)
        check(code == 400 and "use qkv classify" in str(got),
              f"POST {what} is refused, naming qkv classify ({code}, {got})")
    code, got, _ = server.post("/api/runs/dyck/classify", {"text": "( x )"})
    check(code == 400 and "'x' is not a symbol" in got.get("error", ""),
          f"an unknown symbol is a 400 naming it ({code}, {got})")
    code, att, _ = server.post("/api/runs/dyck/attention", {"text": TEXT, "k": 2})
    kinds = [k["kind"] for k in att.get("kinds", [])] if code == 200 else []
    check(kinds == ["encoder_self"] and att["kinds"][0]["rows"][0] == "<cls>"
          and len(att["kinds"][0]["rows"]) == 7 and len(att["kinds"][0]["layers"]) == 2
          and len(att["kinds"][0]["layers"][0]) == 2,
          f"POST attention: the encoder's self-attention over <cls> and 6 brackets ({kinds})")
    steps = att.get("steps", [])
    check(len(steps) == 1 and steps[0]["at"] == "<cls>"
          and sorted(t["token"] for t in steps[0]["top"]) == ["balanced", "unbalanced"],
          f"the steps: one, read at <cls>, over the class names ({steps})")
    code, lens, _ = server.post("/api/runs/dyck/lens", {"text": TEXT})
    cli = json.loads(fx.run([qkv, "lens", run, TEXT, "--json"]).stdout)
    check(code == 200 and lens["layers"] == cli["layers"], f"POST lens is qkv lens --json's ({code})")


def page(qkv, run, server, chromium, work):
    import serve_browser_test as page_test  # its Browser, grid check and lens panel
    b = page_test.Browser(chromium, tempfile.mkdtemp(prefix="profile_", dir=work))
    code, answer, _ = server.get("/api/head_columns")
    page_test.COLUMNS[:] = answer["columns"] if code == 200 else []
    try:
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true'", 60, "the page to load")
        shown = b.js("[document.getElementById('go').textContent,"
                     " document.getElementById('seq2seq-options').hidden,"
                     " document.getElementById('lm-options').hidden]")
        check(shown == ["Classify", True, True],
              f"the button classifies, no decode or sample options ({shown})")
        page_test.ask(b, "dyck", TEXT)
        b.wait("document.querySelector('#classes') !== null", 30, "the class probabilities")
        page_test.check_grid(b, {"encoder_self": (2, 2)}, "dyck")
        rows = b.js("[...document.querySelectorAll('#classes tr[data-class]')].map(r =>"
                    " [r.dataset.class, Number(r.dataset.p)])")
        predicted = b.js("document.getElementById('classes').dataset.predicted")
        cli = json.loads(fx.run([qkv, "classify", run, TEXT, "--json"]).stdout)
        check(len(rows) == 2 and abs(sum(p for _, p in rows) - 1) < 1e-9
              and rows[0][1] >= rows[1][1] and predicted == cli["predicted"] == rows[0][0],
              f"the class probabilities, most probable first, as qkv classify's ({rows})")
        bars = b.js("document.querySelectorAll('#classes .bar').length")
        check(bars == 2, f"a bar per class ({bars})")
        b.js("document.getElementById('lens-go').click()")
        b.wait("document.getElementById('lens').dataset.state === 'done'", 60, "the lens")
        lens = b.js("[...document.querySelectorAll('#lens table.lens tr[data-layer]')].map(r =>"
                    " [r.dataset.layer, Number(r.children[1].textContent)])")
        cli = json.loads(fx.run([qkv, "lens", run, TEXT, "--json"]).stdout)
        check(lens == [[l["layer"], l["rank"]] for l in cli["layers"]],
              f"the lens panel has qkv lens's ranks ({lens})")
        ablate_a_head(b, qkv, run)
        head_panels(b, qkv, run)
        heads_while_training(b, run)
        b.screenshot(os.path.join(work, "dyck.png"))
        ok, size = page_test.png_ok(os.path.join(work, "dyck.png"))
        check(ok, f"a screenshot of the classifier's page, not blank ({size} bytes)")
        problems = b.problems()
        check(problems == [], f"no console messages, script errors or failed loads ({problems})")
    finally:
        b.close()
    return page_test.failures


CLASSES = ("[...document.querySelectorAll('#classes tr[data-class]')].map(r =>"
           " [r.dataset.class, Number(r.dataset.p)])")


def classes_of(cli):
    """`qkv classify --json`'s classes as the page lists them: most probable first."""
    return sorted(([c["class"], c["p"]] for c in cli["classes"]), key=lambda c: -c[1])


def answered(b, spec):
    """Waits for the page's answer with the heads spec removed; its class probabilities."""
    b.wait(f"document.body.dataset.busy === 'false' && document.getElementById('output')"
           f".dataset.ablate === {json.dumps(spec)}", 60, f"the answer without {spec or 'none'}")
    return b.js(CLASSES)


def ablate_a_head(b, qkv, run):
    """Clicking head 1.0's map (the classifier's heads are named L.H, no site prefix) removes it
    from the answer: the probabilities become qkv classify --ablate 1.0's; clear restores them."""
    import serve_browser_test as page_test
    first = b.js(CLASSES)
    page_test.click(b, *page_test.center(b, "canvas.map[data-name='1.0']"))
    got = answered(b, "1.0")
    cli = json.loads(fx.run([qkv, "classify", run, TEXT, "--json", "--ablate", "1.0"]).stdout)
    want = classes_of(cli)
    check([c for c, _ in got] == [c for c, _ in want]
          and all(abs(p - q) < 1e-12 for (_, p), (_, q) in zip(got, want)) and got != first,
          f"clicking head 1.0's map: the probabilities become qkv classify --ablate 1.0's "
          f"({first} -> {got}, cli {want})")
    marked = b.js("[...document.querySelectorAll('td.ablated canvas')].map(c => c.dataset.name)")
    line = b.js("document.getElementById('ablated').textContent")
    check(marked == ["1.0"] and line == "ablated: 1.0",
          f"the removed head is marked and listed ({marked}, {line!r})")
    page_test.click(b, *page_test.center(b, "#clear-ablation"))
    got = answered(b, "")
    check(got == first and b.js("document.querySelectorAll('td.ablated').length") == 0,
          f"clear restores the first probabilities ({got})")


def head_panels(b, qkv, run):
    """Score heads: one group, the model's one site titled as the model titles it, a heatmap per
    column its rows have, each cell qkv heads --json's number."""
    import serve_browser_test as page_test
    page_test.click(b, *page_test.center(b, "#score-heads"))
    b.wait("['done', 'error'].includes(document.getElementById('heads').dataset.state)", 120,
           "the head table")
    status = b.js("document.getElementById('heads-status').textContent")
    groups = b.js("[...document.querySelectorAll('#heads .head-group')].map(g =>"
                  " [g.dataset.attention, g.querySelector('h4').textContent])")
    check(groups == [["self", "self-attention"]],
          f"heads: one group, the classifier's self-attention, titled by the model ({groups}; "
          f"{status!r})")
    cells = b.js("[...document.querySelectorAll('table.heatmap')].map(t => [t.dataset.score,"
                 " [...t.querySelectorAll('td')].map(td => [td.title.split(' ')[0],"
                 " Number(td.dataset.value)])])")
    cli = json.loads(fx.run([qkv, "heads", run, "--json", "--threads", "1"]).stdout)
    want = {}
    for r in cli["heads"]:  # layer by layer, head by head: the cells' order
        for k, v in r.items():
            if k not in ("attention", "head", "layer", "index"):
                want.setdefault(k, []).append([r["head"], v])
    mine = {score: c for score, c in cells}
    check(mine == want and len(cells) == len(want) and cli["sites"][0]["title"] == "self-attention",
          f"heads: a heatmap per column, 2 x 2 cells named L.H, of qkv heads --json's numbers "
          f"({sorted(mine)} vs {sorted(want)})")


def heads_while_training(b, run):
    """The run's probe records (its training probed every 50 steps): the section offers the
    classifier's one site, titled as the run's facts title it, with each score its records have
    in the server's column order; the panels are named as --ablate names the heads (L.H) and
    hold the records' numbers; clicking panel 1.0 outlines head 1.0's map in the grid."""
    import serve_browser_test as page_test
    records = page_test.probe_records(run)
    check(len(records) >= 2, f"the training wrote probe records ({len(records)})")
    if len(records) < 2:
        return
    b.wait("[...document.getElementById('hc-run').options].some(o => o.value === 'dyck')", 30,
           "dyck among the runs with probe records")
    page_test.choose(b, "#hc-run", "dyck")
    b.wait("document.querySelectorAll('#head-curves svg.head-panel').length === 4", 30,
           "the classifier's per-head grid")
    recorded = records[0]["probe"]["attentions"]["self"]
    scores = [c["name"] for c in page_test.COLUMNS if c["name"] in recorded]
    want = [[f"self/{s}", "self-attention: " + page_test.column(s)["title"]] for s in scores]
    options = b.js("[...document.getElementById('hc-score').options].map(o =>"
                   " [o.value, o.textContent])")
    check(options == want and "entropy" in scores,
          f"heads while training: the site titled from the run's facts, its scores in the "
          f"columns' order ({options})")
    page_test.choose(b, "#hc-score", "self/entropy")
    page_test.check_panels(b, records, "self", "entropy", "", "dyck, entropy")
    page_test.click(b, *page_test.center(b, "#head-curves svg.head-panel[data-name='1.0']"))
    b.wait(f"{page_test.LINKED}.length === 1", 10, "the clicked head's map outlined")
    check(b.js(page_test.LINKED) == ["1.0"],
          f"heads while training: clicking panel 1.0 outlines map 1.0 ({b.js(page_test.LINKED)})")


def drop_record_sites(run):
    """The probe records without their "sites", so the page can only title, order and name
    the attentions from the run's facts (what the server reads from the run's config)."""
    path = os.path.join(run, "metrics.jsonl")
    with open(path) as f:
        records = [json.loads(line) for line in f]
    for r in records:
        r.get("probe", {}).pop("sites", None)
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="qkv_serve_encoder_")
    server = None
    skipped = False
    try:
        run = os.path.join(work, "dyck")
        fx.run([qkv, "train", os.path.join(source, "configs", "dyck.toml"), "--run-dir", run, *TINY])
        drop_record_sites(run)
        server = fx.Server(qkv, [run])
        api(server, qkv, run)
        chromium = fx.chromium_for_pages()
        if chromium:
            failures.extend(page(qkv, run, server, chromium, work))
        else:
            skipped = True
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return fx.exit_status(failures, skipped)


if __name__ == "__main__":
    sys.exit(main())
