"""Conformance: the same requests to real Triton 2.51 and to triton-mini, answers compared (marker `oracle`).

Two pairs of servers, each started as the real command on free ports with the repository copied to a temp
dir: `none` mode on tests/models/conformance, and (started when its first case runs) `explicit` mode on
tests/models/conformance_explicit. The catalogue of requests is tests/conformance/cases.py; every case sends
its request to both servers and compares status, JSON body (parsed; key order and duplicate keys count,
numbers compare as doubles), binary bytes after the JSON header, server-sent events, or the Prometheus
exposition (families, label sets, counts). Only what legitimately differs is normalised: the server
version, timings in statistics and metrics, the Content-Type of error responses (Triton itself is not
consistent) and of empty bodies, and the per-case normalisations the catalogue names. A failure shows both answers side by
side. A summary goes to tests/artifacts/conformance.md.

The oracle is found via $TRITON_ORACLE, else <repo>/../shared/oracle/real-triton; without it every case
is skipped with that reason.
"""
from __future__ import annotations
import difflib, gzip, http.client, itertools, json, math, socket, sys, textwrap, time, zlib
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).parent))
from conformance.cases import CASES, Case  # noqa: E402
from triton_servers import ROOT, copy_models, oracle_or_skip, start_together  # noqa: E402

pytestmark = pytest.mark.oracle

ARTIFACT = ROOT / 'tests' / 'artifacts' / 'conformance.md'
TIMEOUT = 60


# ---------------------------------------------------------------------------------------------------------
# Servers

def start_pair(launch, tmp_path_factory, mode:str, source:str) -> dict:
    "Real Triton and triton-mini (both as the real command) on copies of the same repository, both up."
    oracle_or_skip()
    repo = copy_models(tmp_path_factory.mktemp(f'conformance_{mode}') / 'models', source)
    flags = (f'--model-control-mode={mode}', '--exit-timeout-secs=3')
    wait = 'ready' if mode == 'none' else 'live'   # none mode: HTTP is up before the models are
    triton, mini = start_together(lambda: launch.real_triton(repo, *flags, wait=wait),
                                  lambda: launch.mini_process(repo, *flags, grpc=False, wait=wait))
    return {'triton': triton, 'mini': mini}

@pytest.fixture(scope='module')
def none_pair(launch_module, tmp_path_factory):
    return start_pair(launch_module, tmp_path_factory, 'none', 'conformance')

@pytest.fixture(scope='module')
def explicit_pair(launch_module, tmp_path_factory):
    return start_pair(launch_module, tmp_path_factory, 'explicit', 'conformance_explicit')


# ---------------------------------------------------------------------------------------------------------
# HTTP

class Reply:
    def __init__(self, status, reason='', headers=None, body=b''):
        self.status, self.reason, self.headers, self.body = status, reason, headers or {}, body

def http_request(port:int, method:str, path:str, body:bytes=b'', headers:dict|None=None, timeout:float=TIMEOUT) -> Reply:
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items(): conn.putheader(k, v)
        if body or method in ('POST', 'PUT'): conn.putheader('Content-Length', str(len(body)))
        conn.endheaders(body or None)
        r = conn.getresponse()
        data = r.read()
        return Reply(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
    finally: conn.close()

def send(server:Server, case:Case) -> Reply:
    port = server.metrics_port if case.compare.startswith('metrics') else server.http_port
    try: return http_request(port, case.method, case.path, case.body_bytes(), case.headers)
    except socket.timeout: return Reply(None, f'no answer within {TIMEOUT} s')
    except OSError as e: return Reply(None, f'{type(e).__name__}: {e}')

def settle(servers:dict, model:str):
    "Wait until `model` is neither LOADING nor UNLOADING on either server (unload returns before it is done)."
    deadline = time.monotonic() + 30
    for s in servers.values():
        while time.monotonic() < deadline:
            index = json.loads(http_request(s.http_port, 'POST', '/v2/repository/index').body)
            if not any(e['name'] == model and e.get('state') in ('LOADING', 'UNLOADING') for e in index): break
            time.sleep(0.05)


# ---------------------------------------------------------------------------------------------------------
# Normalised, comparable form of an answer

class Obj(list):
    "A JSON object as its (key, value) pairs: keeps key order and duplicate keys."

def parse_json(data:bytes):
    return json.loads(data.decode('utf-8', errors='surrogateescape'), object_pairs_hook=Obj)

def walk(v, fn):
    "Apply fn(key, value) -> value to every object member, depth first."
    if isinstance(v, Obj): return Obj((k, fn(k, walk(x, fn))) for k, x in v)
    if isinstance(v, list): return [walk(x, fn) for x in v]
    return v

def _timing(k, v):
    if k in ('ns', 'last_inference') and isinstance(v, (int, float)): return f'<{k}>' if v > 0 else 0
    return v

PROTO_MAPS = ('input_map', 'output_map', 'parameters', 'cc_model_filenames', 'metric_tags')

def _proto_maps(k, v):
    "Protobuf map fields print in hash order in Triton: sort their keys (maps only, not repeated fields)."
    return Obj(sorted(v, key=lambda kv: kv[0])) if k in PROTO_MAPS and isinstance(v, Obj) else v

def _stats_shape(d):
    "Per model version: its name, version and the keys of its entry (what a statistics client relies on)."
    def shape(v):
        if isinstance(v, Obj): return Obj((k, shape(x)) for k, x in v)
        if isinstance(v, list): return 'array'
        return type(v).__name__
    return walk(d, lambda k, v: [Obj([('name', dict(e)['name']), ('version', dict(e)['version']), ('keys', shape(e))])
                                 for e in v] if k == 'model_stats' else v)

NORMALIZERS = {
    'stats_shape': _stats_shape,
    'proto_maps': lambda d: walk(d, _proto_maps),
    'server_version': lambda d: Obj((k, '<version>' if k == 'version' else v) for k, v in d),
    'timings': lambda d: walk(d, _timing),
    'sort_outputs': lambda d: Obj((k, sorted(v, key=lambda o: dict(o).get('name', '')) if k == 'outputs' else v) for k, v in d),
}

def media_type(headers:dict) -> str:
    return headers.get('content-type', '').split(';')[0].strip()

def sse_events(body:bytes) -> list:
    events = []
    for block in body.decode('utf-8', errors='replace').split('\n\n'):
        if not block: continue
        if not block.startswith('data: '): events.append(['<not an event>', block]); continue
        try: events.append(parse_json(block[len('data: '):].encode()))
        except ValueError: events.append(['<not JSON>', block])
    return events

def comparable(reply:Reply, case:Case) -> Obj:
    "What is compared: status, the success Content-Type, and the body parsed the way a client reads it."
    d = Obj([('status', reply.status)])
    if reply.status is None: return Obj(d + [('error', reply.reason)])
    body = reply.body
    if enc := reply.headers.get('content-encoding'):
        d.append(('content-encoding', enc))
        body = gzip.decompress(body) if enc == 'gzip' else zlib.decompress(body)
    if 200 <= reply.status < 300 and body:   # errors and empty bodies: see the module docstring
        d.append(('content-type', media_type(reply.headers)))
    if case.compare == 'stream':
        d.append(('events', sse_events(body)))
        return d
    if 'inference-header-content-length' in reply.headers:
        n = int(reply.headers['inference-header-content-length'])
        body, blob = body[:n], body[n:]
    else: blob = None
    if body:
        try: doc = parse_json(body)
        except ValueError: d.append(('raw', body.decode('utf-8', errors='backslashreplace')))
        else:
            for name in case.normalize:
                if isinstance(doc, Obj): doc = NORMALIZERS[name](doc)
            d.append(('json', doc))
    else: d.append(('body', ''))
    if blob is not None: d.append(('binary', blob.hex(' ', 4)))
    return d

COUNT_FAMILIES = ('nv_inference_request_success', 'nv_inference_request_failure', 'nv_inference_count',
                  'nv_inference_exec_count', 'nv_inference_pending_request_count')
CUSTOM_FAMILIES = ('my_requests', 'my_gauge', 'my_hist')

def metrics_comparable(reply:Reply, aspect:str) -> Obj:
    "One aspect of a Prometheus exposition, parsed with prometheus_client."
    if reply.status != 200: return Obj([('status', reply.status), ('body', reply.body.decode(errors='replace'))])
    families = list(text_string_to_metric_families(reply.body.decode()))
    if aspect == 'content_type':
        return Obj([('status', reply.status), ('content-type', reply.headers.get('content-type'))])
    if aspect == 'families':   # triton-mini's own families (triton_mini_*) are extras by design
        return Obj((f.name, f'{f.type}: {f.documentation}') for f in sorted(families, key=lambda f: f.name)
                   if not f.name.startswith('triton_mini_') and f.name not in CUSTOM_FAMILIES)
    if aspect == 'labels':
        return Obj((f.name, sorted(f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))}}}" for s in f.samples))
                   for f in sorted(families, key=lambda f: f.name) if f.name.startswith('nv_inference_'))
    wanted, model = (CUSTOM_FAMILIES, None) if aspect == 'custom' else (COUNT_FAMILIES, aspect.partition('=')[2] or None)
    def sample(s): return f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))}}} {s.value:g}"
    return Obj((f.name, sorted(sample(s) for s in f.samples if model is None or s.labels.get('model') == model))
               for f in sorted(families, key=lambda f: f.name) if f.name in wanted)


def canonical(v, unordered:bool=False):
    "A hashable form where numbers compare as doubles, booleans are not numbers, NaN equals NaN."
    if isinstance(v, Obj):
        items = tuple((k, canonical(x, unordered)) for k, x in v)
        return ('{}', tuple(sorted(items, key=repr)) if unordered else items)
    if isinstance(v, list): return ('[]', tuple(canonical(x, unordered) for x in v))
    if isinstance(v, bool): return ('bool', v)
    if isinstance(v, float) and math.isnan(v): return ('nan',)
    if isinstance(v, (int, float)): return ('num', float(v) if abs(v) < 2**53 or isinstance(v, float) else v)
    return (type(v).__name__, v)


# ---------------------------------------------------------------------------------------------------------
# Side-by-side display

def pretty(v, ind:int=0) -> str:
    pad = '  ' * ind
    if isinstance(v, Obj):
        if not v: return '{}'
        return '{\n' + ',\n'.join(f'{pad}  {json.dumps(k)}: {pretty(x, ind + 1)}' for k, x in v) + f'\n{pad}}}'
    if isinstance(v, list):
        flat = json.dumps(v, ensure_ascii=False)
        if not any(isinstance(x, (list, dict)) for x in v) and len(flat) < 60: return flat
        return '[\n' + ',\n'.join(f'{pad}  {pretty(x, ind + 1)}' for x in v) + f'\n{pad}]'
    text = json.dumps(v, ensure_ascii=False)
    try: text.encode()
    except UnicodeEncodeError: text = json.dumps(v)   # bytes that were not UTF-8 (surrogate-escaped): show them as \udcxx escapes
    return text

def side_by_side(left:str, right:str, width:int=72, context:int=4) -> str:
    "Two columns aligned by difflib, differing rows marked `|`, `<` or `>`; long equal runs folded."
    l, r = left.splitlines(), right.splitlines()
    rows = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, l, r, autojunk=False).get_opcodes():
        if op == 'equal':
            eq = [(a, ' ', a) for a in l[i1:i2]]
            if len(eq) > 2 * context + 1 and len(l) + len(r) > 60:
                eq = eq[:context] + [(f'... {len(eq) - 2 * context} equal lines ...', ' ', '')] + eq[-context:]
            rows += eq
        else:
            mark = '|' if op == 'replace' else '<' if op == 'delete' else '>'
            rows += [(a, mark, b) for a, b in itertools.zip_longest(l[i1:i2], r[j1:j2], fillvalue='')]
    out = [f"{'real Triton'.ljust(width)}   triton-mini", '-' * width + '   ' + '-' * width]
    for a, mark, b in rows:
        wa = textwrap.wrap(a, width, drop_whitespace=False) or ['']
        wb = textwrap.wrap(b, width, drop_whitespace=False) or ['']
        for k, (x, y) in enumerate(itertools.zip_longest(wa, wb, fillvalue='')):
            out.append(f"{x.ljust(width)} {mark if k == 0 else ' '} {y}".rstrip())
    return '\n'.join(out)


# ---------------------------------------------------------------------------------------------------------
# The test

RESULTS: dict = {}

def params() -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
            for c in CASES]

@pytest.mark.parametrize('case', params())
def test_conformance(case:Case, request):
    servers = request.getfixturevalue('none_pair' if case.pair == 'none' else 'explicit_pair')
    for step in case.setup:
        method, path, body, *headers = step
        for s in servers.values():
            request_body = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            http_request(s.http_port, method, path, request_body, headers[0] if headers else None)
    if case.settle: settle(servers, case.settle)
    replies = {k: send(s, case) for k, s in servers.items()}
    if case.compare.startswith('metrics:'):
        got = {k: metrics_comparable(r, case.compare.split(':', 1)[1]) for k, r in replies.items()}
    else:
        got = {k: comparable(r, case) for k, r in replies.items()}
    same = canonical(got['triton'], case.unordered) == canonical(got['mini'], case.unordered)
    view = side_by_side(pretty(got['triton']), pretty(got['mini']))
    if replies['mini'].status == 500 and replies['mini'].body == b'Internal Server Error':   # an uncaught exception
        view += f"\n\ntriton-mini's log:\n{servers['mini'].log_tail(25)}"
    RESULTS[case.id] = (case, same, view)
    assert same, f'{case.method} {case.path} answered differently:\n{view}'


@pytest.fixture(scope='module', autouse=True)
def summary():
    yield
    if not RESULTS: return
    cases = [c for c in CASES if c.id in RESULTS]
    identical = [c for c in cases if RESULTS[c.id][1]]
    intended = [c for c in cases if c.xfail and not RESULTS[c.id][1]]
    wrong = [c for c in cases if not c.xfail and not RESULTS[c.id][1]]
    lines = ['# Conformance: real Triton 2.51 vs triton-mini', '',
             f'**{len(identical)} of {len(cases)} cases identical after normalisation**; '
             f'{len(intended)} differ on purpose (xfail), {len(wrong)} differ unexpectedly.', '',
             f'By pair: ' + ', '.join(f'{p}: {sum(RESULTS[c.id][1] for c in cases if c.pair == p)} of '
                                      f'{sum(c.pair == p for c in cases)}' for p in ('none', 'explicit')), '',
             '| # | case | pair | request | result | note |', '|---|---|---|---|---|---|']
    for i, c in enumerate(cases, 1):
        result = 'identical' if RESULTS[c.id][1] else f'intended difference: {c.xfail}' if c.xfail else '**DIFFERS**'
        lines.append(f'| {i} | `{c.id}` | {c.pair} | `{c.method} {c.path}` | {result} | {c.note} |')
    for title, group in (('Unexpected differences', wrong), ('Intended differences', intended)):
        if not group: continue
        lines += ['', f'## {title}']
        for c in group:
            lines += ['', f'### `{c.id}`: {c.method} {c.path}', '', '```', f'request body: {c.body_bytes()[:300]!r}',
                      RESULTS[c.id][2], '```']
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text('\n'.join(lines) + '\n', errors='backslashreplace')
