"""Build the docs site from the notebooks into _docs/, without Quarto.

    python tools/build_docs.py                  # nbs/*.ipynb -> _docs/*.html (index.html is the home page)
    python tools/build_docs.py --out /tmp/site  # somewhere else
    python tools/build_docs.py --force          # reprocess every notebook, ignoring the _proc/ cache

Two steps, the same two that `nbdev_docs` takes, with the second one swapped:
1. nbdev's notebook processing. `nbdev_proc_nbs` cannot be used: it starts with `_ensure_quarto()`, which
   runs `sudo` and `curl` to install Quarto when it is missing. So each notebook goes through the function
   `nbdev_proc_nbs` itself runs per notebook, `nbdev.serve_drv.main` with nbdev's `FilterDefaults`
   processors, each in a fresh Python process as nbdev's spawned workers do (the processors execute each
   notebook's exports and imports to render `show_doc`). Results are cached in `_proc/`, nbdev's own
   folder for them.
2. Rendering: nbconvert's `HTMLExporter` with the template in `tools/docs_template/` instead of Quarto.
   What Quarto would do with what nbdev leaves in the notebook is done here: front matter becomes the
   page title, `#| echo/output/include/code-fold` cell options are applied and stripped, pandoc link
   attributes and `:::` divs are understood, headings get pandoc's ids (what nbdev's doc links point at),
   links to `*.ipynb` become links to pages, and widget outputs are replaced by a static picture.
Pages are self-contained apart from site.css and styles.css: images are embedded, nothing is loaded from
the network.
"""
import argparse, configparser, html, os, posixpath, re, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import nbformat, yaml
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from pygments.formatters import HtmlFormatter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_index import PARTS, part, reading_order  # noqa: E402  (one reading order for the table and the sidebar)

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_DIR = Path(__file__).resolve().parent / 'docs_template'
MARKER = '.triton_mini_docs'  # marks a folder this script owns, so a rebuild may empty it
ASSET_EXTS = {'.png', '.jpg', '.jpeg', '.gif', '.svg', '.webp', '.css', '.js'}

# ---------------------------------------------------------------------------------------------------------
# Step 1: nbdev's processing

def notebooks(nbs_path):
    """The notebooks that become pages, in sidebar order: the book's reading order (tools/notebook_index.py):
    index, 00_overview, the learning path's tutorials by number, then the layer notebooks by file name."""
    nbs = [p for p in Path(nbs_path).glob('*.ipynb') if not p.name.startswith(('_', '.'))]
    return sorted(nbs, key=lambda p: reading_order(p.stem))

def sidebar_group(stem:str, has_path:bool) -> str:
    "The sidebar heading `stem` sits under: '' before the learning path, or when a site has none (no headings)."
    return PARTS[part(stem)] if has_path else ''

# One fresh interpreter per notebook, as nbdev's spawned workers: nbdev's processors execute notebook code (and
# IPython takes over __main__), so nothing may leak from one notebook into the next. nbdev finds settings.ini from
# the working directory, and the notebooks import the package from the project folder even without an install.
# nbdev's `rm_export` drops the source of every `#| export` cell (the page would show only the signatures that
# `add_show_docs` adds after it); the site teaches the code, so the worker keeps it (nbdev's `#| exports`, for all).
_WORKER = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[3]); "
           "import nbdev.serve_drv, nbdev.processors; "
           "nbdev.processors._hide_dirs = nbdev.processors._hide_dirs - {'export'}; "
           "nbdev.serve_drv.main((Path(sys.argv[1]), Path(sys.argv[2]), nbdev.processors.FilterDefaults))")

def _proc_one(src:Path, dst:Path, root:Path):
    "Run nbdev's processors on one notebook in a new Python process; nbdev's warnings are passed on."
    r = subprocess.run([sys.executable, '-c', _WORKER, str(src), str(dst), str(root)], cwd=root,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f'nbdev could not process {src.name}:\n{r.stderr.strip()[-3000:]}')
    if r.stderr.strip(): print(f'build_docs: nbdev on {src.name}:\n{r.stderr.rstrip()}', file=sys.stderr)

def process_notebooks(
    nbs:list,            # Notebook paths
    proc_dir:Path,       # Where processed notebooks go (a cache: fresh ones are kept)
    force:bool=False,    # Reprocess even when the cached copy is newer than the notebook
    n_workers:int=None,  # Worker processes (default: one per CPU)
    root:Path=ROOT,      # The project folder (settings.ini)
)->list:                 # Processed notebook paths, in the order of `nbs`
    "Process notebooks with nbdev's `FilterDefaults`, each in its own process as `nbdev_proc_nbs` does."
    proc_dir = Path(proc_dir); proc_dir.mkdir(parents=True, exist_ok=True)
    # a processed notebook also depends on settings.ini and on the doc links nbdev finds in _modidx.py
    deps = [root/'settings.ini', *Path(root).glob('*/_modidx.py')]
    newest_input = max(p.stat().st_mtime for p in deps if p.exists())
    def stale(src, dst): return force or not dst.exists() or dst.stat().st_mtime < max(src.stat().st_mtime, newest_input)
    outs = [proc_dir/Path(nb).name for nb in nbs]
    jobs = [(Path(src), dst) for src, dst in zip(nbs, outs) if stale(Path(src), dst)]
    if jobs:
        with ThreadPoolExecutor(max(1, min(n_workers or os.cpu_count() or 1, len(jobs)))) as pool:
            for fut in [pool.submit(_proc_one, src, dst, Path(root)) for src, dst in jobs]: fut.result()
    return outs

# ---------------------------------------------------------------------------------------------------------
# Step 2: what Quarto would do with a processed notebook

def front_matter(nb)->dict:
    "The YAML front matter nbdev's FrontmatterProc put in the first raw cell (title, description, ...)."
    for cell in nb.cells[:2]:
        m = re.match(r'^---\s*\n(.*?)\n---\s*$', cell.source.strip(), re.S) if cell.cell_type == 'raw' else None
        if m: return yaml.safe_load(m.group(1)) or {}
    return {}

_re_option = re.compile(r'^#\|\s*([\w-]+)\s*:\s*(.*?)\s*$')

def cell_options(cell)->dict:
    "Take the Quarto cell options (`#| key: value`) nbdev leaves at the top of a code cell out of its source."
    lines, opts = cell.source.splitlines(), {}
    while lines and _re_option.match(lines[0]):
        key, val = _re_option.match(lines.pop(0)).groups()
        opts[key] = val.strip('"\'')
    cell.source = '\n'.join(lines).strip('\n')
    return opts

def _false(v): return str(v).lower() in ('false', 'no', '0')

def apply_cell_options(cell)->bool:
    "Apply echo/output/include/code-fold to `cell`; False when the cell should not be on the page."
    opts = cell_options(cell)
    if _false(opts.get('include', True)): return False
    docs = cell.metadata.setdefault('docs', {})
    if _false(opts.get('output', True)): cell.outputs = []
    if opts.get('output') == 'asis': docs['asis'] = True
    show_input = cell.source.strip() and not _false(opts.get('echo', True))
    if not show_input: cell.metadata.setdefault('transient', {})['remove_source'] = True
    fold = opts.get('code-fold', 'false')
    if not _false(fold):
        docs['fold'] = 'show' if fold == 'show' else 'hide'
        docs['summary'] = opts.get('code-summary', 'Code')
    return bool(show_input or cell.outputs)

_re_clear = re.compile(r'\x1b\[[0-9;]*[JK]')

def tidy_outputs(cell):
    "Drop stream outputs that only erased the line (ipywidgets' clear_output, progress bars)."
    keep = []
    for o in cell.get('outputs', []):
        if o.output_type == 'stream':
            text = o.text if isinstance(o.text, str) else ''.join(o.text)
            text = '\n'.join(l.rsplit('\r', 1)[-1] for l in _re_clear.sub('', text).split('\n'))
            if not text.strip(): continue
            o.text = text
        keep.append(o)
    cell.outputs = keep

# --- widgets: the site has no kernel, so each widget output becomes the static picture of its saved state

WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'
WIDGET_STATE = 'application/vnd.jupyter.widget-state+json'

def _html_output(text):
    return nbformat.v4.new_output('display_data', data={'text/html': text})

def _control_html(name, s)->str:
    "A disabled HTML form element that looks like the control in its saved state."
    e = lambda v: html.escape(str(v))
    label = f'<span class="widget-label">{e(s["description"])}</span> ' if s.get('description') else ''
    if name.endswith('SliderModel'):  # a range slider's value is [low, high]
        v = s.get('value', 0)
        low, shown = (v[0], f'{v[0]} – {v[1]}') if isinstance(v, list) else (v, v)
        return (f'{label}<input type="range" min="{e(s.get("min", 0))}" max="{e(s.get("max", 100))}" '
                f'step="{e(s.get("step") or 1)}" value="{e(low)}" disabled> <output>{e(shown)}</output>')
    if '_options_labels' in s:
        opts = s.get('_options_labels', [])
        idx = s.get('index')
        sel = set(idx if isinstance(idx, (list, tuple)) else [idx])
        options = ''.join(f'<option{" selected" if i in sel else ""}>{e(o)}</option>' for i, o in enumerate(opts))
        return f'{label}<select disabled>{options}</select>'
    if name in ('CheckboxModel', 'ToggleButtonModel'):
        checked = ' checked' if s.get('value') else ''
        return f'<label><input type="checkbox" disabled{checked}> {e(s.get("description", ""))}</label>'
    if name == 'ButtonModel': return f'<button type="button" disabled>{e(s.get("description", ""))}</button>'
    if name in ('HTMLModel', 'HTMLMathModel'): return f'{label}{s.get("value", "")}'
    if name == 'LabelModel': return f'{label}<span>{e(s.get("value", ""))}</span>'
    if name == 'ImageModel' and isinstance(s.get('value'), str):
        return f'<img alt="widget image" src="data:image/{e(s.get("format", "png"))};base64,{s["value"]}">'
    if 'value' in s: return f'{label}<input type="text" value="{e(s["value"])}" disabled>'
    return ''

def widget_outputs(model_id:str, state:dict, depth:int=0)->list:
    "Outputs showing widget `model_id` statically: Output widgets' saved outputs, controls as disabled inputs."
    m = state.get(model_id)
    if not m or depth > 20: return []
    name, s = m.get('model_name', ''), m.get('state', {})
    if name == 'OutputModel':
        return [nbformat.from_dict(o) for o in s.get('outputs', [])]
    if isinstance(s.get('children'), list):
        return [o for c in s['children'] for o in widget_outputs(str(c).removeprefix('IPY_MODEL_'), state, depth+1)]
    h = _control_html(name, s)
    return [_html_output(f'<div class="widget-static" title="Interactive in Jupyter: run the notebook to use it">{h}</div>')] if h else []

def static_widgets(nb):
    "Replace every widget output in `nb` by its static picture (or by the bundle's other representations)."
    state = nb.metadata.get('widgets', {}).get(WIDGET_STATE, {}).get('state', {})
    for cell in nb.cells:
        outs = []
        for o in cell.get('outputs', []):
            if WIDGET_VIEW not in o.get('data', {}):
                outs.append(o); continue
            shown = widget_outputs(o.data[WIDGET_VIEW].get('model_id', ''), state)
            rest = {k: v for k, v in o.data.items() if k not in (WIDGET_VIEW, 'text/plain')}
            if rest: o.data = rest; shown.append(o)
            if not shown:
                shown = [_html_output('<div class="widget-static widget-missing">An interactive widget: '
                                      'run the notebook in Jupyter to use it.</div>')]
            outs.extend(shown)
        if 'outputs' in cell: cell.outputs = outs

# --- markdown: the pandoc/Quarto syntax nbdev emits or authors borrow, turned into what mistune understands

_re_link_attrs = re.compile(r'\[([^\]\n]*)\]\(([^)\s]*)\)\{([^}\n]*)\}')
_re_attr = re.compile(r'([\w-]+)="([^"]*)"|([\w-]+)=(\S+)|\.([\w-]+)|#([\w-]+)')

def _attrs(spec:str)->dict:
    "Parse a pandoc attribute list `{#id .class key=\"value\"}` (without braces)."
    d, classes = {}, []
    for k, v, k2, v2, cls, ident in _re_attr.findall(spec):
        if k: d[k] = v
        elif k2: d[k2] = v2
        elif cls: classes.append(cls)
        elif ident: d['id'] = ident
    if classes: d['class'] = ' '.join(classes)
    return d

def _attr_html(d): return ''.join(f' {k}="{html.escape(v)}"' for k, v in d.items())

def _link_with_attrs(m):
    text, url, attrs = m.groups()
    d = {'href': url, **_attrs(attrs)}
    if d.get('target') == '_blank': d['rel'] = 'noopener'
    return f'<a{_attr_html(d)}>{html.escape(text)}</a>'

_CALLOUT_TITLES = {'note': 'Note', 'tip': 'Tip', 'warning': 'Warning', 'caution': 'Caution', 'important': 'Important'}

def _fenced_div_open(spec:str)->str:
    d = _attrs(spec.strip().strip('{}') if spec.strip().startswith('{') else '.' + spec.strip())
    classes = d.get('class', '').split()
    callout = next((c.removeprefix('callout-') for c in classes if c.startswith('callout-')), None)
    title = d.pop('title', None) or _CALLOUT_TITLES.get(callout)
    if callout: d['class'] = ' '.join(['callout'] + classes)
    head = f'<div class="callout-title">{html.escape(title)}</div>\n' if callout and title else ''
    return f'<div{_attr_html(d)}>\n{head}'

def readable_signature(line:str)->str:
    "A show_doc signature without fastcore's guessed `NoneType` (the type of a `None` default): `headers=None`."
    return re.sub(r'\b(\w+):NoneType=None\b', r'\1=None', line)

def quarto_markdown(md:str)->str:
    "Rewrite pandoc link attributes and `:::` fenced divs (outside code fences) as HTML."
    out, fence = [], None
    for line in md.split('\n'):
        stripped = line.lstrip()
        m = re.match(r'(`{3,}|~{3,})', stripped)
        if m and (fence is None or stripped.startswith(fence)):
            fence = m.group(1) if fence is None else None
        elif fence is not None:
            line = readable_signature(line)   # inside a code fence: show_doc's signatures
        else:
            div = re.match(r'^:::+\s*(.*?)\s*$', line)
            if div:
                out += ['', _fenced_div_open(div.group(1)) if div.group(1) else '</div>', '']
                continue
            line = _re_link_attrs.sub(_link_with_attrs, line)
        out.append(line)
    return '\n'.join(out)

def pandoc_id(text:str)->str:
    "The id pandoc (and so Quarto) gives a heading, which nbdev's doc links (`page.html#name`) point at."
    s = html.unescape(re.sub(r'<[^>]+>', '', text)).lower()
    s = re.sub(r'[^\w\s.-]', '', s)
    s = re.sub(r'\s+', '-', s.strip())
    s = re.sub(r'^[^a-z]+', '', s)
    return s or 'section'

# --- the exporter

def make_exporter():
    "An nbconvert HTMLExporter using tools/docs_template, with pandoc-style heading ids and a page TOC."

    class SiteRenderer(IPythonRenderer):
        "mistune renderer: headings get unique pandoc ids (or `{#id}`) and are collected for the TOC."
        def __init__(self, page, **kw):
            super().__init__(**kw)
            self.page = page
        def heading(self, text, level, **attrs):
            m = re.search(r'\s*\{([^}]*)\}\s*$', text)
            extra = _attrs(m.group(1)) if m else {}
            if m: text = text[:m.start()]
            ident = extra.pop('id', None) or pandoc_id(text)
            base, n = ident, 0
            while ident in self.page['ids']:
                n += 1; ident = f'{base}-{n}'
            self.page['ids'].add(ident)
            if level in (2, 3): self.page['toc'].append((level, ident, re.sub(r'<[^>]+>', '', text)))
            cls = f' class="{html.escape(extra["class"])}"' if 'class' in extra else ''
            return (f'<h{level} id="{ident}"{cls}>{text}<a class="anchor-link" href="#{ident}" '
                    f'aria-label="Link to this section">#</a></h{level}>\n')
        # nbconvert embeds <img> in raw HTML by re-serialising it with BeautifulSoup, which closes the
        # <div> a `:::` block opens; replacing the src attributes in place keeps the HTML as written
        def _embed(self, text):
            def src(m):
                url = self._src_to_base64(html.unescape(m.group(2)))
                return f'{m.group(1)}"{url}"' if url else m.group(0)
            return re.sub(r'(<img\b[^>]*?\ssrc=)"([^"]*)"', src, text)
        def block_html(self, text): return self._embed(text)
        def inline_html(self, text): return self._embed(text)

    class SiteExporter(HTMLExporter):
        page = None
        @pass_context
        def markdown2html(self, context, source):
            cell = context.get('cell', {})
            path = context.get('resources', {}).get('metadata', {}).get('path', '')
            renderer = SiteRenderer(self.page, escape=False, attachments=cell.get('attachments', {}),
                                    embed_images=True, path=path)
            return MarkdownWithMath(renderer=renderer).render(quarto_markdown(source))

    return SiteExporter(template_name=TEMPLATE_DIR.name, extra_template_basedirs=[str(TEMPLATE_DIR.parent)],
                        exclude_input_prompt=True, exclude_output_prompt=True, embed_images=True)

def _toc_html(toc)->str:
    if len(toc) < 2: return ''
    items = ''.join(f'<li class="toc-h{lvl}"><a href="#{ident}">{text}</a></li>' for lvl, ident, text in toc)
    return f'<aside class="toc" aria-label="On this page"><h2>On this page</h2><ul>{items}</ul></aside>'

# --- links

def _settings(root)->dict:
    "settings.ini's values (nbdev 2 keeps everything in [DEFAULT])."
    cp = configparser.ConfigParser(); cp.read(Path(root)/'settings.ini')
    return dict(cp['DEFAULT'])

def _doc_fragment(frag:str, ids:set)->str:
    "nbdev links a method as `#class.method`; without its own show_doc, point at the class (or the page)."
    while frag and frag not in ids: frag = frag.rpartition('.')[0]
    return f'#{frag}' if frag else ''

FILES = 'files'   # the site's folder for the repository files pages link to (bench results, tests, settings.ini)

def rewrite_links(
    page_html:str,      # One rendered page
    ids:dict,           # Page file name (and Quarto's output-file name) -> (page file name, ids on that page)
    nbs_path:Path,      # The notebook folder, which relative links start from
    doc_base:str='',    # This project's docs URL (settings.ini doc_host + doc_baseurl), which nbdev links to
    repo_root:Path=None,# The repository, for relative links to files that are not pages
    files:set=None,     # Collects the repository paths linked to, which `write_files` renders into the site
    git_url:str='',     # settings.ini's git_url: nbdev's "source" links into it are dropped
)->str:
    """Make links work on this site: `x.ipynb(#a)` -> `x.html(#a)`; nbdev's links into this project's published
    docs -> the local page; relative links to other files of the repository -> that file rendered into the site
    (`files/...html`), so no link leads out to a repository that may not be published. nbdev's "source" links
    (to `git_url`) are dropped: the page shows the exported code itself."""
    if git_url: page_html = re.sub(r'<a [^>]*href="' + re.escape(git_url.rstrip('/')) + r'/[^"]*"[^>]*>source</a>', '', page_html)
    def local(url):
        parts = urlsplit(url)
        if doc_base and url.startswith(doc_base):
            name = posixpath.basename(urlsplit(url[len(doc_base):]).path)
            if name not in ids: return url
            href, page_ids = ids[name]
            return href + _doc_fragment(parts.fragment, page_ids)
        if parts.scheme or parts.netloc or not parts.path or parts.path.startswith('/'): return url
        frag = f'#{parts.fragment}' if parts.fragment else ''
        path = posixpath.normpath(parts.path)
        if path.endswith('.ipynb') and path[:-6] + '.html' in ids: return path[:-6] + '.html' + frag
        if path in ids or ((Path(nbs_path)/path).is_file() and Path(path).suffix.lower() in ASSET_EXTS): return url
        target = (Path(nbs_path)/path).resolve()
        if repo_root and target.exists() and target.is_relative_to(Path(repo_root).resolve()):
            rel = target.relative_to(Path(repo_root).resolve()).as_posix()
            if files is not None: files.add(rel)
            return f'{FILES}/{rel}/index.html' if target.is_dir() else f'{FILES}/{rel}.html' + frag
        return url
    def fix(m):
        q, url = m.group(1), html.unescape(m.group(2))
        return f'href={q}{html.escape(local(url))}{q}'
    return re.sub(r'\bhref=(["\'])(.*?)\1', fix, page_html)

def _file_page(title:str, body:str)->str:
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
            f'<title>{html.escape(title)}</title><link rel="stylesheet" href="{{css}}"></head>'
            f'<body><main class="content file"><h1>{html.escape(title)}</h1>{body}</main></body></html>')

def write_files(rels:set, repo_root:Path, out_dir:Path):
    """Render the repository files pages link to into `out_dir/files/`: Markdown as HTML, other text highlighted,
    a folder as a list of its files (each rendered too)."""
    from pygments import highlight
    from pygments.lexers import get_lexer_for_filename, TextLexer
    from pygments.util import ClassNotFound
    todo, done = sorted(rels), set()
    while todo:
        rel = todo.pop()
        if rel in done: continue
        done.add(rel)
        src, dst = Path(repo_root)/rel, out_dir/FILES/rel
        if src.is_dir():
            kids = sorted(p for p in src.iterdir() if not p.name.startswith(('.', '_')) and (p.is_file() or p.is_dir()))
            todo += [p.relative_to(repo_root).as_posix() for p in kids]
            items = ''.join(f'<li><a href="{html.escape(p.name)}{"/index" if p.is_dir() else ""}.html">{html.escape(p.name)}</a></li>' for p in kids)
            page, dst = _file_page(rel + '/', f'<ul>{items}</ul>'), dst/'index.html'
        else:
            try: text = src.read_text(encoding='utf-8')
            except (UnicodeDecodeError, OSError): continue
            if src.suffix == '.md': body = MarkdownWithMath(renderer=IPythonRenderer(escape=False)).render(text)
            else:
                try: lexer = get_lexer_for_filename(src.name)
                except ClassNotFound: lexer = TextLexer()
                body = highlight(text, lexer, HtmlFormatter(cssclass='highlight'))
            page, dst = _file_page(rel, body), dst.with_name(dst.name + '.html')
        depth = len(dst.relative_to(out_dir).parts) - 1
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(page.replace('{css}', '../' * depth + 'site.css'), encoding='utf-8')

# ---------------------------------------------------------------------------------------------------------
# The site

def _number(stem):
    m = re.match(r'^(\d+[a-z]?)_', stem)
    return m.group(1) if m else ''

def _site_css()->str:
    return ((TEMPLATE_DIR/'site.css').read_text() + '\n/* Code highlighting (pygments, style "default") */\n'
            + HtmlFormatter(style='default').get_style_defs('.highlight') + '\n')

def prepare(nb, src:Path)->dict:
    "Apply what Quarto would to processed notebook `nb` (in place); return its page's details."
    fm = front_matter(nb)
    cells = []
    for cell in nb.cells:
        if cell.cell_type == 'raw': continue  # the front matter, or raw text meant for other formats
        if cell.cell_type == 'markdown' and 'WARNING: THIS FILE WAS AUTOGENERATED' in cell.source: continue
        if cell.cell_type == 'code':
            if not apply_cell_options(cell): continue
            tidy_outputs(cell)
        cells.append(cell)
    nb.cells = cells
    static_widgets(nb)
    desc = str(fm.get('description') or '')
    return dict(name=src.stem, href=src.stem + '.html', title=str(fm.get('title') or src.stem).replace('`', ''), number=_number(src.stem),
                description=desc, description_html=re.sub(r'`([^`]+)`', r'<code>\1</code>', html.escape(desc)),
                output_file=fm.get('output-file', ''), ids=set(), toc=[])

def _prepare_out(out_dir:Path):
    "Empty `out_dir` if this script made it; refuse to touch a folder that has other things in it."
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir/MARKER).exists():
            raise SystemExit(f'{out_dir} exists and was not made by build_docs.py (nbdev_docs output?); '
                             'delete it or pass --out')
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir/MARKER).write_text('Built by tools/build_docs.py; the whole folder is replaced on each build.\n')

def build_docs(
    out_dir=None,        # Where the site goes (default: settings.ini's doc_path, _docs/)
    nbs_path=None,       # The notebooks (default: settings.ini's nbs_path, nbs/)
    proc_dir=None,       # Cache of processed notebooks (default: _proc/, as nbdev)
    force:bool=False,    # Reprocess every notebook
    n_workers:int=None,  # Processes for nbdev's processing
    root=ROOT,           # The project folder (settings.ini)
)->list:                 # The pages written, index.html first
    "Build the site: one HTML page per notebook plus site.css and styles.css."
    root = Path(root)
    cfg = _settings(root)
    out_dir = Path(out_dir or root/cfg.get('doc_path', '_docs'))
    nbs_path = Path(nbs_path or root/cfg.get('nbs_path', 'nbs'))
    nbs = notebooks(nbs_path)
    if not nbs: raise SystemExit(f'no notebooks in {nbs_path}')
    with tempfile.TemporaryDirectory(prefix='build_docs_proc_') as tmp:
        if proc_dir is None:  # _proc/ caches the project's own notebooks only
            own = nbs_path.resolve() == (root/cfg.get('nbs_path', 'nbs')).resolve()
            proc_dir = root/'_proc' if own else tmp
        procs = process_notebooks(nbs, Path(proc_dir), force=force, n_workers=n_workers, root=root)
        processed = [nbformat.read(p, as_version=4) for p in procs]

    pages = [prepare(nb, src) for nb, src in zip(processed, nbs)]
    for i, p in enumerate(pages):
        p['prev'] = pages[i-1] if i > 0 else None
        p['next'] = pages[i+1] if i+1 < len(pages) else None
    has_path = any(part(p['name']) == 'path' for p in pages)
    site = dict(title=cfg.get('title') or cfg.get('lib_name') or root.name, git_url=cfg.get('git_url', ''),
                pages=[dict(href=p['href'], title=p['title'], number=p['number'], group=sidebar_group(p['name'], has_path))
                       for p in pages])

    exporter = make_exporter()
    rendered = []
    for nb, page in zip(processed, pages):
        exporter.page = page  # the renderer records the page's heading ids and outline here
        body, _ = exporter.from_notebook_node(nb, resources={'metadata': {'path': str(nbs_path), 'name': page['name']},
                                                             'page': page, 'site': site})
        rendered.append(body.replace('<!-- on-this-page -->', _toc_html(page['toc'])))

    # links are fixed once every page is rendered, so a link can be checked against the ids on its target
    ids = {p['href']: (p['href'], p['ids']) for p in pages}
    ids |= {p['output_file']: (p['href'], p['ids']) for p in pages if p['output_file'] and p['output_file'] not in ids}
    # the published site's address, as nbdev's doc links spell it (nbdev.doclinks._qual_sym)
    doc_base = urljoin(cfg['doc_host'] + '/', cfg.get('doc_baseurl', '')).rstrip('/') + '/' if cfg.get('doc_host') else ''
    _prepare_out(out_dir)
    written, files = [], set()
    for body, page in zip(rendered, pages):
        body = rewrite_links(body, ids, nbs_path, doc_base, root, files, cfg.get('git_url', ''))
        (out_dir/page['href']).write_text(body, encoding='utf-8')
        written.append(out_dir/page['href'])

    write_files(files, root, out_dir)
    (out_dir/'site.css').write_text(_site_css(), encoding='utf-8')
    styles = nbs_path/'styles.css'
    (out_dir/'styles.css').write_text(styles.read_text() if styles.exists() else '', encoding='utf-8')
    for f in nbs_path.rglob('*'):  # images and other files pages may point at with raw HTML
        rel = f.relative_to(nbs_path)
        if f.is_file() and f.suffix.lower() in ASSET_EXTS and f.name != 'styles.css' \
                and not any(part.startswith(('_', '.')) for part in rel.parts):
            (out_dir/rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, out_dir/rel)
    return written

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', help='output folder (default: _docs)')
    ap.add_argument('--nbs', help='notebook folder (default: nbs)')
    ap.add_argument('--force', action='store_true', help='reprocess every notebook, ignoring the _proc cache')
    ap.add_argument('--workers', type=int, help='processes for nbdev processing (default: CPU count)')
    args = ap.parse_args(argv)
    pages = build_docs(args.out, args.nbs, force=args.force, n_workers=args.workers)
    out = pages[0].parent
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f'wrote {len(pages)} pages to {shown}/ (open {shown}/index.html)', file=sys.stderr)

if __name__ == '__main__': main()
