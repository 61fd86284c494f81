"""Issue 43, "one truth": a figure quoted in prose beside a link to its result file comes from that file.

A paragraph of a notebook (or of README.md) that links to `bench/results/...` is a claim about that file: each figure
in it with a unit (`1.75x`, `289 ms`, `24.1 MiB`, `62%`) must be a number the file holds, or, for a ratio, the quotient
of two numbers on one line of it (a prose "1.79x" from 25.80 and 14.40 req/s), or another figure the difference of two. When a benchmark is re-run and its file
rewritten, prose that still quotes the old figures fails here. Figures in prose without a link are not checked: the
guide asks for them to be dated as history."""
import itertools, json, re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / 'nbs'
RESULT_LINK = re.compile(r'\]\(([^)\s]*bench/results/[^)\s#]+)')
FIGURE = re.compile(r'(?<![\w.,])(\d+(?:\.\d+)?)\s?(x|×|ms|µs|us|MiB|KiB|GiB|MB|KB|GB|%|req/s)(?![\w/])')
NUMBER = re.compile(r'(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?')
RATIO = ('x', '×')


def paragraphs():
    "(where, text, base directory for its links) for every notebook markdown cell and README paragraph."
    for nb in sorted(NBS.glob('*.ipynb')):
        for i, cell in enumerate(json.loads(nb.read_text())['cells']):
            if cell['cell_type'] == 'markdown': yield f'{nb.name} cell {i}', ''.join(cell['source']), NBS
    for i, para in enumerate((ROOT / 'README.md').read_text().split('\n\n')): yield f'README.md paragraph {i}', para, ROOT


def numbers(text:str) -> list: return [float(n) for n in NUMBER.findall(text.replace(',', ''))]


def unfounded(text:str, results:str) -> list:
    """The figures of `text` that `results` does not hold: as a number, or derived from two numbers on one line of it
    (a table row): a ratio as their quotient, any other figure as their difference ("2.4 ms more per call")."""
    have = numbers(results)
    rows = [r for r in (numbers(line) for line in results.splitlines()) if len(r) > 1]
    out = []
    for value, unit in FIGURE.findall(text):
        v, places = float(value), len(value.split('.')[1]) if '.' in value else 0
        close = lambda x: abs(x - v) < 0.5 * 10 ** -places
        if any(close(h) for h in have): continue
        derive = (lambda a, b: a / b if b else None) if unit in RATIO else (lambda a, b: a - b)
        if any(close(d) for row in rows for a, b in itertools.permutations(row, 2) if (d := derive(a, b)) is not None): continue
        out.append(value + unit)
    return out


def claims():
    "(where, figures not found in the result files the paragraph links to) for each paragraph that links one."
    for where, text, base in paragraphs():
        links = [unquote(urlsplit(t).path) for t in RESULT_LINK.findall(text)]
        files = [base / t for t in links if (base / t).is_file()]
        if not files: continue
        yield where, unfounded(text, '\n'.join(f.read_text(errors='replace') for f in files)), len(FIGURE.findall(text))


def test_the_check_can_fail():
    assert unfounded('identity went from 0.49x to 0.81x (see the file)', 'c=1: 4900 req/s, 6000 req/s; ratio 0.49') == ['0.81x']
    assert unfounded('2 replicas give 1.79x one', '{"1": 14.3998, "2": 25.7997}') == []          # a quotient of two
    assert unfounded('took 289 ms, then 17.6 ms', 'longest hold | 289.4 | 17.6') == []           # rounded as quoted
    assert unfounded('2.4 ms more per call', '| direct | 2.72 | served | 5.11 |') == []             # a difference on one row
    assert unfounded('2.4 ms more per call', '| direct | 2.72 |\n| served | 5.11 |') == ['2.4ms']   # not across rows


def test_there_are_quoted_figures_to_check():
    assert sum(n for _, _, n in claims()) >= 30


def test_figures_beside_a_result_link_come_from_it():
    bad = [(where, missing) for where, missing, _ in claims() if missing]
    assert not bad, f'figures quoted beside a bench/results link that the file does not hold: {bad}'
