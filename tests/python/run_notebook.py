#!/usr/bin/python3
"""Executes a notebook with a real Jupyter kernel (nbclient, Debian's python3-nbclient) and
writes the executed copy, outputs included. Exit 1, with the failing cell's error, when a cell
raises. Used by tests/server/notebook_test.cc.

    run_notebook.py IN.ipynb OUT.ipynb [timeout-seconds]
"""
import sys

import nbclient
import nbformat


def main():
    src, out = sys.argv[1], sys.argv[2]
    timeout = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    nb = nbformat.read(src, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3")
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        nbformat.write(nb, out)
        print("a cell failed:\n%s" % e, file=sys.stderr)
        return 1
    nbformat.write(nb, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
