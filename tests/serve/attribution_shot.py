#!/usr/bin/env python3
"""A screenshot of qkv serve's "why this output" panels (docs/figures/serve-attribution.png):
serves RUN in headless Chromium, types TEXT, presses Attribute with METHOD and clicks output
token ROW (from 0), then types CORRUPT into the patching panel and presses "Exact on top K";
saves the two panels as OUT.png.

Usage: attribution_shot.py QKV_BINARY RUN TEXT CORRUPT OUT.png [--method M] [--row R] [--k K]
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "apps"))
import serve_fixture as fx  # noqa: E402
from serve_browser_test import Browser, center, click  # noqa: E402

# From the first "Why this output" heading to the end of the patching panel.
CLIP = """(() => {
  const h = [...document.querySelectorAll('h3')].find(x => x.textContent.startsWith('Why this'));
  const top = h.getBoundingClientRect(), end = document.getElementById('patch').getBoundingClientRect();
  const s = document.getElementById('inspect-section').getBoundingClientRect();
  return {x: s.left + scrollX, y: top.top + scrollY - 4, width: s.width,
          height: end.bottom - top.top + 12};
})()"""


def option(args, name, default):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def main():
    args = sys.argv[1:]
    method = option(args, "--method", "integrated-gradients")
    row, k = int(option(args, "--row", "0")), int(option(args, "--k", "4"))
    if len(args) != 5:
        raise SystemExit(__doc__)
    qkv, run, text, corrupt, out = args
    profile = tempfile.mkdtemp(prefix="qkv_attribution_shot_")
    server = fx.Server(os.path.abspath(qkv), [run])
    b = Browser(shutil.which("chromium") or "chromium", profile)
    try:
        b.call("Page.navigate", url=server.url)
        b.wait("document.body && document.body.dataset.ready === 'true'", 60, "the page")
        b.type_into("#text", text)
        b.js(f"document.getElementById('attr-method').value = {json.dumps(method)}")
        click(b, *center(b, "#attr-go"))
        b.wait("document.getElementById('attr').dataset.state === 'done'", 120, "the attribution")
        click(b, *center(b, f"#attr .attr-out[data-row='{row}']"))
        b.type_into("#patch-corrupt", corrupt)
        b.js(f"document.getElementById('patch-k').value = {k}")
        click(b, *center(b, "#patch-exact"))
        b.wait("document.getElementById('patch').dataset.state === 'done'", 120, "the patching")
        b.screenshot(out, b.js(CLIP))
        problems = b.problems()
        if problems:
            raise SystemExit(f"FAILED: the page reported {problems}")
    finally:
        b.close()
        server.stop()
        shutil.rmtree(profile, ignore_errors=True)
    print("wrote " + out)


if __name__ == "__main__":
    main()
