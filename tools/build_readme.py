"""Write README.md from nbs/index.ipynb without Quarto.

`nbdev_readme` renders README.md through Quarto, which cannot be installed everywhere. This does
the same job in pure Python: hidden cells are dropped, `#|` directives removed, code cells become
```python blocks and their text outputs plain ``` blocks, markdown is copied as written except
outside fenced blocks: relative links and images (`05_scheduler.ipynb`, `images/x.png`) are made
relative to the repository root (`nbs/05_scheduler.ipynb`), since README.md is read from there, and
Quarto callouts (`::: {.callout-note}`) become GitHub alerts (`> [!NOTE]`).
Where Quarto exists, `nbdev_readme` still works; CI checks README.md against this script's output.
"""
import re, sys
from pathlib import Path
import nbformat

ROOT = Path(__file__).resolve().parents[1]
NBS_REL = Path('nbs')  # where index.ipynb's relative links start from, seen from README.md

def _directives(src):
    "The `#| key: value` directives at the top of a code cell, as a dict."
    out = {}
    for line in src.splitlines():
        if not line.startswith('#|'): break
        key, _, val = line[2:].strip().partition(':')
        out[key.strip()] = val.strip() or True
    return out

def _strip_directives(src):
    return '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()

def _outputs(cell):
    "Text of a code cell's outputs (stream and text/plain; rich outputs are skipped)."
    texts = []
    for o in cell.get('outputs', []):
        if o.output_type == 'stream': texts.append(o.text)
        elif o.output_type in ('execute_result', 'display_data'):
            data = o.get('data', {})
            if 'text/markdown' in data: texts.append(('MD', data['text/markdown']))
            elif 'text/plain' in data: texts.append(data['text/plain'])
    return texts

_re_link = re.compile(r'(!?\[[^\]\n]*\]\()([^)\s]+)(\))')

def _from_root(m):
    "A relative link target, seen from the repository root instead of from nbs/."
    url = m.group(2)
    if re.match(r'^([a-z][a-z0-9+.-]*:|#|/)', url, re.I): return m.group(0)
    return f'{m.group(1)}{(NBS_REL / url).as_posix()}{m.group(3)}'

_ALERTS = {'note': 'NOTE', 'tip': 'TIP', 'warning': 'WARNING', 'caution': 'CAUTION', 'important': 'IMPORTANT'}

def readme_markdown(md):
    "Markdown of a cell as README.md needs it; fenced blocks and HTML comments stay as they are."
    out, fence, alert = [], None, False
    for line in md.splitlines():
        m = re.match(r'\s*(`{3,}|~{3,})', line)
        if m and (fence is None or line.strip().startswith(fence)):
            fence = m.group(1) if fence is None else None
        elif fence is None:
            div = re.match(r'^:::+\s*\{?\s*\.?callout-(\w+).*$', line)
            if div and div.group(1) in _ALERTS:
                out.append(f'> [!{_ALERTS[div.group(1)]}]'); alert = True; continue
            if alert and re.match(r'^:::+\s*$', line): alert = False; continue
            line = _re_link.sub(_from_root, line)
        out.append(('> ' + line if line else '>') if alert else line)
    return '\n'.join(out)

def cell_markdown(cell):
    "One cell as README markdown, or '' when it should not appear."
    if cell.cell_type == 'markdown': return readme_markdown(cell.source.strip())
    if cell.cell_type != 'code': return ''
    d = _directives(cell.source)
    if d.get('hide') or d.get('include') == 'false' or 'default_exp' in d: return ''
    parts = []
    src = _strip_directives(cell.source)
    if src and d.get('echo') != 'false': parts.append(f'```python\n{src}\n```')
    for t in ([] if d.get('output') == 'false' else _outputs(cell)):
        if isinstance(t, tuple): parts.append(readme_markdown(t[1].strip()))
        elif t.strip(): parts.append(f'```\n{t.rstrip()}\n```')
    return '\n\n'.join(parts)

def build_readme(nb_path=ROOT/'nbs'/'index.ipynb'):
    nb = nbformat.read(nb_path, as_version=4)
    body = '\n\n'.join(s for s in map(cell_markdown, nb.cells) if s)
    note = '<!-- Generated from nbs/index.ipynb by tools/build_readme.py: edit the notebook, not this file. -->\n'
    return body.split('\n', 1)[0] + '\n\n' + note + body.split('\n', 1)[1].lstrip('\n') + '\n'

if __name__ == '__main__':
    out = ROOT / 'README.md'
    out.write_text(build_readme())
    print(f'wrote {out.relative_to(ROOT)}', file=sys.stderr)
