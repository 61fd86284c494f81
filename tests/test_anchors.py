"""Every `NB.ipynb#anchor` link (in the notebooks and README.md) and every `](#anchor)` link inside a notebook lands
on a heading of that notebook (its pandoc id, as the docs site gives it) or on a name the notebook exports (show_doc's
anchor). A fast, browserless version of the docs-site test's link check: moving a section to an appendix or to
another notebook breaks links that point at it, and this says which, in a second."""
import re, sys
from pathlib import Path
import nbformat, pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
import build_docs  # noqa: E402

NBS = ROOT / 'nbs'
LINK = re.compile(r'\]\((?:(\w[\w.-]*)\.ipynb)?#([^)\s]+)\)')

def _anchors(path:Path) -> set:
    "Heading ids and exported names (show_doc anchors, lowercased like nbdev's) of one notebook."
    ids = set()
    for c in nbformat.read(path, as_version=4).cells:
        if c.cell_type == 'markdown':
            for h in re.findall(r'^#{1,6}\s+(.+?)\s*$', c.source, re.M):
                m = re.search(r'\{#([^}]+)\}\s*$', h)
                ids.add(m.group(1) if m else build_docs.pandoc_id(h))
        elif re.search(r'^#\|\s*export', c.source, re.M):
            for _, name in re.findall(r'^(?:async\s+)?(def|class)\s+(\w+)', c.source, re.M):
                ids.add(name.lower())
            for name, cls in re.findall(r'^(?:async\s+)?def\s+(\w+)\(self:\s*\(?(\w+)', c.source, re.M):
                ids.add(f'{cls}.{name}'.lower())
            ids.update(n.lower() for n in re.findall(r'^(\w+)\s*=', c.source, re.M))
    return ids

def _links():
    "(source, target notebook, anchor) of every anchored link."
    sources = [(p.name, p, '\n'.join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == 'markdown'))
               for p in sorted(NBS.glob('*.ipynb'))]
    sources.append(('README.md', None, (ROOT / 'README.md').read_text()))
    for name, path, text in sources:
        for nb, anchor in LINK.findall(text):
            if nb: yield name, NBS / f'{nb}.ipynb', anchor
            elif path is not None: yield name, path, anchor

def test_every_anchor_resolves():
    cache, bad = {}, []
    for src, target, anchor in _links():
        if not target.exists(): bad.append(f'{src}: {target.name} does not exist'); continue
        if target not in cache: cache[target] = _anchors(target)
        if anchor.lower() not in cache[target] and anchor not in cache[target]:
            bad.append(f'{src}: {target.stem}#{anchor}')
    assert not bad, 'links to missing anchors:\n' + '\n'.join(bad)
