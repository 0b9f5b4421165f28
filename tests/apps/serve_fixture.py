"""What the qkv serve tests share: short real runs, a server on a free port, HTTP calls.

Trains, through the real binary, a short copy-task run and a tiny character language model
(seconds each, one thread), and can keep a third copy run training in the background (the
run a page watches grow; extra flags, such as --probe.every, added to its training). Starts
`qkv serve ... --port 0` and reads the chosen port from its first line on stdout. HTTP goes
through http.client straight to 127.0.0.1 (no proxy). Finds the Chromium a page test drives,
and turns a test's failures and skipped page into its exit status.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import time

COPY = ["--quiet", "--threads", "1", "--train.max_steps", "200", "--train.epochs", "100", "--train.eval_every", "100",
        "--train.log_every", "10", "--train.eval_examples", "10", "--data.train_size", "1000",
        "--data.valid_size", "10", "--data.test_size", "10", "--optim.warmup", "20",
        "--model.d_model", "32", "--model.d_ff", "64", "--model.heads", "2",
        "--train.log_attention_entropy", "true"]
LM = ["--quiet", "--threads", "1", "--model.d_model", "32", "--model.d_ff", "64",
      "--model.decoder_layers", "2", "--model.heads", "2", "--data.block_size", "16",
      "--model.max_len", "16", "--data.batch_size", "16", "--train.max_steps", "60",
      "--train.log_every", "10", "--train.eval_every", "30", "--train.eval_iters", "2",
      "--optim.warmup", "10", "--optim.lr", "1e-2"]
# The run a training keeps writing while the server reads it: long, logging every 2 steps.
LIVE = ["--quiet", "--threads", "1", "--train.max_steps", "100000", "--train.epochs", "100000",
        "--optim.warmup", "10", "--train.eval_every", "50",
        "--train.log_every", "2", "--train.eval_examples", "5", "--data.train_size", "200",
        "--data.valid_size", "5", "--data.test_size", "5", "--model.d_model", "16",
        "--model.d_ff", "32", "--model.heads", "2", "--model.encoder_layers", "1",
        "--model.decoder_layers", "1", "--data.batch_size", "16"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def train_runs(qkv, source, work):
    """The copy run and the LM run, trained side by side; their folders."""
    copy, lm = os.path.join(work, "copy"), os.path.join(work, "lm")
    jobs = [[qkv, "train", os.path.join(source, "configs", "copy.toml"), "--run-dir", copy, *COPY],
            [qkv, "train", os.path.join(source, "configs", "shakespeare-char.toml"), "--run-dir",
             lm, *LM]]
    procs = [(c, subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
             for c in jobs]
    for c, p in procs:
        out = p.communicate()[0]
        if p.returncode != 0:
            raise SystemExit(f"FAILED: {' '.join(c)}\n{out}")
    return copy, lm


def start_live(qkv, source, work, extra=()):
    """A copy run that keeps training (stop it with stop()), LIVE's flags and then extra; returns
    (process, folder) once its metrics.jsonl exists."""
    live = os.path.join(work, "live")
    p = subprocess.Popen([qkv, "train", os.path.join(source, "configs", "copy.toml"), "--run-dir",
                          live, *LIVE, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(600):
        if os.path.exists(os.path.join(live, "metrics.jsonl")):
            return p, live
        if p.poll() is not None:
            raise SystemExit(f"FAILED: the live training exited: {p.stderr.read().decode()}")
        time.sleep(0.05)
    raise SystemExit("FAILED: the live training wrote no metrics.jsonl in 30 s")


def stop(p, sig=signal.SIGTERM, timeout=30):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


class Server:
    """`qkv serve FOLDERS --port 0`: the process and its port."""

    def __init__(self, qkv, folders, extra=()):
        self.proc = subprocess.Popen([qkv, "serve", *folders, "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://[^/]*:(\d+)/", line)
        if not m:
            raise SystemExit(f"FAILED: qkv serve printed no address: {line!r} "
                             f"{self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}/"

    def request(self, method, path, body=None, raw=None, timeout=60):
        """(status, parsed JSON or text, headers) of one request on a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        try:
            return r.status, json.loads(text), r.getheaders()
        except json.JSONDecodeError:
            return r.status, text, r.getheaders()

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body=None, raw=None):
        return self.request("POST", path, body, raw)

    def stop(self, sig=signal.SIGTERM):
        code = stop(self.proc, sig)
        return code, self.proc.stdout.read(), self.proc.stderr.read()


def generated_text(status_body):
    """The text of a streamed sample's JSON lines (the body as one string)."""
    status, body, _ = status_body
    text = ""
    for line in body.splitlines() if isinstance(body, str) else []:
        j = json.loads(line)
        if "error" in j:
            raise AssertionError(f"sample failed: {j['error']}")
        text += j.get("text", "")
    return status, text


def chromium_for_pages():
    """The Chromium a page test drives over the DevTools protocol, or None where the page cannot
    be checked: no chromium on PATH, or no python3-websocket to speak to it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import websocket  # noqa: F401
    except ImportError:
        chromium = None
    return chromium


def exit_status(failures, page_skipped):
    """A test's verdict printed and its exit status: 1 when anything failed, else 77 (skipped)
    when its page could not be checked (chromium_for_pages), else 0."""
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    if page_skipped:
        print("SKIPPED (the page): needs chromium and python3-websocket")
        return 77
    print("passed")
    return 0
