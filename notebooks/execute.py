"""Execute a notebook on run directories and save it with its outputs, so that a reader on a code
host or in the docs site sees its tables and figures (``make docs`` runs it on the demo's
directive runs). Its own ``RUN_DIR`` / ``RUN_DIRS`` cell is saved as it is: the runs are given to
this execution only.

    python notebooks/execute.py notebooks/analysis.ipynb RUN [RUN ...]   # paths relative to notebooks/
    python notebooks/execute.py notebooks/benchmarks.ipynb               # reads results/, no runs
"""
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

path, runs = Path(sys.argv[1]), sys.argv[2:]
nb = nbformat.read(path, as_version=4)
source = nb.cells[1].source
if runs:  # a notebook that reads runs is given them; one that reads the tracked results/ needs none
    nb.cells[1].source = source.replace("RUN_DIRS = None", f"RUN_DIRS = {runs!r}", 1)
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
nb.cells[1].source = source
nbformat.write(nb, path)
