#!/usr/bin/env python3
"""A screenshot of qkv serve's page: serves RUN, types TEXT into it in headless Chromium, waits
for the outputs and the attention grid, and saves the page as OUT.png (docs/serve.md's figure).

Usage: serve_shot.py QKV_BINARY RUN TEXT OUT.png [--height PIXELS]
"""
import os
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402
from serve_browser_test import Browser, ask, failures  # noqa: E402


def main():
    args = sys.argv[1:]
    if len(args) != 4:
        raise SystemExit(__doc__)
    qkv, run, text, out = args
    profile = tempfile.mkdtemp(prefix="qkv_serve_shot_")
    server = fx.Server(os.path.abspath(qkv), [run])
    b = None
    try:
        b = Browser(shutil.which("chromium"), profile)
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true'", 60, "the page")
        ask(b, os.path.basename(os.path.normpath(run)), text)
        b.js("window.scrollTo(0, 0)")
        b.screenshot(out)
    finally:
        if b:
            b.close()
        server.stop()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"wrote {out}" if not failures else "FAILED: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
