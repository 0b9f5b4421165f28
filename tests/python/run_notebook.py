"""Executes a notebook headless, as a reader's Jupyter would, and fails on any cell's error.

    run_notebook.py NOTEBOOK OUT_DIR

The kernel is /usr/bin/python3's (python3-ipykernel), with this process's environment
(PYTHONPATH to the built module, QKV_SOURCE the repository); the notebook writes its runs and
figures to QKV_NOTEBOOK_OUT = OUT_DIR. The executed notebook is saved beside them
(OUT_DIR/executed.ipynb) to read what it printed.
"""
import os
import shutil
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main():
    notebook, out = sys.argv[1:3]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    os.environ["QKV_NOTEBOOK_OUT"] = out
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger notes
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(notebook)}})
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"FAILED: {notebook}: {e}")
        return 1
    finally:
        nbformat.write(nb, os.path.join(out, "executed.ipynb"))
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                print(o.get("text", ""), end="")
    print(f"ok: {notebook} ran, every cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
