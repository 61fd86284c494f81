"""A seeded generator of hostile HTTP requests for triton-mini, and the checks every answer must pass.

`cases(seed, n)` yields `Case`s: mutations of valid requests (KServe v2 inference, binary tensors, generate,
repository, logging, statistics) at the JSON level, the byte level, the header level and the path level,
plus raw byte streams that are not quite HTTP. `check(case, answer)` asserts what issue 18 promises for any
input: an answer within the deadline; no 5xx except Triton's INTERNAL/UNSUPPORTED/UNAVAILABLE with a JSON
`{"error": "..."}` body; every error body JSON `{"error": str}`; no Python exception name in any body.

Used by tests/test_http_fuzz.py (10^4 cases in CI) and bench/fuzz_http.py (as many as you like). The corpus
of interesting inputs found so far lives in tests/fuzz_corpus/http.jsonl and is replayed first.
"""
from __future__ import annotations
import base64, builtins, gzip, json, random, re, socket, struct, zlib
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / 'fuzz_corpus' / 'http.jsonl'
MODELS = ('add_sub', 'identity_int32', 'identity_bytes', 'gen', 'decoupled')   # from tests/models/conformance
EXCEPTION_NAMES = re.compile(r'\b(%s|Traceback)\b' % '|'.join(
    sorted(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException) and n not in ('Exception',))))
ALLOWED_5XX = {500, 501, 503}
UNEXPECTED = b"internal error while handling the request"   # triton_mini's answer to an exception nobody foresaw


@dataclass
class Case:
    method: str = 'GET'
    path: str = '/v2/health/ready'
    headers: dict = field(default_factory=dict)
    body: bytes = b''
    raw: bytes | None = None      # sent as is on a fresh connection instead of method/path/headers/body
    note: str = ''

    def to_json(self) -> str:
        d = {'method': self.method, 'path': self.path, 'headers': self.headers, 'body': base64.b64encode(self.body).decode(), 'note': self.note}
        if self.raw is not None: d['raw'] = base64.b64encode(self.raw).decode()
        return json.dumps(d)

    @classmethod
    def from_json(cls, line:str) -> Case:
        d = json.loads(line)
        raw = base64.b64decode(d['raw']) if 'raw' in d else None
        return cls(d['method'], d['path'], d['headers'], base64.b64decode(d['body']), raw, d.get('note', ''))

    def wire(self) -> bytes:
        "The bytes of this request on the wire (one request, Connection: close)."
        if self.raw is not None: return self.raw
        head = [f'{self.method} {self.path} HTTP/1.1', 'Host: fuzz', f'Content-Length: {len(self.body)}', 'Connection: close']
        head += [f'{k}: {v}' for k, v in self.headers.items()]
        return ('\r\n'.join(head) + '\r\n\r\n').encode('latin-1', 'replace') + self.body


def repository(dest) -> Path:
    "A model repository at `dest` with the models the cases aim at."
    from triton_servers import copy_models
    return copy_models(dest, *(f'conformance/{m}' for m in MODELS))


def corpus() -> list:
    return [Case.from_json(l) for l in CORPUS.read_text().splitlines() if l.strip() and not l.startswith('#')] if CORPUS.exists() else []


# ---------------------------------------------------------------------------------------------------------
# Valid requests to start from

def _tensor(name, datatype, shape, data): return {'name': name, 'datatype': datatype, 'shape': shape, 'data': data}

def _seeds(r:random.Random):
    "A valid (method, path, headers, JSON document or bytes) to mutate."
    k = r.randrange(9)
    if k == 0: return 'POST', '/v2/models/add_sub/infer', {}, {'id': 'f', 'inputs': [_tensor('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4]),
                                                                                     _tensor('INPUT1', 'FP32', [1, 4], [1, 1, 1, 1])],
                                                                'outputs': [{'name': 'OUTPUT0', 'parameters': {'binary_data': True}}]}
    if k == 1:
        head = json.dumps({'inputs': [{'name': 'X', 'datatype': 'INT32', 'shape': [1, 3], 'parameters': {'binary_data_size': 12}}]}).encode()
        return 'POST', '/v2/models/identity_int32/infer', {'Inference-Header-Content-Length': str(len(head))}, head + struct.pack('<3i', 1, 2, 3)
    if k == 2: return 'POST', '/v2/models/identity_bytes/infer', {}, {'inputs': [_tensor('IN', 'BYTES', [2], ['a', 'héllo'])],
                                                                     'parameters': {'binary_data_output': True}}
    if k == 3: return 'POST', '/v2/models/gen/generate', {}, {'text_input': 'hi', 'max_tokens': 3, 'parameters': {'temperature': 0.5}}
    if k == 4: return 'POST', '/v2/models/decoupled/generate_stream', {}, {'text_input': 'hi', 'N': 2}
    if k == 5: return 'POST', '/v2/repository/index', {}, {'ready': True}
    if k == 6: return 'POST', '/v2/logging', {}, {'log_verbose_level': 0, 'log_info': True}
    if k == 7: return 'POST', '/v2/repository/models/add_sub/load', {}, {'parameters': {'config': '{"max_batch_size": 4}'}}
    return 'POST', '/v2/models/gen/infer', {'X-Trace': 'x'}, {'inputs': [_tensor('text_input', 'BYTES', [1], ['q'])], 'parameters': {'p': 1}}


# ---------------------------------------------------------------------------------------------------------
# Mutations

_STRINGS = ['', 'INPUT0', 'FP32', 'BYTES', 'data', 'shape', '..', '../../etc/passwd', '\u0000', '\ud7ff\ue000', 'é' * 3,
            'NaN', '9' * 30, 'x' * 5000, 'binary_data_size', 'shared_memory_region', 'classification']

def _random_json(r:random.Random, depth:int=0):
    k = r.randrange(12 if depth < 3 else 8)
    if k == 0: return None
    if k == 1: return r.choice([True, False])
    if k == 2: return r.choice([0, -1, 1, 2**31, 2**63, 2**64, -2**63 - 1, 10**30, r.randrange(-9, 99)])
    if k == 3: return r.choice([0.5, -0.0, 1e308, 1e-320, float('nan'), float('inf')])
    if k in (4, 5, 6, 7): return r.choice(_STRINGS)
    if k in (8, 9): return [_random_json(r, depth + 1) for _ in range(r.randrange(4))]
    return {r.choice(_STRINGS + ['name', 'id', 'inputs', 'parameters']): _random_json(r, depth + 1) for _ in range(r.randrange(4))}

def _nodes(doc, path=()):
    "Every (container, key) position in a JSON document."
    if isinstance(doc, dict):
        for k, v in doc.items(): yield doc, k; yield from _nodes(v)
    elif isinstance(doc, list):
        for i, v in enumerate(doc): yield doc, i; yield from _nodes(v)

def mutate_json(r:random.Random, doc):
    "A few structural changes to a copy of `doc`."
    doc = json.loads(json.dumps(doc))
    for _ in range(r.randrange(1, 4)):
        spots = list(_nodes(doc))
        if not spots: return _random_json(r)
        parent, key = r.choice(spots)
        k = r.randrange(6)
        if k == 0: parent[key] = _random_json(r)
        elif k == 1:
            if isinstance(parent, dict): del parent[key]
            else: parent.pop(key)
        elif k == 2: parent[key] = [parent[key]]
        elif k == 3 and isinstance(parent, dict): parent[r.choice(_STRINGS)] = _random_json(r)
        elif k == 4: parent[key] = {'x': parent[key]}
        else: parent[key] = r.choice([[0] * r.randrange(1, 50), [[1, 2], [3]], 'x' * r.randrange(1, 3000), -r.randrange(1, 10**6)])
    return doc

def mutate_bytes(r:random.Random, b:bytes) -> bytes:
    b = bytearray(b)
    for _ in range(r.randrange(1, 6)):
        if not b: b += bytes([r.randrange(256)]); continue
        i, k = r.randrange(len(b)), r.randrange(6)
        if k == 0: b[i] = r.randrange(256)
        elif k == 1: del b[i:i + r.randrange(1, 16)]
        elif k == 2: b[i:i] = r.choice([b'[', b'{', b'"', b'\\', b'\0', b'\xff', b'NaN', b'1e999', b',', b'}'])
        elif k == 3: b = b[:i]
        elif k == 4: b[i:i] = b[i:i + r.randrange(1, 64)] * r.randrange(2, 20)
        else: b[i:i] = bytes(r.randrange(256) for _ in range(r.randrange(1, 8)))
    return bytes(b)

def _deep(r:random.Random) -> bytes:
    n = r.choice([1030, 2000, 5000] * 8 + [100_000])
    open_, close = r.choice([(b'[', b']'), (b'{"a":', b'}')])
    tail = close * n if r.random() < 0.7 else close * r.randrange(n)
    return b'{"inputs":' + open_ * n + (b'1' if open_ == b'{"a":' else b'') + tail + b'}'

def _path(r:random.Random, path:str) -> str:
    model = r.choice(MODELS + ('nope', '', '..', '.', '%2e%2e', 'a' * 300, 'add_sub%00', 'x;y', '\u00e9'))
    version = r.choice(['', '/versions/1', '/versions/0', '/versions/01', '/versions/-1', '/versions/' + '9' * r.choice([19, 20, 1000, 5000]),
                        '/versions/1.5', '/versions/\u00b2', '/versions/', '/versions'])
    action = r.choice(['', '/infer', '/ready', '/config', '/stats', '/generate', '/generate_stream', '/trace/setting', '/infer/', '//infer'])
    return r.choice([f'/v2/models/{model}{version}{action}', path + r.choice(['/', '?x=1', '#f', '/..']), '/v2/repository/models/' + model + '/load',
                     '/v2/systemsharedmemory/status', '/v2/' + 'x/' * r.randrange(1, 200), '/' + 'v2' * r.randrange(1, 5), '*'])

def _headers(r:random.Random, headers:dict) -> dict:
    h = dict(headers)
    for _ in range(r.randrange(3)):
        k = r.randrange(7)
        if k == 0: h['Inference-Header-Content-Length'] = r.choice(['abc', '', '-1', '0', '12abc', ' 7', '+3', '9' * 25, str(2**32 + 5), '4294967295'])
        elif k == 1: h['Content-Encoding'] = r.choice(['gzip', 'deflate', 'br', '', 'GZIP', 'identity', 'gzip, deflate', 'x' * 100])
        elif k == 2: h['Accept-Encoding'] = r.choice(['gzip', 'deflate', '*', 'br;q=1', ''])
        elif k == 3: h['Content-Type'] = r.choice(['application/json', 'text/plain', 'multipart/form-data; boundary=x', ''])
        elif k == 4: h['X-Fuzz-' + str(r.randrange(100))] = r.choice(['v', '\u00e9', 'x' * 2000])
        elif k == 5: h['Expect'] = '100-continue'
        else: h['Connection'] = r.choice(['close', 'keep-alive', 'upgrade', 'Upgrade']); h['Upgrade'] = 'websocket'
    return h

def _compress(r:random.Random, body:bytes, headers:dict) -> bytes:
    enc = headers.get('Content-Encoding')
    if enc not in ('gzip', 'deflate') or r.random() < 0.2: return body
    z = gzip.compress(body) if r.random() < 0.5 else zlib.compress(body)
    k = r.randrange(5)
    if k == 0: return z[:r.randrange(len(z) + 1)]                 # truncated
    if k == 1: return mutate_bytes(r, z)                         # corrupt
    if k == 2: return z + z                                      # two streams
    return z

RAW = [b'GARBAGE\r\n\r\n', b'GET / HTTP/9.9\r\n\r\n', b'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
       b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
       b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n',
       b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"inp\r\n0\r\n\r\n',
       b'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n',
       b'GET /v2/health/ready HTTP/1.1\r\n' + b'X-A: b\r\n' * 3000 + b'\r\n', b'GET /v2/health/ready HTTP/1.0\r\n\r\n',
       b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', b'GET /v2/health/ready HTTP/1.1\nHost: x\n\n', b'\r\n' * 50,
       b'GET /' + b'a' * 70000 + b' HTTP/1.1\r\n\r\n', b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n']

def case_at(r:random.Random) -> Case:
    "One random case."
    if r.random() < 0.06: return Case(raw=mutate_bytes(r, r.choice(RAW)) if r.random() < 0.5 else r.choice(RAW), note='raw')
    method, path, headers, doc = _seeds(r)
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    k = r.randrange(10)
    if k <= 3 and not isinstance(doc, bytes): body, note = json.dumps(mutate_json(r, doc), allow_nan=True).encode(), 'json'
    elif k <= 5: body, note = mutate_bytes(r, body), 'bytes'
    elif k == 6: body, note = _deep(r), 'deep'
    elif k == 7: path, note = _path(r, path), 'path'
    elif k == 8: method, note = r.choice(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'FUZZ']), 'method'
    else: note = 'headers'
    if r.random() < 0.4: headers = _headers(r, headers)
    return Case(method, path, headers, _compress(r, body, headers), note=note)

def cases(seed:int, n:int):
    r = random.Random(seed)
    for _ in range(n): yield case_at(r)


def _strings(r:random.Random, n:int) -> list:
    "n short byte strings of varied (or, half the time, equal) length, cheap to make."
    if r.random() < 0.5: return [b'abcdefgh'] * n
    return [b'abcdefghijkl'[:i % 13] for i in range(r.randrange(7), n + r.randrange(7))][:n]

def heavy_case(r:random.Random) -> Case:
    """Issue 26's shapes, one per case: many small BYTES elements (binary and JSON, sometimes damaged), big bodies
    that fail to parse (plain or gzip), NaN in a big body, deep nesting, and `file:` keys nested deep in a load."""
    k, n = r.randrange(6), r.choice([10_000, 100_000, 400_000])
    infer, hcl = '/v2/models/identity_bytes/infer', 'Inference-Header-Content-Length'
    if k == 0:
        buf = b''.join(struct.pack('<I', len(x)) + x for x in _strings(r, n))
        if r.random() < 0.3: buf = mutate_bytes(r, buf)
        head = json.dumps({'inputs': [{'name': 'IN', 'shape': [n], 'datatype': 'BYTES', 'parameters': {'binary_data_size': len(buf)}}]}).encode()
        return Case('POST', infer, {hcl: str(len(head))}, head + buf, note='heavy: binary BYTES')
    if k == 1:
        data = [x.decode() for x in _strings(r, n)]
        if r.random() < 0.5: data = [[x] for x in data]
        body = json.dumps({'inputs': [{'name': 'IN', 'shape': [n], 'datatype': 'BYTES', 'data': data}]}).encode()
        return Case('POST', infer, {}, mutate_bytes(r, body) if r.random() < 0.2 else body, note='heavy: JSON BYTES')
    if k == 2:
        body = b'{"inputs": [' + b'1,' * (n * 8) + r.choice([b'x]}', b']', b'"', b'NaN]}'])
        headers = {}
        if r.random() < 0.5: body, headers = gzip.compress(body), {'Content-Encoding': 'gzip'}
        return Case('POST', '/v2/models/add_sub/infer', headers, body, note='heavy: bad JSON')
    if k == 3:
        body = (b'{"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [NaN, 1, 2, 3]},'
                b' {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}], "pad": [' + b'0,' * n + b'0]}')
        return Case('POST', '/v2/models/add_sub/infer', {}, body, note='heavy: NaN in a big body')
    if k == 4:
        body, headers = _deep(r), {}
        if r.random() < 0.5: body, headers = gzip.compress(body), {'Content-Encoding': 'gzip'}
        return Case('POST', r.choice([infer, '/v2/repository/index', '/v2/logging']), headers, body, note='heavy: deep nesting')
    key = 'file:' + '/'.join(['d'] * r.choice([10, 1000, 1500, 3000])) + '/model.py'
    body = json.dumps({'parameters': {'config': '{"backend": "python"}', key: 'eA=='}}).encode()
    return Case('POST', f'/v2/repository/models/deep{r.randrange(3)}/load', {}, body, note='heavy: deep file key')

def heavy_cases(seed:int, n:int):
    "Issue 26's heavy shapes, seeded (a stream of its own, so `cases` stays as it was for every seed)."
    r = random.Random(seed)
    for _ in range(n): yield heavy_case(r)


# ---------------------------------------------------------------------------------------------------------
# Sending and checking

def send(port:int, case:Case, deadline:float=20) -> tuple:
    "(status or None, body bytes) of the first answer to one case on a fresh connection; TimeoutError past the deadline."
    with socket.create_connection(('127.0.0.1', port), timeout=deadline) as s:
        try: s.sendall(case.wire())
        except (BrokenPipeError, ConnectionResetError): pass      # the server answered early and closed
        data = _receive(s, deadline, idle=0.3 if case.raw is not None else None)
    if not data: return None, b''
    head, _, body = data.partition(b'\r\n\r\n')
    m = re.match(rb'HTTP/1\.[01] (\d{3})', head)
    if m is None: raise AssertionError(f'not an HTTP answer: {data[:200]!r}')
    low = head.lower()
    if (n := re.search(rb'\r\ncontent-length: (\d+)', low)) is not None: body = body[:int(n.group(1))]   # the first answer
    if b'transfer-encoding: chunked' in low: body = _dechunk(body)
    if b'content-encoding: gzip' in low: body = gzip.decompress(body)
    elif b'content-encoding: deflate' in low: body = zlib.decompress(body)
    return int(m.group(1)), body

def _receive(s, deadline:float, idle:float|None) -> bytes:
    """Read until the server closes. Raw cases (which may be incomplete, or keep the connection alive) stop
    `idle` seconds after the last byte, or after saying there is no more when nothing came at all."""
    data, told = b'', False
    while True:
        s.settimeout(idle if idle is not None else deadline)
        try: chunk = s.recv(1 << 16)
        except ConnectionResetError: return data
        except socket.timeout:
            if idle is None: raise TimeoutError(f'no complete answer within {deadline} s') from None
            if data: return data
            if told: raise TimeoutError('no answer after the request was complete') from None
            s.shutdown(socket.SHUT_WR); told, idle = True, deadline
            continue
        if not chunk: return data
        data += chunk

def _dechunk(b:bytes) -> bytes:
    out = b''
    while b:
        size, _, rest = b.partition(b'\r\n')
        n = int(size.split(b';')[0] or b'0', 16)
        if n == 0: break
        out, b = out + rest[:n], rest[n + 2:]
    return out

def check(case:Case, status, body:bytes):
    "The promises of issue 18 for any answer (raises AssertionError naming the broken one)."
    if EXCEPTION_NAMES.search(body.decode('latin-1')):
        raise AssertionError(f'a Python exception name in the answer: {body[:300]!r}')
    if UNEXPECTED in body: raise AssertionError(f'an unexpected exception in the server (see its log): {case.note}')
    if status is None: return                    # closed without an answer (a malformed or oversized request): allowed
    if status >= 500 and status not in ALLOWED_5XX: raise AssertionError(f'status {status}')
    if status >= 400 and body and not body.startswith(b'data: '):
        try: doc = json.loads(body)
        except ValueError: raise AssertionError(f'a {status} whose body is not JSON: {body[:300]!r}') from None
        if not (isinstance(doc, dict) and list(doc) == ['error'] and isinstance(doc['error'], str)):
            raise AssertionError(f'a {status} whose body is not {{"error": "..."}}: {body[:300]!r}')
    if status >= 500 and not body: raise AssertionError(f'a {status} without an error body')
