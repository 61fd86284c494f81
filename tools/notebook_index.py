"""The index page's two generated parts, computed from the files so they cannot drift: the table of every
notebook (its module, what it teaches, whether it has `#| slow` cells) and the layer picture (which module sits
in which layer). nbs/index.ipynb loads this file with `%run -n` and calls both; tests/test_readme.py checks that README.md still shows what
they compute today (a renamed notebook or a new module fails there until index.ipynb is re-run).

    python tools/notebook_index.py        # prints the table and the picture
"""
import re
from pathlib import Path
import nbformat

ROOT = Path(__file__).resolve().parents[1]


class Markdown(str):
    "A str that Jupyter (and so README.md and the docs) shows as markdown."
    def _repr_markdown_(self): return str(self)


def notebook_info(path:Path) -> dict:
    "Title, summary, exported module and slow-cell count of one notebook."
    cells = nbformat.read(path, as_version=4).cells
    md = next((c.source for c in cells if c.cell_type == 'markdown' and c.source.lstrip().startswith('# ')), '')
    title = re.search(r'^# (.+)$', md, re.M)
    summary = re.search(r'^> (.+)$', md, re.M)
    module = next((m.group(1) for c in cells if c.cell_type == 'code'
                   for m in [re.search(r'^#\|\s*default_exp\s+(\S+)', c.source, re.M)] if m), None)
    slow = sum(1 for c in cells if c.cell_type == 'code' and re.search(r'^#\|\s*slow\b', c.source, re.M))
    return dict(stem=path.stem, title=title.group(1).strip() if title else path.stem,
                summary=summary.group(1).strip() if summary else '', module=module, slow=slow)


def notebooks(nbs:Path=ROOT / 'nbs') -> list:
    "Every notebook of the book in reading order (file name order, as the docs sidebar), index left out."
    return [notebook_info(p) for p in sorted(nbs.glob('*.ipynb')) if p.stem != 'index' and not p.name.startswith(('_', '.'))]


def notebooks_table(nbs:Path=ROOT / 'nbs') -> str:
    "The markdown table of every notebook: link, module, what it teaches, its slow cells."
    rows = ['| notebook | module | what it teaches | slow cells |', '|---|---|---|---|']
    for n in notebooks(nbs):
        module = f"`triton_mini.{n['module']}`" if n['module'] else '(exports nothing)'
        rows.append(f"| [{n['stem']}]({n['stem']}.ipynb) | {module} | **{n['title']}.** {n['summary']} | {n['slow'] or ''} |")
    return Markdown('\n'.join(rows))


def slow_notebooks(nbs:Path=ROOT / 'nbs') -> list:
    return [n['stem'] for n in notebooks(nbs) if n['slow']]


def layer_picture(layers:list, width:int=100) -> str:
    "A text picture of [(layer, note, [modules])], top layer first: each layer imports only the layers below it."
    indent = max(len(name) for name, _, _ in layers) + 3
    lines = []
    for i, (name, note, modules) in enumerate(layers):
        rows, row = [], ''
        for m in modules:   # module names joined by ' · ', wrapped to the width
            if row and indent + len(row) + 3 + len(m) > width: rows.append(row); row = m
            else: row = f'{row} · {m}' if row else m
        rows.append(row)
        lines += [f" {name if j == 0 else '':<{indent}}{r}" for j, r in enumerate(rows)]
        if note: lines.append(f" {'':<{indent}}({note})")
        if i < len(layers) - 1: lines += ['     │', '     ▼']
    return '\n'.join(lines)


def unplaced_modules(layers:list, lib:Path=ROOT / 'triton_mini') -> tuple:
    "(modules of the package missing from the picture, names in the picture that are no module)."
    placed = {m for _, _, modules in layers for m in modules}
    actual = {p.stem for p in lib.glob('*.py') if p.stem not in ('__init__', '_modidx')}
    actual |= {p.name for p in lib.iterdir() if p.is_dir() and (p / '__init__.py').exists()}
    return sorted(actual - placed), sorted(placed - actual)


if __name__ == '__main__':
    print(notebooks_table())
