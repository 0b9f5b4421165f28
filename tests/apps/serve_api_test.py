#!/usr/bin/env python3
"""qkv serve's JSON API through the real binary: answers, every bad input, safety.

Trains a short copy run and a tiny character LM (serve_fixture.py), keeps a third run training
beside, and serves all three. Checks: the answers agree with `qkv translate` / `qkv generate`;
"ablate" answers as `--ablate` does (an unknown head a 400, an empty one the same as none), and
the heads and lens routes answer as `qkv heads --json` and `qkv lens --json` (an attribution
that fails answers the lens with its error beside it), /api/head_columns as the head table's
"columns", every one of them in the copy run's rows; each bad input
(empty text, symbols outside the vocabulary, a prompt longer than the context, malformed JSON,
wrong types, out-of-range options) is a 400 with a one-line JSON message; the body-size bound is
a 413; unknown runs, `..`, absolute paths and symbolic links out of a run are 404s; a
half-written metrics line is never returned; 24 concurrent requests (some ablated) while the
training runs all get the sequential answers; a non-loopback --host warns; SIGTERM and SIGINT
stop the server with exit 0.

Usage: serve_api_test.py QKV_BINARY SOURCE_DIR
Exit 0: passed; 1: failed.
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402

failures = []


def check(ok, what):
    print(("  ok: " if ok else "  FAILED: ") + what)
    if not ok:
        failures.append(what)


def check_error(s, method, path, body=None, raw=None, status=400, says=""):
    code, j, _ = s.request(method, path, body, raw)
    one_line = isinstance(j, dict) and isinstance(j.get("error"), str) and "\n" not in j["error"]
    check(code == status and one_line and says in j["error"],
          f"{method} {path} {str(body if raw is None else raw)[:60]!r} -> {status} '{says}' "
          f"(got {code} {str(j)[:160]})")


def answers(s, qkv, copy, lm):
    code, runs, _ = s.get("/api/runs")
    names = [r["name"] for r in runs] if code == 200 else []
    check(names == ["copy", "lm", "live", "partial"], f"/api/runs lists the four runs ({names})")
    facts = {r["name"]: r.get("facts", {}) for r in runs}
    check(facts["copy"].get("task") == "copy" and facts["lm"].get("block_size") is not None,
          "each run's facts from its config")
    check(facts["copy"].get("capabilities") == ["decode"]
          and facts["lm"].get("capabilities") == ["generate"],
          "each run's capabilities by name, from its family")
    code, t, _ = s.post("/api/runs/copy/translate", {"text": "3 1 4 1 5", "beam": 3})
    cli = fx.run([qkv, "translate", copy, "3 1 4 1 5"]).stdout.strip()
    cli_beam = fx.run([qkv, "translate", copy, "3 1 4 1 5", "--beam", "3"]).stdout.strip()
    check(code == 200 and t["greedy"] == cli and t["beam"] == cli_beam,
          f"translate: greedy and beam agree with qkv translate ({t} / {cli!r}, {cli_beam!r})")
    code, sample = fx.generated_text(s.post("/api/runs/lm/generate", {
        "prompt": "ROMEO:", "tokens": 30, "temperature": 0.8, "top_k": 200, "seed": 7}))
    cli = fx.run([qkv, "generate", lm, "--prompt", "ROMEO:", "--tokens", "30", "--seed", "7",
                  "--quiet"]).stdout
    check(code == 200 and "ROMEO:" + sample == cli.rstrip("\n"),
          f"generate: the streamed sample is qkv generate's ({sample!r} / {cli!r})")
    code, a, _ = s.post("/api/runs/copy/attention", {"text": "3 1 4"})
    kinds = [k["kind"] for k in a["kinds"]] if code == 200 else []
    check(kinds == ["encoder_self", "decoder_self", "cross"], f"Seq2Seq attention kinds {kinds}")
    sites = [(k["site"]["name"], k["site"]["title"], k["site"]["head_prefix"], k["site"]["queries"],
              k["site"]["keys"], k["site"]["causal"]) for k in a["kinds"]] if code == 200 else []
    check(sites == [("encoder", "encoder self-attention", "encoder.", "input", "input", False),
                    ("decoder", "decoder self-attention", "decoder.", "output", "output", True),
                    ("cross", "cross-attention", "cross.", "output", "input", False)],
          f"each view carries its attention site: name, title, head prefix, sides ({sites})")
    code, la, _ = s.post("/api/runs/lm/attention", {"text": "ROMEO"})
    lm_sites = [(k["kind"], k["site"]["name"], k["site"]["head_prefix"], k["site"]["causal"])
                for k in la["kinds"]] if code == 200 else []
    check(lm_sites == [("causal", "self", "", True)],
          f"a language model's one site, its heads named without a prefix ({lm_sites})")
    sums_ok = all(abs(sum(h[i * len(k["cols"]):(i + 1) * len(k["cols"])]) - 1) < 1e-3
                  for k in a["kinds"] for layer in k["layers"] for h in layer
                  for i in range(len(k["rows"])))
    check(sums_ok and len(a["kinds"][0]["layers"]) == 2 and len(a["kinds"][0]["layers"][0]) == 2,
          "every map of every layer and head: rows sum to 1 (2 layers x 2 heads)")
    code, n, _ = s.post("/api/runs/lm/next", {"text": "ROMEO", "k": 3})
    check(code == 200 and len(n["steps"]) == 5 and all(len(st["top"]) == 3 for st in n["steps"])
          and all(abs(sum(o["p"] for o in st["top"])) <= 1 + 1e-9 for st in n["steps"]),
          "next-token probabilities: top 3 at each of 5 positions")
    code, m, _ = s.get("/api/runs/copy/metrics?offset=0")
    check(code == 200 and len(m["records"]) > 10 and m["next"] == os.path.getsize(
        os.path.join(copy, "metrics.jsonl")), "metrics from offset 0: every line, next = size")
    code, m2, _ = s.get(f"/api/runs/copy/metrics?offset={m['next']}")
    check(code == 200 and m2["records"] == [], "metrics from the end: nothing new")
    code, m3, _ = s.get("/api/runs/copy/metrics?since=150")
    check(code == 200 and m3["records"] and all(r["step"] > 150 for r in m3["records"]),
          "metrics since step 150")
    code, f, _ = s.get("/api/runs/copy/files/config.toml")
    check(code == 200 and "[model]" in f, "a file inside a run folder is served")
    code, c, _ = s.post("/api/runs/copy/translate", {"text": "3 1", "checkpoint": "step-00000100"})
    check(code == 200, f"a kept checkpoint by name ({code} {c})")


def cli_json(cmd):
    return json.loads(fx.run(cmd).stdout)


def inspection(s, qkv, copy, lm):
    """The look-inside questions: ablations, the head table, the logit lens."""
    text, head = "3 1 4 1 5", "cross.0.1"
    tr = "/api/runs/copy/translate"
    code, plain, _ = s.post(tr, {"text": text})
    code2, cut, _ = s.post(tr, {"text": text, "ablate": head})
    cli = fx.run([qkv, "translate", copy, text, "--ablate", head]).stdout.strip()
    cli_beam = fx.run([qkv, "translate", copy, text, "--ablate", head, "--beam", "4"]).stdout.strip()
    check(code == code2 == 200 and cut["greedy"] == cli and cut["beam"] == cli_beam,
          f"translate with ablate {head}: qkv translate --ablate's output ({cut} / {cli!r})")
    check(cut["greedy"] != plain["greedy"],
          f"the ablation changes the output ({plain['greedy']!r} -> {cut['greedy']!r})")
    for path, body in ((tr, {"text": text}), ("/api/runs/copy/attention", {"text": text, "k": 3}),
                       ("/api/runs/lm/next", {"text": "ROMEO", "k": 3})):
        none, empty = s.post(path, body)[:2], s.post(path, {**body, "ablate": ""})[:2]
        check(none[0] == 200 and none == empty, f"{path}: an empty ablate answers as none")
    code, a, _ = s.post("/api/runs/copy/attention", {"text": text, "k": 3})
    code2, n, _ = s.post("/api/runs/copy/next", {"text": text, "k": 3})
    check(code == code2 == 200 and a["steps"] == n["steps"],
          "attention with k: next's steps from the same pass")
    code, a2, _ = s.post("/api/runs/copy/attention", {"text": text, "k": 3, "ablate": head})
    check(code == 200 and a2["kinds"] != a["kinds"] and a2["steps"] != a["steps"],
          "attention and next-token steps with an ablation differ from without")
    code, g = fx.generated_text(s.post("/api/runs/lm/generate", {
        "prompt": "ROMEO:", "tokens": 30, "seed": 7, "ablate": "1.0,0.1"}))
    cli = fx.run([qkv, "generate", lm, "--prompt", "ROMEO:", "--tokens", "30", "--seed", "7",
                  "--ablate", "1.0,0.1", "--quiet"]).stdout
    check(code == 200 and "ROMEO:" + g == cli.rstrip("\n"),
          f"generate with ablate: qkv generate --ablate's sample ({g!r} / {cli!r})")
    check_error(s, "POST", tr, {"text": text, "ablate": "cross.9.1"},
                says="translate --ablate: no head cross.9.1 (nearest: cross.1.1)")
    check_error(s, "POST", "/api/runs/lm/next", {"text": "a", "ablate": "0.7"}, says="no head 0.7")
    check_error(s, "POST", "/api/runs/lm/generate", {"prompt": "a", "ablate": "x"},
                says="expected LAYER.HEAD")
    check_error(s, "POST", tr, {"text": text, "ablate": 3}, says="ablate must be a string")

    code, h, _ = s.post("/api/runs/lm/heads", {})
    cli = cli_json([qkv, "heads", lm, "--json", "--threads", "1"])
    check(code == 200 and h == cli and len(h["heads"]) == 4,
          f"lm heads: qkv heads --json's table ({code}, {len(h.get('heads', []))} heads)")
    body = {"batches": 2, "probes": 2, "seed": 3, "ablate": head}
    code, h, _ = s.post("/api/runs/copy/heads", body)
    cli = cli_json([qkv, "heads", copy, "--json", "--threads", "1", "--batches", "2", "--probes",
                    "2", "--seed", "3", "--ablate", head])
    check(code == 200 and h == cli and len(h["heads"]) == 12,
          f"copy heads with options and ablate: qkv heads --json's ({code})")
    # The columns: the score registry's (test_apps_inspect checks them against it), the same
    # from /api/head_columns; the copy run's three attentions have every column between them,
    # and every number of a row is a named column.
    code, cols, _ = s.get("/api/head_columns")
    names = [c["name"] for c in cols.get("columns", [])] if code == 200 else []
    keys = {k for r in h.get("heads", []) for k in r} - {"attention", "head", "layer", "index"}
    check(code == 200 and cols["columns"] == h["columns"] and len(names) >= 8
          and set(names) == keys and all(c["title"] and c["description"] for c in cols["columns"]),
          f"head columns: /api/head_columns is the table's, each with a title and a description, "
          f"every one in the copy run's rows ({code}, {names}, {sorted(keys)})")
    check_error(s, "POST", "/api/runs/copy/heads", {"batches": 0}, says="batches must be in 1..8")
    check_error(s, "POST", "/api/runs/copy/heads", {"probes": 1000}, says="probes must be in 1..16")
    check_error(s, "POST", "/api/runs/copy/heads", {"split": "nope"}, says="nope")

    code, l, _ = s.post("/api/runs/lm/lens", {"text": "ROMEO", "target": "a", "top": 3})
    cli = cli_json([qkv, "lens", lm, "ROMEO", "--target", "a", "--top", "3", "--json"])
    check(code == 200 and l == cli and len(l["layers"]) == 3 and l["attribution"]["parts"],
          f"lm lens with a target: qkv lens --json's ({code})")
    code, l, _ = s.post("/api/runs/copy/lens", {"text": text, "ablate": head})
    cli = cli_json([qkv, "lens", copy, text, "--json", "--ablate", head])
    check(code == 200 and l == cli and "attribution" not in l,
          f"copy lens with ablate: qkv lens --json's ({code})")
    # The attribution's failure answers the lens with the reason beside it (one request).
    for run, folder, words, target, says in (
            ("lm", lm, "ROMEO", "zz", "'zz' is no token of the model's output"),
            ("copy", copy, text, "4", "needs a pre-LN model")):
        code, l, _ = s.post(f"/api/runs/{run}/lens", {"text": words, "target": target})
        cli = cli_json([qkv, "lens", folder, words, "--json"])
        err = l.pop("attribution_error", None) if isinstance(l, dict) else None
        check(code == 200 and l == cli and isinstance(err, str) and says in err
              and "\n" not in err and "attribution" not in l,
              f"{run} lens with target {target!r}: qkv lens --json's lens and the attribution's "
              f"one-line error '{says}' ({code}, {err!r})")
    check_error(s, "POST", "/api/runs/lm/lens", {"text": "ROMEO", "top": 0}, says="top must be in")
    check_error(s, "POST", "/api/runs/lm/lens", {"text": ""}, says="empty")


def bad_inputs(s, work):
    tr, gen = "/api/runs/copy/translate", "/api/runs/lm/generate"
    check_error(s, "POST", tr, {"text": ""}, says="empty")
    check_error(s, "POST", tr, {"text": "   "}, says="empty")
    check_error(s, "POST", tr, {"text": "3 x 4"}, says="'x' is not in the task's vocabulary")
    check_error(s, "POST", gen, {"prompt": "a#b~"}, says="not in the model's vocabulary")
    check_error(s, "POST", gen, {"prompt": ""}, says="empty")
    check_error(s, "POST", gen, {"prompt": "abcdefghijklmnopq"}, says="more than the model's context of 16")
    check_error(s, "POST", "/api/runs/lm/attention", {"text": "x" * 17}, says="more than")
    check_error(s, "POST", tr, {"text": " ".join(["1"] * 300)}, says="more than the server's limit of 256")
    check_error(s, "POST", tr, raw="{\"text\": ", says="not valid JSON")
    check_error(s, "POST", tr, raw="[1, 2]", says="JSON object")
    check_error(s, "POST", tr, {"text": 5}, says="text must be a string")
    check_error(s, "POST", tr, {"text": "1 2", "beam": 0}, says="beam must be in 1..16")
    check_error(s, "POST", tr, {"text": "1 2", "beam": "4"}, says="beam must be an integer")
    check_error(s, "POST", gen, {"prompt": "a", "tokens": 100000}, says="tokens must be in")
    check_error(s, "POST", gen, {"prompt": "a", "top_p": 0}, says="--top-p must be in (0, 1]")
    check_error(s, "POST", gen, {"prompt": "a", "temperature": -1}, says="temperature")
    check_error(s, "POST", "/api/runs/lm/next", {"text": "a", "k": 1000}, says="k must be in")
    check_error(s, "POST", "/api/runs/lm/translate", {"text": "a"}, says="cannot translate")
    check_error(s, "POST", "/api/runs/copy/generate", {"prompt": "1"}, says="cannot generate")
    check_error(s, "POST", tr, {"text": "1", "checkpoint": "../../x"}, says="checkpoint must be")
    check_error(s, "POST", tr, {"text": "1", "checkpoint": "step-99999999"}, status=404,
                says="no checkpoint")
    check_error(s, "GET", "/api/runs/copy/metrics?offset=x", says="offset must be an integer")
    check_error(s, "POST", tr, raw="{\"text\": \"" + "1 " * 40000 + "\"}", status=413,
                says="larger than the server's limit")
    check_error(s, "POST", tr, {"text": "1 " * 3000}, says="more than the limit of 4096")
    # Nothing outside the named runs.
    check_error(s, "GET", "/api/runs/nope/metrics", status=404, says="no run named 'nope'")
    check_error(s, "POST", "/api/runs/nope/translate", {"text": "1"}, status=404, says="nope")
    for path in ["/api/runs/copy/files/../lm/config.toml", "/api/runs/copy/files/%2e%2e/lm/config.toml",
                 "/api/runs/copy/files/..%2flm%2fconfig.toml", "/api/runs/copy/files/%2fetc%2fpasswd",
                 "/api/runs/copy/files//etc/passwd", "/api/runs/../copy/config.toml",
                 "/api/runs/copy/files/escape", "/api/runs/copy/files/escape-dir/passwd",
                 "/api/runs/copy/files/checkpoints/latest/model.safetensors",
                 "/api/runs/copy/files/nothing.svg", "/etc/passwd", "/nothing"]:
        code, j, _ = s.get(path)
        check(code == 404 and isinstance(j, dict) and "error" in j, f"GET {path} -> 404 ({code})")


def half_written_line(s, partial):
    path = os.path.join(partial, "metrics.jsonl")
    size = os.path.getsize(path)
    with open(path, "a") as f:
        f.write('{"step": 99999, "loss": 0.5')
        f.flush()
        code, m, _ = s.get(f"/api/runs/partial/metrics?offset={size}")
        check(code == 200 and m["records"] == [] and m["next"] == size,
              f"a line not yet ended is not read ({m})")
        f.write(', "lr": 0.001}\n')
    code, m, _ = s.get(f"/api/runs/partial/metrics?offset={size}")
    check(code == 200 and [r["step"] for r in m["records"]] == [99999],
          f"once ended, it is ({m})")


def concurrent_requests(s):
    """24 requests at once (four kinds, two runs, some with an ablation) while the live run
    trains: each gets the answer it gets alone (one request's ablation reaches no other)."""
    reqs = []
    for i in range(24):
        text = " ".join(str(1 + (i + j) % 9) for j in range(3 + i % 5))
        kind = i % 4
        cut = {"ablate": "cross.0.1" if kind < 2 else "1.0"} if i % 3 == 0 else {}
        if kind == 0:
            reqs.append(("/api/runs/copy/translate", {"text": text, "beam": 2, **cut}))
        elif kind == 1:
            reqs.append(("/api/runs/copy/attention", {"text": text, **cut}))
        elif kind == 2:
            reqs.append(("/api/runs/lm/next", {"text": "ROMEO"[: 1 + i % 5], "k": 4, **cut}))
        else:
            reqs.append(("/api/runs/lm/generate", {"prompt": "KING", "tokens": 20, "seed": i,
                                                   **cut}))
    alone = [s.post(p, b)[:2] for p, b in reqs]
    with concurrent.futures.ThreadPoolExecutor(len(reqs)) as pool:
        together = list(pool.map(lambda r: s.post(*r)[:2], reqs))
    same = [a == t for a, t in zip(alone, together)]
    check(all(a[0] == 200 for a in alone) and all(same),
          f"{len(reqs)} concurrent requests (some ablated) beside a training: all 200 and as "
          f"answered alone ({sum(same)}/{len(reqs)} the same)")


def signals_and_host(qkv, copy):
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        srv = fx.Server(qkv, [copy])
        code, out, err = srv.stop(sig)
        check(code == 0 and "stopped" in out, f"{name} stops the server, exit 0 ({code} {err!r})")
    srv = fx.Server(qkv, [copy], ["--host", "0.0.0.0"])
    code, out, err = srv.stop()
    check("warning" in err and "0.0.0.0" in err, f"--host 0.0.0.0 warns ({err!r})")
    srv = fx.Server(qkv, [copy])
    r = subprocess.run([qkv, "serve", copy, "--port", str(srv.port)], capture_output=True,
                       text=True, timeout=30)
    srv.stop()
    check(r.returncode == 1 and "cannot listen on 127.0.0.1:" in r.stderr,
          f"a port already taken: one line, exit 1 ({r.returncode} {r.stderr!r})")
    r = subprocess.run([qkv, "serve", os.path.dirname(copy) + "/no-such-run"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 1 and r.stderr.count("\n") == 1 and "no such run folder" in r.stderr,
          f"a missing folder: one line, exit 1 ({r.returncode} {r.stderr!r})")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="qkv_serve_api_")
    live = server = None
    try:
        copy, lm = fx.train_runs(qkv, source, work)
        partial = os.path.join(work, "partial")
        shutil.copytree(copy, partial)
        os.symlink("/etc/passwd", os.path.join(copy, "escape"))
        os.symlink("/etc", os.path.join(copy, "escape-dir"))
        live, live_dir = fx.start_live(qkv, source, work)
        server = fx.Server(qkv, [copy, lm, live_dir, partial])
        answers(server, qkv, copy, lm)
        inspection(server, qkv, copy, lm)
        bad_inputs(server, work)
        half_written_line(server, partial)
        concurrent_requests(server)
        code, _, _ = server.get("/api/runs")
        check(code == 200 and live.poll() is None, "the server and the training still run")
        code, out, err = server.stop()
        server = None
        check(code == 0 and err == "", f"the server stops cleanly, nothing on stderr ({err!r})")
        signals_and_host(qkv, copy)
    finally:
        if server:
            server.stop()
        if live:
            fx.stop(live)
        shutil.rmtree(work, ignore_errors=True)
    print("FAILED: " + "; ".join(failures) if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
