"""The docs site (tools/build_docs.py), built and then read in a real browser.

Two sites are built into temporary folders: the project's own notebooks, and a small fixture whose notebooks use
every feature the renderer supports (show_doc, hidden and echo-false cells, folded source, images, a widget,
callouts, links between pages). The fixture's HTML is checked directly; then headless Chromium visits every page
of both sites and checks titles, sidebar, links, anchors, images, console errors and that nothing is fetched
from outside the site, then every page again at 1366 and 390 px: nothing wider than its column (issue 43). Screenshots of the home page and of the batching page go to tests/artifacts/.
"""
import base64, html, re, shutil, struct, sys, threading, urllib.error, urllib.parse, urllib.request, zlib
from functools import partial
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(__file__).resolve().parent / 'artifacts'
sys.path.insert(0, str(ROOT / 'tools'))
import build_docs  # noqa: E402
from triton_servers import skip_or_fail  # noqa: E402   (conftest put tests/ on the path)

# ---------------------------------------------------------------------------------------------------------
# The fixture notebooks

def _png(w, h, rgb):
    "A tiny valid PNG, so the fixture needs no image library."
    raw = b''.join(b'\x00' + bytes(rgb) * w for _ in range(h))
    def chunk(tag, data): return struct.pack('>I', len(data)) + tag + data + struct.pack('>I', zlib.crc32(tag + data))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))

PNG = base64.b64encode(_png(12, 8, (40, 120, 200))).decode()
MD, CODE = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell

def _out(kind, **data):
    if kind == 'stream': return nbformat.v4.new_output('stream', name='stdout', text=data['text'])
    return nbformat.v4.new_output(kind, data=data, **({'execution_count': 1} if kind == 'execute_result' else {}))

def _nb(*cells, **metadata):
    nb = nbformat.v4.new_notebook(cells=list(cells))
    nb.metadata.update({'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}}, **metadata)
    return nb

WIDGET_STATE = {'version_major': 2, 'version_minor': 0, 'state': {
    'box': {'model_name': 'VBoxModel', 'model_module': '@jupyter-widgets/controls', 'model_module_version': '2.0.0',
            'state': {'children': ['IPY_MODEL_slider', 'IPY_MODEL_out']}},
    'slider': {'model_name': 'IntSliderModel', 'model_module': '@jupyter-widgets/controls', 'model_module_version': '2.0.0',
               'state': {'description': 'batch size', 'value': 4, 'min': 1, 'max': 8, 'step': 1}},
    'out': {'model_name': 'OutputModel', 'model_module': '@jupyter-widgets/output', 'model_module_version': '1.0.0',
            'state': {'outputs': [{'output_type': 'display_data', 'metadata': {},
                                   'data': {'image/png': PNG, 'text/plain': '<Figure>'}}]}}}}

# a code line as long as the longest in the notebooks (about 120 characters): it must fit, not scroll
LONG_LINE = "result = client.infer('add_sub', inputs, sequence_id=42, sequence_start=True, request_id='one-line-of-120-chars')  # ok!"
assert len(LONG_LINE) == 120

# prose that would widen a narrow page: an unbroken name, a bare URL, a wide table
WIDE_MD = ('## Too wide for a phone\n\n`TRITONSERVER_REQUEST_RELEASE_RESCHEDULE_AND_A_NAME_WITHOUT_ANY_BREAK` and '
           'https://example.com/a/very/long/path/without/spaces/that/goes/on/and/on/index.html\n\n'
           '| ' + ' | '.join(f'column {i}' for i in range(12)) + ' |\n|' + '---|' * 12 + '\n| '
           + ' | '.join(f'value_{i}_wide' for i in range(12)) + ' |')

def fixture_notebooks(nbs: Path):
    "Write the fixture: a home page and two numbered notebooks."
    (nbs / 'images').mkdir(parents=True)
    (nbs / 'images' / 'dot.png').write_bytes(base64.b64decode(PNG))
    nbformat.write(_nb(MD('# Fixture home\n\n> The home page of the fixture site.'),
                       MD('Start with [the layer](00_layer.ipynb), or its [`add_sub`](00_layer.ipynb#add_sub).')),
                   nbs / 'index.ipynb')
    nbformat.write(_nb(
        CODE('#| default_exp layer'),
        MD('# A layer\n\n> Exercises every feature of the renderer.'),
        CODE("#| hide\nSECRET = 'hidden-cell-marker'"),
        MD('## What Triton does\n\nRead the [next notebook](01_other.ipynb#the-end), or nbdev\'s link to '
           '[a method](https://triton-mini.github.io/triton_mini/layer.html#add_sub.missing).\n\n'
           '::: {.callout-tip}\nA **callout** the way Quarto writes it.\n:::\n\n![a dot](images/dot.png)'),
        CODE('#| export\ndef add_sub(a:int, # The first input\n            b:int, # The second input\n'
             '           )->tuple: # (a+b, a-b)\n    "Add and subtract, like the add_sub model."\n    return a+b, a-b'),
        CODE('add_sub(3, 1)', outputs=[_out('execute_result', **{'text/plain': '(4, 2)'})]),
        CODE("#| echo: false\nprint('echo-false-source')", outputs=[_out('stream', text='echo-false-output\n')]),
        CODE('#| exports\ndef shown(x):\n    "Exported and shown."\n    return x'),
        CODE('plot()', outputs=[_out('display_data', **{'image/png': PNG, 'text/plain': '<Figure>'})]),
        CODE('slider_and_plot()', outputs=[_out('display_data', **{
            'application/vnd.jupyter.widget-view+json': {'model_id': 'box', 'version_major': 2, 'version_minor': 0},
            'text/plain': 'VBox(...)'})]),
        CODE(LONG_LINE, outputs=[_out('stream', text=LONG_LINE + '\n')]),
        MD('## How real Triton differs\n\n- It is written in C++.'),
        widgets={'application/vnd.jupyter.widget-state+json': WIDGET_STATE}), nbs / '00_layer.ipynb')
    nbformat.write(_nb(MD('# Other layer\n\n> A second page.'), MD('## The end\n\nBack [home](index.ipynb).'),
                       MD('## How fast (µs)\n\nThis [heading](#how-fast-µs) has a non-ASCII id.'),
                       MD(WIDE_MD)),
                   nbs / '01_other.ipynb')

# ---------------------------------------------------------------------------------------------------------
# Building

@pytest.fixture(scope='module')
def fixture_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('fixture')
    fixture_notebooks(tmp / 'nbs')
    build_docs.build_docs(out_dir=tmp / 'site', nbs_path=tmp / 'nbs')
    return tmp / 'site'

@pytest.fixture(scope='module')
def project_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('project')
    build_docs.build_docs(out_dir=tmp / 'site', proc_dir=tmp / 'proc')  # fresh processing, not the _proc cache
    return tmp / 'site'

def _page(site, name): return (site / name).read_text()

def test_pages_and_sidebar_order(fixture_site):
    names = sorted(p.name for p in fixture_site.glob('*.html'))
    assert names == ['00_layer.html', '01_other.html', 'index.html']
    nav = re.search(r'<nav[^>]*class="sidebar".*?</nav>', _page(fixture_site, '01_other.html'), re.S).group(0)
    assert re.findall(r'href="([^"]+)"', nav) == ['index.html', '00_layer.html', '01_other.html']
    assert '<title>A layer</title>' in _page(fixture_site, '00_layer.html')

def test_nbdev_processing_applied(fixture_site):
    page = _page(fixture_site, '00_layer.html')
    assert 'hidden-cell-marker' not in page and 'default_exp' not in page and '#|' not in page
    assert re.search(r'<h3 id="add_sub">add_sub', page), 'show_doc heading with the id nbdev links to'
    assert 'Add and subtract, like the add_sub model.' in page and 'The first input' in page
    assert 'return a+b, a-b' in html.unescape(re.sub(r'<[^>]+>', '', page)), 'the site shows exported code (issue 43), then its show_doc'
    assert re.search(r'<details class="code-fold" open[^>]*>\s*<summary>Exported source</summary>', page)
    assert 'echo-false-output' in page and 'echo-false-source' not in page

def test_links_images_widgets(fixture_site):
    page = _page(fixture_site, '00_layer.html')
    assert 'href="01_other.html#the-end"' in page
    assert 'href="00_layer.html#add_sub"' in page, "nbdev's link to a method without show_doc lands on its function"
    assert '.ipynb"' not in page
    assert page.count('src="data:image/png;base64,') == 3, 'markdown image, plot, and the widget Output'
    assert re.search(r'<input[^>]*type="range"[^>]*value="4"', page) and 'batch size' in page
    assert re.search(r'<div class="callout callout-tip">\s*<div class="callout-title">Tip</div>\s*<p>A <strong>callout',
                     page)
    assert '<script' not in page and not re.search(r'(src|href)="//', page)
    assert '.highlight .k ' in (fixture_site / 'site.css').read_text(), 'pygments styles are shipped'

def test_rewrite_links():
    nbs, ids = ROOT / 'nbs', {'05_scheduler.html': ('05_scheduler.html', {'dynamicbatcher'}),
                              'scheduler.html': ('05_scheduler.html', {'dynamicbatcher'})}
    files = set()
    fix = lambda h: build_docs.rewrite_links(f'<a href="{h}">', ids, nbs, 'https://x.io/triton_mini/', ROOT, files,
                                             'https://github.com/o/r')
    assert fix('05_scheduler.ipynb#dynamicbatcher') == '<a href="05_scheduler.html#dynamicbatcher">'
    assert fix('https://x.io/triton_mini/scheduler.html#dynamicbatcher.run') == '<a href="05_scheduler.html#dynamicbatcher">'
    assert fix('../settings.ini') == '<a href="files/settings.ini.html">' and files == {'settings.ini'}
    assert fix('../bench') == '<a href="files/bench/index.html">'
    assert build_docs.rewrite_links('<a href="https://github.com/o/r/blob/main/x.py#L3" style="x">source</a>!', ids, nbs,
                                    git_url='https://github.com/o/r') == '!', 'nbdev source links are dropped'
    assert fix('https://example.com/a.ipynb') == '<a href="https://example.com/a.ipynb">'

def test_refuses_foreign_folder(tmp_path):
    (tmp_path / 'keep.txt').write_text('not ours')
    with pytest.raises(SystemExit, match='not made by build_docs'): build_docs._prepare_out(tmp_path)
    assert (tmp_path / 'keep.txt').exists()

# ---------------------------------------------------------------------------------------------------------
# The browser

CHROME_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
                '--disable-component-update', '--disable-sync', '--disable-quic', '--disable-dev-shm-usage',
                '--window-size=1280,900']

@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    chromium = next(filter(None, map(shutil.which, ('chromium', 'chromium-browser', 'google-chrome'))), None)
    chromedriver = shutil.which('chromedriver')
    if not (chromium and chromedriver):
        skip_or_fail('browser', 'needs the chromium and chromedriver binaries (Debian: apt-get install chromium chromium-driver)')
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in CHROME_FLAGS + [f'--user-data-dir={tmp_path_factory.mktemp("chrome-profile")}']: opts.add_argument(flag)
    opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()

@pytest.fixture(scope='module')
def serve():
    "Serve folders over HTTP on a free port; returns a function folder -> base URL."
    servers = []
    def start(folder):
        handler = partial(_QuietHandler, directory=str(folder))
        srv = ThreadingHTTPServer(('127.0.0.1', 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f'http://127.0.0.1:{srv.server_port}/'
    yield start
    for srv in servers: srv.shutdown(); srv.server_close()

class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args): pass

class _Ids(HTMLParser):
    "Every id (and <a name>) in a page: the targets of #fragments."
    def __init__(self):
        super().__init__(); self.ids = set()
    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        if d.get('id'): self.ids.add(d['id'])
        if tag == 'a' and d.get('name'): self.ids.add(d['name'])

def _fetch(url, cache):
    "(HTTP status, ids in the page) for a local URL, fetched once."
    if url not in cache:
        try:
            with urllib.request.urlopen(url, timeout=10) as r: status, body = r.status, r.read().decode('utf-8', 'replace')
        except urllib.error.HTTPError as e: status, body = e.code, ''
        parser = _Ids(); parser.feed(body)
        cache[url] = status, parser.ids
    return cache[url]

def _nb_titles(nbs):
    "What each page must be titled: the notebook's first `# Title` (nbdev's front matter), else its file name."
    titles = {}
    for nb_path in build_docs.notebooks(nbs):
        nb = nbformat.read(nb_path, as_version=4)
        h1s = (re.search(r'^#\s+(\S.*?)\s*$', c.source, re.M) for c in nb.cells if c.cell_type == 'markdown')
        title = next(filter(None, h1s), None)
        titles[nb_path.stem + '.html'] = title.group(1).replace('`', '') if title else nb_path.stem   # the site drops markdown's backticks
    return titles

def _screenshot(driver, name):
    "Save the first screen and the whole page."
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f'{name}.png'))
    height = driver.execute_script('return document.documentElement.scrollHeight')
    driver.set_window_size(1280, min(max(height, 900), 12000))
    driver.save_screenshot(str(ARTIFACTS / f'{name}-full.png'))
    driver.set_window_size(1280, 900)

def _batching_page(titles):
    "The dynamic batching notebook once it exists, else the first numbered notebook."
    names = [n for n in titles if n != 'index.html']
    return next((n for n in names if re.search(r'batch|schedul', n)), names[0] if names else None)

def check_site(driver, base, titles, shots=()):
    "Visit every page of the site at `base`; return a list of problems (empty when all is well)."
    problems, cache, order = [], {}, list(titles)
    driver.get_log('browser')  # drop whatever an earlier site left
    for name, title in titles.items():
        driver.get(base + name)
        where = f'{name}:'
        if driver.title != title: problems.append(f'{where} <title> is {driver.title!r}, expected {title!r}')
        h1 = driver.execute_script("const h = document.querySelector('h1.title'); return h && h.textContent.trim()")
        if h1 != title: problems.append(f'{where} h1 is {h1!r}, expected {title!r}')
        side = driver.execute_script(
            "return Array.from(document.querySelectorAll('nav.sidebar a')).map(a => a.getAttribute('href'))")
        if side != order: problems.append(f'{where} sidebar lists {side}, expected {order}')
        active = driver.execute_script(
            "return Array.from(document.querySelectorAll('nav.sidebar a.active')).map(a => a.getAttribute('href'))")
        if active != [name]: problems.append(f'{where} sidebar marks {active} as the current page')
        for href in driver.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
            if not href.startswith(base): continue
            url, _, frag = href.partition('#')
            frag = urllib.parse.unquote(frag)  # a.href percent-encodes ids such as `how-fast-µs`
            status, ids = _fetch(url, cache)
            if status != 200: problems.append(f'{where} link {href} -> HTTP {status}')
            elif frag and frag not in ids: problems.append(f'{where} link {href}: no element with id {frag!r}')
        broken = driver.execute_script(
            "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.src.slice(0, 80))")
        problems += [f'{where} image did not load: {src}' for src in broken]
        outside = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        problems += [f'{where} fetched from outside the site: {u}' for u in outside if not u.startswith((base, 'data:'))]
        problems += [f'{where} console: {e["message"]}' for e in driver.get_log('browser') if e['level'] == 'SEVERE']
        problems += [f'{where} {what}' for what in driver.execute_script(_HIDDEN)]
        if name in shots: _screenshot(driver, Path(name).stem)
    return problems

# Code and outputs behind a horizontal scrollbar, and sidebar titles cut: what the reader cannot see
_HIDDEN = '''return [
  ...Array.from(document.querySelectorAll('.content pre')).filter(p => p.scrollWidth > p.clientWidth + 1)
     .map(p => 'code block overflows: ' + p.textContent.split('\\n').find(l => l.length > 80)),
  ...Array.from(document.querySelectorAll('nav.sidebar .nb-title, nav.sidebar a')).filter(e => e.scrollWidth > e.clientWidth + 1)
     .map(e => 'sidebar title cut: ' + e.textContent.trim())]'''

# Issue 43: no page wider than its column. The document must not scroll sideways, and no element of the main column
# may stick out of the column's content box, unless an ancestor inside the column scrolls on its own
# (overflow-x auto or scroll: code blocks, wide tables and outputs scroll within the column). Only the outermost
# element that sticks out is reported, with by how many pixels.
_WIDE = r"""
const out = [], doc = document.documentElement;
if (doc.scrollWidth > window.innerWidth)
  out.push(`page scrolls sideways: ${doc.scrollWidth} px wide in a ${window.innerWidth} px window`);
const col = document.querySelector('main.content');
if (!col) return out.concat(['no main.content column']);
const cs = getComputedStyle(col), box = col.getBoundingClientRect();
const left = box.left + parseFloat(cs.paddingLeft), right = box.right - parseFloat(cs.paddingRight);
if (box.right > doc.clientWidth + 1) out.push(`column ends at ${Math.round(box.right)} px, past the window (${doc.clientWidth} px)`);
const scrolls = e => { for (let a = e.parentNode; a && a !== col; a = a.parentElement)
  if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) return true; return false; };
const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
  (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\s+/).join('.') : '');
const seen = [], texts = [], walk = document.createTreeWalker(col, NodeFilter.SHOW_TEXT);
while (walk.nextNode()) texts.push(walk.currentNode);   // text overflows its box without widening the box
const rect = n => { if (n.nodeType === 1) return n.getBoundingClientRect();
  const g = document.createRange(); g.selectNodeContents(n); return g.getBoundingClientRect(); };
for (const n of [...col.querySelectorAll('*'), ...texts]) {
  const e = n.nodeType === 1 ? n : n.parentElement, r = rect(n);
  if (r.width === 0 || r.right <= right + 1 && r.left >= left - 1) continue;
  if (seen.some(s => s.contains(n)) || scrolls(n)) continue;
  seen.push(n);
  const by = Math.round(Math.max(r.right - right, left - r.left));
  const path = [e.parentElement, e].filter(x => x && x !== col).map(name).join(' > ') + (n === e ? '' : ' (text)');
  out.push(`${path} sticks out of the column by ${by} px: ${(n.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 70)}`);
}
return out;"""

WIDTHS = (1366, 390)   # a laptop and a phone

def check_widths(driver, base, pages, widths=WIDTHS):
    "Visit every page at each window width; return what is wider than its column (empty when all fit)."
    problems = []
    try:
        for width in widths:
            driver.set_window_size(width, 900)
            for name in pages:
                driver.get(base + name)
                inner = driver.execute_script('return window.innerWidth')
                if inner != width: problems.append(f'{name} at {width} px: the window is {inner} px wide'); continue
                problems += [f'{name} at {width} px: {what}' for what in driver.execute_script(_WIDE)]
    finally:
        driver.set_window_size(1280, 900)
    return problems

def _site_pages(site): return sorted(p.relative_to(site).as_posix() for p in site.rglob('*.html'))

@pytest.mark.slow
def test_fixture_site_in_browser(browser, serve, fixture_site):
    nbs = fixture_site.parent / 'nbs'
    assert check_site(browser, serve(fixture_site), _nb_titles(nbs)) == []

@pytest.mark.slow
def test_fixture_site_widths(browser, serve, fixture_site):
    "The fixture's too-wide prose and table fit at 1366 and 390 px; the measure itself sees a page that does not."
    base = serve(fixture_site)
    assert check_widths(browser, base, _site_pages(fixture_site)) == []
    try:
        browser.set_window_size(390, 900)
        browser.get(base + '01_other.html')
        browser.execute_script("document.querySelector('main.content table').style.overflowX = 'visible'")
        wide = browser.execute_script(_WIDE)
        assert any('tbody sticks out of the column' in p and 'value_0_wide' in p for p in wide), wide
        browser.execute_script("document.querySelector('main.content').style.overflowWrap = 'normal'")
        wide = browser.execute_script(_WIDE)
        assert any(p.startswith('page scrolls sideways') for p in wide), wide
        assert any('TRITONSERVER_REQUEST_RELEASE_RESCHEDULE' in p for p in wide), wide
    finally:
        browser.set_window_size(1280, 900)

@pytest.mark.slow
def test_120_character_lines_fit(browser, serve, fixture_site):
    "On a 1280-pixel window, a 120-character code line and its output each take one line: no scrollbar, no wrap."
    browser.get(serve(fixture_site) + '00_layer.html')
    assert browser.execute_script(_HIDDEN) == []
    heights = browser.execute_script('''return Array.from(document.querySelectorAll('.content pre'))
        .filter(p => p.textContent.startsWith(arguments[0]))
        .map(p => { const s = getComputedStyle(p);
          return Math.round((p.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom)) / parseFloat(s.lineHeight)); })''',
        LONG_LINE[:20])
    assert heights == [1, 1], heights   # the source and the output

def test_signatures_readable():
    "show_doc's guess `NoneType` for a parameter whose default is None is dropped from the rendered signature."
    assert build_docs.readable_signature("    status:int=200, body:bytes=b'', headers:NoneType=None") == "    status:int=200, body:bytes=b'', headers=None"
    md = "```python\ndef error_response(\n    err:TritonError, headers:NoneType=None\n)->Response:\n```\nheaders:NoneType=None in prose stays"
    assert build_docs.quarto_markdown(md).splitlines()[2] == '    err:TritonError, headers=None'
    assert build_docs.quarto_markdown(md).splitlines()[-1].startswith('headers:NoneType')

@pytest.mark.slow
def test_project_site_in_browser(browser, serve, project_site):
    titles = _nb_titles(ROOT / 'nbs')
    assert sorted(titles) == sorted(p.name for p in project_site.glob('*.html'))
    shots = ['index.html', _batching_page(titles)]
    assert check_site(browser, serve(project_site), titles, shots=[s for s in shots if s]) == []
    assert (ARTIFACTS / 'index.png').exists()

@pytest.mark.slow
def test_project_site_widths(browser, serve, project_site):
    "Issue 43: no page of the site (notebooks and the repository files they link to) wider than its column."
    assert check_widths(browser, serve(project_site), _site_pages(project_site)) == []
