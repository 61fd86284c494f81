"""A fast guard for the docs build (tests/test_docs_site.py, slow): nbdev's doc processor re-runs, on its own, every
non-exported cell that holds an import, with only the exported cells and other import cells before it. A cell that
mixes an import with code that needs an earlier test cell's names then fails the site build (it did, twice). So
imports go in a notebook's hidden import cell; the mixed cells that remain are listed here, each known to run alone."""
import ast, json
from pathlib import Path

NBS = Path(__file__).resolve().parents[1] / 'nbs'
EXPORT = ('#| export', '#|export', '#| exporti', '#| exports')

# (notebook, first line of the cell): checked by the docs build to run on their own
KNOWN = {('01_tensors.ipynb', '#| hide'), ('01_tensors.ipynb', "many = [b'abcdefgh'[:i % 9] for i in range(100_000)]"),
         ('02_model_repository.ipynb', '#| hide'), ('04b_onnx_backend.ipynb', '#| hide'),
         ('05_scheduler.ipynb', 'from collections import namedtuple'), ('10a_main.ipynb', '#| slow'), ('index.ipynb', 'from pathlib import Path'), ('index.ipynb', 'import numpy as np'),
         ('index.ipynb', 'import tritonclient.http as httpclient')}


def mixed_cells():
    "Non-exported code cells with an import and other statements: nbdev's 'Found cells containing imports and other code'."
    for p in sorted(NBS.glob('*.ipynb')):
        for c in json.loads(p.read_text())['cells']:
            src = ''.join(c['source'])
            head = src.splitlines()[:3]
            if c['cell_type'] != 'code' or 'nbdev_export()' in src or any(l.startswith(EXPORT) for l in head): continue
            if any('eval: false' in l for l in head): continue
            try: tree = ast.parse('\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(('%', '!'))))
            except SyntaxError: continue
            nodes = list(ast.walk(tree))
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in nodes) and any(isinstance(n, (ast.Expr, ast.Assign)) for n in nodes):
                yield p.name, src.splitlines()[0]


def test_no_new_cell_mixes_imports_and_code():
    new = [c for c in mixed_cells() if c not in KNOWN]
    assert new == [], f"move these imports into the notebook's hidden import cell: {new}"
