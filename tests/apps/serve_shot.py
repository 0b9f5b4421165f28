#!/usr/bin/env python3
"""A screenshot of qkv serve's page: serves RUN, types TEXT into it in headless Chromium, waits
for the outputs and the attention grid, and saves the page as OUT.png (docs/serve.md's figure).
--ablate HEADS clicks each head's map (--ablate names, e.g. cross.0.1) and waits for the answer
without them; --clip keeps only the input, the outputs, the grid and the next-token table
(docs/figures/serve-ablate.png).

Usage: serve_shot.py QKV_BINARY RUN TEXT OUT.png [--ablate HEADS] [--clip]
"""
import os
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402
from serve_browser_test import Browser, ask, center, click, failures  # noqa: E402

# The rectangle from the top of the look-inside section to the end of the next-token table,
# as wide as the widest of what it holds.
CLIP = """(() => {
  const top = document.getElementById('inspect-section').getBoundingClientRect();
  const end = document.getElementById('next').getBoundingClientRect();
  const wide = Math.max(...['grid', 'next', 'output'].map(id =>
      document.getElementById(id).getBoundingClientRect().right));
  return {x: top.left + scrollX, y: top.top + scrollY, width: Math.min(top.width, wide + 24 - top.left),
          height: end.bottom + 16 - top.top};
})()"""


def main():
    args = sys.argv[1:]
    clip = "--clip" in args
    if clip:
        args.remove("--clip")
    heads = []
    if "--ablate" in args:
        i = args.index("--ablate")
        heads = args[i + 1].split(",")
        del args[i:i + 2]
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
        for i, head in enumerate(heads):
            click(b, *center(b, f"canvas.map[data-name='{head}']"))
            b.wait("document.body.dataset.busy === 'false' && document.getElementById('output')"
                   f".dataset.ablate.split(',').length === {i + 1}", 60, f"the answer without {head}")
        b.js("document.getElementById('tip').hidden = true; window.scrollTo(0, 0)")
        b.screenshot(out, b.js(CLIP) if clip else None)
    finally:
        if b:
            b.close()
        server.stop()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"wrote {out}" if not failures else "FAILED: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
