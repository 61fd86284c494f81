"""README.md as a newcomer reads it: its Python snippets run, in order, and need nothing beyond the install the
README names (`pip install .`: the base requirements); its notebook table and layer picture are what the files
say today (tools/notebook_index.py), so a renamed notebook or a new module shows up here until index.ipynb is
re-run; its marked commands are there for CI and tools/first_run.py."""
import ast, importlib.metadata as md, json, re, subprocess, sys
from configparser import ConfigParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
from build_readme import readme_markdown
from notebook_index import layer_picture, learning_path, notebook_shape, notebooks, notebooks_table, unplaced_modules
from readme_command import readme_command

README = (ROOT / 'README.md').read_text()
# Imported where present, never required: uvicorn's optional event loop, HTTP parser and WebSocket libraries
# (issue 17: "uvloop and httptools are used where present"), and its reloader's watchfiles (with anyio), which
# uvicorn.config imports whenever they are installed (ray[serve] and fastapi installs bring them).
OPTIONAL = {'uvloop', 'httptools', 'wsproto', 'websockets', 'watchfiles', 'anyio'}


def snippets() -> list:
    return re.findall(r'^```python\n(.*?)^```', README, re.S | re.M)


def base_requirements() -> list:
    cfg = ConfigParser(delimiters=['=']); cfg.read(ROOT / 'settings.ini')
    return cfg['DEFAULT']['requirements'].split()


def closure(requirements:list) -> set:
    "Canonical names of every distribution that installing `requirements` brings in (extras and markers followed)."
    extras, todo = {}, [Requirement(r) for r in requirements]
    while todo:
        r = todo.pop()
        name, new = canonicalize_name(r.name), set(r.extras)
        if name in extras and new <= extras[name]: continue
        extras.setdefault(name, set()).update(new)
        try: requires = md.requires(r.name) or []
        except md.PackageNotFoundError: continue
        for dep in map(Requirement, requires):
            if dep.marker is None or any(dep.marker.evaluate({'extra': e}) for e in extras[name] | {''}): todo.append(dep)
    return set(extras)


# Runs the snippets one after another in one interpreter, then lists the third-party top-level modules imported.
RUNNER = r'''
import json, sys, sysconfig
stdlib = sysconfig.get_paths()['stdlib']
for code in json.loads(sys.stdin.read()): exec(compile(code, '<README snippet>', 'exec'), globals())
mods = {name.split('.')[0] for name, m in list(sys.modules.items()) if m is not None and getattr(m, '__file__', None)
        and 'site-packages' in m.__file__}
print('MODULES', json.dumps(sorted(mods)))
'''


def test_snippets_run_with_only_the_base_install(tmp_path):
    code = snippets()
    assert len(code) >= 4 and any('tritonclient.http' in c for c in code)
    r = subprocess.run([sys.executable, '-c', RUNNER], input=json.dumps(code), capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    modules = json.loads(r.stdout.rsplit('MODULES', 1)[1])
    dists = md.packages_distributions()
    allowed = closure(base_requirements()) | {'triton-mini'}
    # (names starting with '_' are import hooks of the installation itself: setuptools' and editable installs')
    needed = {m: {canonicalize_name(d) for d in dists.get(m, [m])} for m in modules if m not in OPTIONAL and not m.startswith('_')}
    outside = {m: d for m, d in needed.items() if not d & allowed and m not in ('triton_mini', 'triton_python_backend_utils')}
    assert not outside, f'README snippets import modules that `pip install .` does not bring: {outside}'


def test_snippets_are_valid_python():
    for code in snippets(): ast.parse(code)


def test_notebook_table_is_current():
    assert readme_markdown(notebooks_table()) in README, 're-run nbs/index.ipynb (tools/nb.py run index), then tools/build_readme.py'
    for n in notebooks(): assert f'(nbs/{n["stem"]}.ipynb)' in README


def test_readme_leads_with_the_learning_path():
    "README's first section after the introduction is the learning path, as the notebooks make it now (issue 43)."
    path = readme_markdown(learning_path())
    assert path in README, 're-run nbs/index.ipynb (tools/nb.py run index), then tools/build_readme.py'
    assert README.index('## Learn Triton in an afternoon') < README.index('## Install and serve')
    assert path.count('](nbs/tutorial_') == sum(1 for n in notebooks() if n['stem'].startswith('tutorial_')) >= 6


def test_main_story_stops_at_the_appendix(tmp_path):
    "Reading time counts the main story up to `## Appendix`/`## Hardening`; the whole notebook is shown beside it."
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
    code = lambda: new_code_cell('\n'.join(f'x{i} = {i}' for i in range(100)))     # 100 lines: 10 minutes each time
    nb = new_notebook(cells=[new_markdown_cell('# T'), code(), new_markdown_cell('## How real Triton differs'),
                             new_markdown_cell('## Appendix: error texts'), code(), new_markdown_cell('## Hardening: more'), code()])
    nbformat.write(nb, tmp_path / 'x.ipynb')
    s = notebook_shape(tmp_path / 'x.ipynb')
    assert (s['main_minutes'], s['minutes'], s['code_lines']) == (10, 30, 300)
    nb.cells[3].source = '### Appendix inside a section'        # only a top-level heading opens the appendix
    nb.cells[5].source = 'Hardening, said in prose'
    nbformat.write(nb, tmp_path / 'x.ipynb')
    assert notebook_shape(tmp_path / 'x.ipynb')['main_minutes'] == 30


def index_layers() -> list:
    "The LAYERS list as written in nbs/index.ipynb's layer cell."
    import nbformat
    cell = next(c for c in nbformat.read(ROOT / 'nbs' / 'index.ipynb', as_version=4).cells if 'LAYERS = [' in c.source)
    tree = ast.parse(cell.source)
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == 'LAYERS')
    return ast.literal_eval(node.value)


def test_layer_picture_matches_the_modules():
    layers = index_layers()
    assert unplaced_modules(layers, ROOT / 'triton_mini') == ([], [])
    assert layer_picture(layers) in README
    assert [name for name, _, _ in layers][-1] == 'core' and layers[0][0] == 'command line'


def test_marked_commands():
    assert readme_command('serve') == 'pip install . && triton-mini'      # the first run: no compiler needed
    assert 'pip install -v ".[llm]"' in readme_command('llm')               # the llama.cpp build shows its progress
    assert readme_command('test').startswith('pip install -e ".[dev')
    assert 'nbdev_test --flags slow' in README


def test_performance_section_is_the_committed_run():
    "README's speed table, its caption and chart are what tools/perf_report.py makes of the newest *-matrix.json."
    from perf_report import latest, latest_full, markdown, run_caption
    for path in {latest(), latest_full()}:   # the newest run, and the newest with every workload when that is another
        data = json.loads(path.read_text())
        assert readme_markdown(markdown(data)) in README, 're-run nbs/index.ipynb (tools/nb.py run index), then tools/build_readme.py'
        assert readme_markdown(run_caption(data, path)) in README
    png = ROOT / 'nbs' / 'images' / 'perf.png'
    assert '(nbs/images/perf.png)' in README and 0 < png.stat().st_size < 100_000


# Runs the snippets as the notebook cell that wrote them did (IPython: the last expression's value is shown, pretty
# printed, unless the line ends with ';'), printing each snippet's output between markers.
SHOWING_RUNNER = r'''
import ast, contextlib, io, json, sys
from IPython.lib.pretty import pretty
for i, code in enumerate(json.loads(sys.stdin.read())):
    tree, out = ast.parse(code), io.StringIO()
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(';') else None
    with contextlib.redirect_stdout(out):
        exec(compile(tree, '<README snippet>', 'exec'), globals())
        if last is not None and (value := eval(compile(ast.Expression(last.value), '<README snippet>', 'eval'), globals())) is not None:
            print(pretty(value, max_width=79))
    print(f'<<<{i}>>>' + json.dumps(out.getvalue()))
'''

def test_snippet_outputs_are_what_the_code_shows(tmp_path):
    "The output README shows after a snippet is what running the snippet shows today (index.ipynb's outputs can go stale)."
    pairs = re.findall(r'^```python\n(.*?)^```\n\n```\n(.*?)^```', README, re.S | re.M)
    assert len(pairs) >= 3, len(pairs)
    code = snippets()
    r = subprocess.run([sys.executable, '-c', SHOWING_RUNNER], input=json.dumps(code), capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    shown = {code[int(i)]: json.loads(o) for i, o in re.findall(r'<<<(\d+)>>>(.*)', r.stdout)}
    for snippet, expected in pairs:
        assert shown[snippet].rstrip() == expected.rstrip(), snippet
