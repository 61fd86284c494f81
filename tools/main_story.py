"""Which names does a layer notebook's main story call that only its appendix defines? (issue 43)

A layer notebook tells its main story first; its appendix starts at the first `Appendix` or `Hardening` heading and
holds what only hardening or fidelity needs. A reader of the main story should not meet a name nothing has explained,
so every appendix-only name a main-story code cell uses must at least be named (in backticks) in the main story's
prose, which says what it does and links the appendix section that defines it.

    python tools/main_story.py 05_scheduler      # the names, where they are defined and used, and which are unexplained
    python tools/main_story.py                   # every layer notebook

Precise on purpose (tests/test_main_story.py builds on it): an appendix "definition" is a module-level `def`, `class`
(a `@patch` method counts under its own name) or an UPPER_CASE constant of an appendix code cell; a "use" is a name
loaded or an attribute read in a main-story code cell; names any main-story cell binds itself (locals, loop
variables, parameters, imports, its own defs) and builtins are left out.
"""
import ast, builtins, json, re, sys
from pathlib import Path

NBS = Path(__file__).resolve().parents[1] / 'nbs'
APPENDIX = re.compile(r'^#{1,6}\s*(Appendix|Hardening)\b', re.M)
CONSTANT = re.compile(r'^_?[A-Z][A-Z0-9_]*$')
FENCE = re.compile(r'^(```|~~~).*?^\1', re.M | re.S)
# An attribute read that only shares its name with an appendix @patch method (the checker cannot know types)
NOT_USES = {'04_pb_utils': {'value': "`_ErrorCode.__int__` reads the Enum's own `.value`, not the appendix's `Metric.value`"},
            '09_metrics': {'get': "`s.labels.get` is a dict's, not the appendix's `CKMSQuantiles.get`"}}
BACKTICKS = re.compile(r'`([^`]+)`')


def _source(cell) -> str:
    src = cell['source']
    return src if isinstance(src, str) else ''.join(src)


def _tree(cell):
    "The cell's code as an ast (IPython magics and shell lines dropped), or None if it does not parse."
    code = '\n'.join(l for l in _source(cell).splitlines() if not l.lstrip().startswith(('%', '!')))
    try: return ast.parse(code)
    except SyntaxError: return None


def split(cells) -> int | None:
    "Index of the first markdown cell with an Appendix or Hardening heading (None: the notebook has no appendix)."
    for i, c in enumerate(cells):
        if c['cell_type'] == 'markdown' and APPENDIX.search(_source(c)): return i
    return None


def defined(tree) -> set:
    "Module-level defs, classes (@patch methods by their own name) and UPPER_CASE constants of one cell."
    names = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name) and CONSTANT.match(t.id): names.add(t.id)
    return names


def bound(tree) -> set:
    "Every name the cell binds anywhere: assignments, loop and with targets, parameters, imports, defs, classes."
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)): names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): names.add(n.name)
        elif isinstance(n, ast.arg): names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split('.')[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name: names.add(n.name)
    return names


def used(tree) -> dict:
    "Name loads and attribute reads of one cell, each with its first line."
    names = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load): names.setdefault(n.id, n.lineno)
        elif isinstance(n, ast.Attribute): names.setdefault(n.attr, n.lineno)
    return names


def mentioned(text:str) -> set:
    "Words inside backtick spans of the prose: `_run_many`, `self._drop_cancelled(batch)` and `OrderedDelivery.put` all count."
    return {w for span in BACKTICKS.findall(FENCE.sub('', text)) for w in re.findall(r'\w+', span)}


def check(nb:dict, ignore=()) -> dict:
    """{name: {'defined': appendix cell, 'used': [main cells], 'explained': bool}} for every appendix-only name the
    main story's code uses. `nb` is a notebook as json (a dict with 'cells'); `ignore`: names known not to be uses."""
    cells = nb['cells']
    cut = split(cells)
    if cut is None: return {}
    trees = [(i, c, _tree(c) if c['cell_type'] == 'code' else None) for i, c in enumerate(cells)]
    main = [(i, t) for i, c, t in trees[:cut] if t is not None]
    appendix_defs = {}
    for i, c, t in trees[cut:]:
        for name in defined(t) if t is not None else ():
            appendix_defs.setdefault(name, i)
    main_bound = set().union(*(bound(t) for _, t in main)) if main else set()
    skip = main_bound | set(dir(builtins)) | set(ignore)
    prose = set().union(*(mentioned(_source(c)) for c in cells[:cut] if c['cell_type'] == 'markdown'))
    found = {}
    for i, t in main:
        for name in used(t):
            if name in appendix_defs and name not in skip and not (name.startswith('__') and name.endswith('__')):
                found.setdefault(name, {'defined': appendix_defs[name], 'used': [], 'explained': name in prose})['used'].append(i)
    return found


def layer_notebooks() -> list:
    "Notebooks with a main story and an appendix (tutorials and the index are not layer notebooks)."
    return [p.stem for p in sorted(NBS.glob('*.ipynb'))
            if not p.stem.startswith(('tutorial_', 'index')) and split(json.loads(p.read_text())['cells']) is not None]


def report(name:str) -> list:
    "Lines saying, for one notebook, each appendix-only name its main story uses; unexplained ones are marked."
    found = check(json.loads((NBS / f'{name}.ipynb').read_text()), NOT_USES.get(name, ()))
    return [f"{name}: {'ok ' if v['explained'] else 'NOT EXPLAINED'} {k}: defined in appendix cell {v['defined']}, "
            f"used in main cells {v['used']}" for k, v in sorted(found.items(), key=lambda kv: kv[1]['used'][0])]


if __name__ == '__main__':
    for name in sys.argv[1:] or layer_notebooks():
        print('\n'.join(report(Path(name).stem)) or f'{name}: the main story uses no appendix-only name')
