"""The index page's two generated parts, computed from the files so they cannot drift: the table of every
notebook (its module, what it teaches, its estimated reading time, whether it has `#| slow` cells) and the layer
picture (which module sits in which layer). Also each notebook's shape (`--shape`): cells, code lines, the share
of code cells that show an output, where the first output comes, and the reading time of the main story (up to a
`## Appendix` or `## Hardening` heading) and of the whole notebook. nbs/index.ipynb loads this file with `%run -n` and calls both; tests/test_readme.py checks that README.md still shows what
they compute today (a renamed notebook or a new module fails there until index.ipynb is re-run).

    python tools/notebook_index.py            # prints the table
    python tools/notebook_index.py --shape    # prints every notebook's shape
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


# Reading speeds of the estimate: prose at 200 words a minute, code (what the reader sees: hidden cells left out)
# at 10 lines a minute, an output at 40 lines a minute (a glance). A rough guide, not a measurement.
WORDS_PER_MIN, CODE_LINES_PER_MIN, OUTPUT_LINES_PER_MIN = 200, 10, 40

def _hidden(cell) -> bool:
    "A code cell the reader never sees on the site: `#| hide`, or the notebook's `default_exp` line."
    return bool(re.search(r'^#\|\s*(hide|default_exp)\b', cell.source, re.M))

def _lines(text:str) -> int: return sum(1 for l in text.splitlines() if l.strip() and not l.lstrip().startswith('#|'))

def _output_lines(cell) -> int:
    n = 0
    for o in cell.get('outputs', []):
        text = o.get('text') or o.get('data', {}).get('text/markdown') or o.get('data', {}).get('text/plain') or ''
        n += _lines(text if isinstance(text, str) else ''.join(text))
    return n

# The main story ends at the first top-level appendix heading: `## Appendix: ...` or `## Hardening: ...`. Only
# what a first reading can skip goes after it (error-text fidelity, hardening, exhaustive edge cases), and
# "How real Triton differs" comes before it, as the end of the story.
APPENDIX = re.compile(r'^## (Appendix|Hardening)\b', re.M)

def appendix_start(cells:list) -> int:
    "Index of the cell that opens the notebook's appendix (len(cells) when it has none)."
    return next((i for i, c in enumerate(cells) if c.cell_type == 'markdown' and APPENDIX.search(c.source)), len(cells))

def _minutes(cells:list) -> float:
    "Estimated reading minutes of `cells`: prose, the code a reader sees, and its outputs."
    code = [c for c in cells if c.cell_type == 'code' and not _hidden(c)]
    words = sum(len(c.source.split()) for c in cells if c.cell_type == 'markdown')
    return (words / WORDS_PER_MIN + sum(_lines(c.source) for c in code) / CODE_LINES_PER_MIN
            + sum(_output_lines(c) for c in code) / OUTPUT_LINES_PER_MIN)

def notebook_shape(path:Path) -> dict:
    "Cells, code lines, share of shown code cells with an output (main story), the first output's cell, reading minutes (main story and whole)."
    cells = nbformat.read(path, as_version=4).cells
    main = cells[:appendix_start(cells)]
    code = [c for c in cells if c.cell_type == 'code' and not _hidden(c)]
    main_code = [c for c in main if c.cell_type == 'code' and not _hidden(c)]
    first = next((i + 1 for i, c in enumerate(cells) if c.cell_type == 'code' and not _hidden(c) and c.get('outputs')), None)
    return dict(stem=path.stem, cells=len(cells), code_cells=len(code), code_lines=sum(_lines(c.source) for c in code),
                words=sum(len(c.source.split()) for c in cells if c.cell_type == 'markdown'),
                with_output=sum(1 for c in main_code if c.get('outputs')) / len(main_code) if main_code else 0.0,
                first_output=first, minutes=round(_minutes(cells)), main_minutes=round(_minutes(main)))

def shape_table(nbs:Path=ROOT / 'nbs') -> str:
    "Every notebook's shape as a markdown table."
    rows = ['| notebook | cells | code cells | code lines | prose words | code cells with output | first output at cell | reading time |',
            '|---|---|---|---|---|---|---|---|']
    for p in _notebook_paths(nbs):
        s = notebook_shape(p)
        rows.append(f"| {s['stem']} | {s['cells']} | {s['code_cells']} | {s['code_lines']} | {s['words']} | "
                    f"{s['with_output']:.0%} | {s['first_output'] or '-'} | {story_time(s)} |")
    return Markdown('\n'.join(rows))

def reading_time(minutes:int) -> str:
    "`25 min`, `1 h 40 min`."
    minutes = max(minutes, 1)
    return f'{minutes} min' if minutes < 60 else f'{minutes // 60} h' + (f' {minutes % 60} min' if minutes % 60 else '')

def story_time(shape:dict) -> str:
    "The main story's reading time, and the whole notebook's when an appendix follows: `40 min / 1 h 5 min`."
    main, whole = reading_time(shape['main_minutes']), reading_time(shape['minutes'])
    return main if main == whole else f'{main} / {whole}'

# The book's reading order (the docs sidebar's too, tools/build_docs.py): the index, 00_overview, then the learning
# path (tutorial_1_..., tutorial_2_..., by number: tutorials that use the package as a user does), then the layer
# notebooks, the reference, by file name.
FIRST = ('index', '00_overview')
TUTORIAL = re.compile(r'^tutorial_(\d+)_')
PARTS = {'start': '', 'path': 'Learning path', 'reference': 'Reference'}

def part(stem:str) -> str:
    "'start' (index, 00_overview), 'path' (a tutorial of the learning path) or 'reference' (a layer notebook)."
    return 'start' if stem in FIRST else 'path' if TUTORIAL.match(stem) else 'reference'

def reading_order(stem:str) -> tuple:
    "Sort key of a notebook's stem in the book's reading order."
    kind = part(stem)
    if kind == 'start': return (0, FIRST.index(stem), stem)
    if kind == 'path': return (1, int(TUTORIAL.match(stem).group(1)), stem)
    return (2, 0, stem)

def _notebook_paths(nbs:Path) -> list:
    return sorted((p for p in Path(nbs).glob('*.ipynb') if p.stem != 'index' and not p.name.startswith(('_', '.'))),
                  key=lambda p: reading_order(p.stem))


def notebooks(nbs:Path=ROOT / 'nbs') -> list:
    "Every notebook of the book in reading order (`reading_order`, as the docs sidebar), index left out."
    return [{**notebook_shape(p), **notebook_info(p)} for p in _notebook_paths(nbs)]


def notebooks_table(nbs:Path=ROOT / 'nbs') -> str:
    "The markdown table of every notebook in reading order: its part of the book, link, module, what it teaches, reading time, its shape, its slow cells."
    rows = ['| part | notebook | module | what it teaches | reading time (main story / whole) | cells | code lines | main-story code cells with output | first output at cell | slow cells |',
            '|---|---|---|---|---|---|---|---|---|---|']
    for n in notebooks(nbs):
        module = f"`triton_mini.{n['module']}`" if n['module'] else '(exports nothing)'
        rows.append(f"| {PARTS[part(n['stem'])] or 'start'} | [{n['stem']}]({n['stem']}.ipynb) | {module} | **{n['title']}.** {n['summary']} | {story_time(n)} | "
                    f"{n['cells']} | {n['code_lines']} | {n['with_output']:.0%} | {n['first_output'] or '-'} | {n['slow'] or ''} |")
    return Markdown('\n'.join(rows))


NUMBER, PART_PREFIX = re.compile(r'^\d+\.\s*'), re.compile(r'^Learning path, part \d+:\s*')

def learning_path(nbs:Path=ROOT / 'nbs') -> str:
    "The learning path as a numbered markdown list: each part's link, reading time and what it does; then the total."
    parts = [n for n in notebooks(nbs) if part(n['stem']) == 'path']
    rows = []
    for i, n in enumerate(parts, 1):
        title, summary = NUMBER.sub('', n['title']), PART_PREFIX.sub('', n['summary'])
        rows.append(f"{i}. [{title}]({n['stem']}.ipynb) ({reading_time(n['minutes'])}): {summary}")
    total = sum(n['minutes'] for n in parts)
    return Markdown('\n'.join(rows) + f"\n\n{len(parts)} parts, {reading_time(total)} of reading by the estimate of the table below (the code runs as you read).")


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
    import sys
    print(shape_table() if '--shape' in sys.argv[1:] else notebooks_table())
