"""The HTTP front end under hostile input (issue 18): decompression bombs, slow and idle connections, a
connection cap, oversized heads, throttled error logs, and Triton's hardening flags (`--http-restricted-api`,
`--http-header-forward-pattern`) compared with real Triton 2.51.

Servers run as subprocesses (tests/mini_process.py) where memory, file descriptors or the log are measured;
in process where a test must hold the server at a precise point.
"""
import asyncio, gzip, http.client, json, logging, socket, threading, time, zlib

import pytest

from triton_servers import MiniProcess, RealTriton, copy_models, oracle_or_skip, request, settled, wait_until

OK = {'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                 {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]}
MB = 1 << 20


def gzip_bomb(gib:int=1) -> bytes:
    "About 1 MB of gzip per GiB of zeros it inflates to (deflate's best ratio, ~1030:1), built in a second."
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b'\0' * (64 * MB)
    head = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)   # after a full flush every 64 MiB block compresses the same
    return head + block * (16 * gib - 1)                        # no trailer: nobody gets that far


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    return copy_models(tmp_path_factory.mktemp('models'), 'conformance/add_sub', 'conformance/gen', 'conformance/identity_int32')


# ---------------------------------------------------------------------------------------------------------
# Decompression bombs

def test_gzip_bomb_refused_with_bounded_memory(repo):
    bomb = gzip_bomb(1)
    assert len(bomb) < 1.1 * MB
    s = MiniProcess(repo, grpc=False)
    try:
        for _ in range(20): s.request('POST', '/v2/models/add_sub/infer', gzip.compress(json.dumps(OK).encode()), {'Content-Encoding': 'gzip'})
        base, peak, done = s.rss(), [0], threading.Event()
        def sample():
            while not done.is_set(): peak[0] = max(peak[0], s.rss()); time.sleep(0.005)
        t = threading.Thread(target=sample); t.start()
        try: answers = [s.request('POST', '/v2/models/add_sub/infer', bomb, {'Content-Encoding': enc}, timeout=60) for enc in ('gzip', 'deflate', 'gzip')]
        finally: done.set(); t.join()
        for status, _, body in answers:
            assert (status, json.loads(body)) == (400, {'error': f'Decompressed data size exceeds the maximum allowed value of {64 * MB} bytes. '
                                                                  'Use --http-max-input-size to increase the limit.'})
        assert peak[0] - base < 200 * MB, f'RSS grew by {(peak[0] - base) / MB:.0f} MB while refusing a 1 GiB bomb'
        assert s.request('GET', '/v2/health/ready')[0] == 200
    finally: assert s.stop() == 0


def test_inflation_runs_off_the_event_loop(monkeypatch, repo, mini):
    "While a compressed body is being inflated, the same server answers a health check on another connection."
    import triton_mini.http_server as hs
    started, release = threading.Event(), threading.Event()
    real = hs.inflate
    def slow_inflate(body, limit, *a):
        started.set()
        assert release.wait(30), 'the health check was never answered while inflating'
        return real(body, limit, *a)
    monkeypatch.setattr(hs, 'inflate', slow_inflate)
    port = mini(repo, metrics=False, exit_timeout_secs=5, model_control_mode='explicit', load_models=['add_sub']).http_port
    try:
        body = gzip.compress(json.dumps(OK).encode() + b' ' * 20000, compresslevel=0)   # > 4 KiB: inflated on a thread
        result = {}
        t = threading.Thread(target=lambda: result.update(r=request(port, 'POST', '/v2/models/add_sub/infer', body, {'Content-Encoding': 'gzip'})))
        t.start()
        assert started.wait(30)
        assert request(port, 'GET', '/v2/health/ready', timeout=10)[0] == 200    # answered while inflation is held
        release.set(); t.join(30)
        assert result['r'][0] == 200 and json.loads(result['r'][2])['outputs'][0]['data'] == [2.0, 3.0, 4.0, 5.0]
    finally: release.set()


# ---------------------------------------------------------------------------------------------------------
# Slow, idle and too many connections

def _connect(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\0' * 8)
    return s

def _closed_by_server(sock, within:float) -> bool:
    "Does the server close `sock` (EOF or reset) within `within` seconds? Whatever it sent first is skipped."
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536): return True
    except (ConnectionResetError, BrokenPipeError): return True
    except socket.timeout: return False
    return False


@pytest.mark.slow
def test_slow_clients_are_closed_and_others_served(repo):
    "300 slowloris connections (idle, trickling headers, stalled bodies) are closed after the timeouts; HTTP, metrics and gRPC answer throughout."
    grpcclient = pytest.importorskip('tritonclient.grpc')
    s = MiniProcess(repo, '--http-header-timeout-secs=2', '--http-body-timeout-secs=2', grpc=True)
    slow = []
    try:
        fds_before = s.fds()
        for i in range(300):
            c = _connect(s.http_port)
            if i % 3 == 1: c.sendall(b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n')                       # head never finished
            if i % 3 == 2: c.sendall(b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"in')  # body stalls
            slow.append(c)
        client = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
        for _ in range(3):      # while they hang on, and while one of them trickles header lines
            slow[1].sendall(b'X-Slow: 1\r\n')
            assert s.request('POST', '/v2/models/add_sub/infer', OK, timeout=30)[0] == 200
            assert request(s.metrics_port, 'GET', '/metrics', timeout=30)[0] == 200
            assert client.is_server_live()
            time.sleep(0.5)     # the trickle's pace
        assert s.fds() >= fds_before + 300
        closed = [_closed_by_server(c, within=30) for c in slow]
        assert all(closed), f'{closed.count(False)} of 300 slow connections still open'
        deadline = time.monotonic() + 30
        while s.fds() > fds_before + 10 and time.monotonic() < deadline: time.sleep(0.1)   # the server's side closes too
        assert s.fds() <= fds_before + 10
        assert s.request('POST', '/v2/models/add_sub/infer', OK)[0] == 200
    finally:
        for c in slow: c.close()
        assert s.stop() == 0


def test_connection_cap_and_header_size(repo):
    s = MiniProcess(repo, '--http-max-connections=40', '--http-max-header-size=8192', grpc=False)
    held = []
    try:
        for _ in range(40): held.append(_connect(s.http_port))
        accepted = lambda: sum(c.status == 'ESTABLISHED' and c.laddr.port == s.http_port for c in s.ps.net_connections('tcp'))
        wait_until(lambda: accepted() >= 40, 10, 'the server to accept the 40 connections')
        extra = _connect(s.http_port)          # past the cap: anything but a health check gets a 503 (issue 26)
        extra.settimeout(30)
        extra.sendall(b'GET /v2/models/add_sub HTTP/1.1\r\nHost: x\r\n\r\n')
        answer = extra.recv(65536)
        assert answer.startswith(b'HTTP/1.1 503') and b'too many open connections (limit 40)' in answer
        assert _closed_by_server(extra, within=30)
        probe = _connect(s.http_port)          # a load balancer's probe is still answered, once
        probe.settimeout(30)
        probe.sendall(b'GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n')
        assert probe.recv(65536).startswith(b'HTTP/1.1 200')
        assert _closed_by_server(probe, within=30)
        silent = _connect(s.http_port)         # one that says nothing is closed within a second or two
        assert _closed_by_server(silent, within=5)
        for c in held: c.close()
        held.clear()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:      # the server notices the closes
            try:
                if s.request('GET', '/v2/health/ready', timeout=5)[0] == 200: break
            except (ConnectionResetError, http.client.HTTPException): time.sleep(0.1)
        assert s.request('POST', '/v2/models/add_sub/infer', OK)[0] == 200
        status, headers, body = s.request('GET', '/v2/health/ready', headers={'X-Big': 'a' * 10000})
        assert (status, json.loads(body)) == (431, {'error': 'request head exceeds 8192 bytes'})
        assert s.request('GET', '/v2/health/ready', headers={'X-Fine': 'a' * 4000})[0] == 200
    finally:
        for c in held: c.close()
        assert s.stop() == 0

# ---------------------------------------------------------------------------------------------------------
# Error hygiene

class RecordingLogger:
    "Stands in for a logging.Logger: keeps (level, message, has a traceback)."
    def __init__(self): self.records = []
    def log(self, level, msg, exc_info=None): self.records.append((level, msg, exc_info is not None))


def test_unexpected_errors_are_internal_and_logged_once(monkeypatch):
    "A handler bug answers Triton's INTERNAL without the exception's name; 500 of them log one traceback and no flood."
    import triton_mini.http_server as hs
    from triton_mini.cli import example_repository
    from triton_mini.server import TritonServer
    server = TritonServer(example_repository(), model_control_mode='explicit', load_models=['add_sub'])
    server.start()
    try:
        app, logger = hs.HTTPFrontend(server), RecordingLogger()
        monkeypatch.setattr(hs.HTTPFrontend, '_stats', lambda self, *a: {}['no such key'])
        monkeypatch.setattr(hs, '_noisy', hs.RateLimitedLog(logger))
        async def hammer():
            return [await hs.call_asgi(app, 'GET', '/v2/models/stats') for _ in range(500)]
        answers = asyncio.run(hammer())
        assert {(s, b) for s, _, b in answers} == {(500, json.dumps({'error': hs.INTERNAL_ERROR}, separators=(',', ':')).encode())}
        assert len(logger.records) == 1
        level, message, traceback = logger.records[0]
        assert level == logging.ERROR and traceback and 'KeyError at test_http_security.py' in message
    finally: server.stop()


def test_malformed_http_floods_no_log(repo):
    "1,000 requests that are not HTTP get a JSON 400 each and write a line or two to the log, not a thousand."
    s = MiniProcess(repo, grpc=False)
    try:
        before = len(s.lines)
        for i in range(1000):
            with socket.create_connection(('127.0.0.1', s.http_port), timeout=30) as c:
                c.sendall(b'GARBAGE %d\r\n\r\n' % i)
                data = c.recv(65536)
            assert data.startswith(b'HTTP/1.1 400') and data.endswith(b'{"error":"Invalid HTTP request received."}')
        assert s.request('GET', '/v2/health/ready')[0] == 200
        assert settled(lambda: len(s.lines), interval=0.2) - before <= 3, '\n'.join(s.lines[before:before + 10])
    finally: assert s.stop() == 0


# ---------------------------------------------------------------------------------------------------------
# --http-restricted-api and --http-header-forward-pattern, next to real Triton

FLAGS = ('--http-restricted-api=inference:infer-key=secret', '--http-restricted-api=health,metadata,model-config,trace:Admin-Key=a1',
         '--http-header-forward-pattern=^x-fw')
ADMIN = {'Admin-Key': 'a1'}
GEN = {'inputs': [{'name': 'text_input', 'shape': [1], 'datatype': 'BYTES', 'data': ['hi']}], 'parameters': {'X-Dup': 'json', 'p': 1}}
PROBES = [
    ('GET', '/v2/health/ready', b'', {}), ('GET', '/v2/health/ready', b'', {'Admin-Key': 'a1'}),
    ('GET', '/v2/health/live', b'', {'admin-key': 'a1'}), ('GET', '/v2/health/live', b'', {'Admin-Key': 'A1'}),
    ('POST', '/v2/health/live', b'', {}), ('GET', '/v2/models/add_sub/ready', b'', {}), ('GET', '/v2', b'', {}),
    ('GET', '/v2/models/nope', b'', {}), ('GET', '/v2/models/add_sub/config', b'', {}),
    ('GET', '/v2/models/add_sub/config', b'', {'Admin-Key': 'a1'}), ('GET', '/v2/models/stats', b'', {}),
    ('POST', '/v2/repository/index', b'', {}), ('GET', '/v2/logging', b'', {}),
    ('POST', '/v2/models/add_sub/infer', OK, {}), ('GET', '/v2/models/add_sub/infer', b'', {}),
    ('POST', '/v2/models/nope/infer', b'{bad', {}), ('POST', '/v2/models/add_sub/infer', OK, {'infer-key': 'secret'}),
    ('POST', '/v2/models/add_sub/infer', OK, {'Infer-Key': 'secret '}), ('POST', '/v2/models/gen/generate', {'text_input': 'a'}, {}),
    ('POST', '/v2/models/gen/generate', {'text_input': 'a'}, {'infer-key': 'secret', 'X-Fw-One': 'v1'}),
    ('POST', '/v2/models/gen/infer', GEN, {'infer-key': 'secret', 'X-FW-One': 'v1', 'x-fwtwo': 'v2', 'y-x-fw': 'no', 'X-Dup': 'hdr',
                                          'X-Fw-Utf8': 'caf\u00e9'.encode().decode('latin-1')}),
    ('GET', '/v2/nope', b'', {}), ('GET', '/v2/trace/setting', b'', {}),
]

def _comparable(status, body):
    "What must be equal: errors in full, what the gen model saw in its parameters, the kind of any other success."
    doc = json.loads(body) if body else None
    if isinstance(doc, dict) and doc.get('model_name') == 'gen':
        info = doc['info'] if 'info' in doc else next(o['data'][0] for o in doc['outputs'] if o['name'] == 'info')
        return status, json.loads(info)['params']
    if status == 200: return status, type(doc).__name__
    return status, doc


@pytest.mark.oracle
def test_restricted_api_and_header_forwarding_match_triton(repo, tmp_path):
    oracle_or_skip()
    mine = MiniProcess(repo, *FLAGS, grpc=False, health_headers=ADMIN)      # health needs the Admin-Key header
    triton = RealTriton(copy_models(tmp_path / 'oracle_models', 'conformance/add_sub', 'conformance/gen', 'conformance/identity_int32'), *FLAGS, health_headers=ADMIN)
    try:
        for method, path, body, headers in PROBES:
            theirs = _comparable(*request(triton.http_port, method, path, body, headers)[::2])
            ours = _comparable(*mine.request(method, path, body, headers)[::2])
            assert ours == theirs, f'{method} {path} {headers}: Triton {theirs}, triton-mini {ours}'
    finally:
        triton.stop()
        assert mine.stop() == 0


RESTRICTED_FLAG_ERRORS = [
    ('--http-restricted-api=inference', "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got inference"),
    ('--http-restricted-api=bogus:k=v', "unknown restricted api 'bogus' "),   # the space is tritonserver 2.51's
    ('--http-restricted-api=inference,health:k=', "--http-restricted-api option format is '<config name>:<setting>=<value>'. Got inference,health:k="),
]

@pytest.mark.parametrize('flag, message', RESTRICTED_FLAG_ERRORS)
def test_bad_restricted_api_flags(flag, message, tmp_path):
    import subprocess, sys
    ours = subprocess.run([sys.executable, '-m', 'triton_mini', flag, f'--model-repository={tmp_path}'], capture_output=True, text=True, timeout=60)
    assert ours.returncode == 1 and 'Bad option: "--http-restricted-api".' in ours.stderr and message in ours.stderr


@pytest.mark.oracle
@pytest.mark.parametrize('flag, message', RESTRICTED_FLAG_ERRORS)
def test_bad_restricted_api_flags_as_triton(flag, message, tmp_path):
    import subprocess
    oracle_or_skip()
    from triton_servers import ORACLE
    theirs = subprocess.run([ORACLE, flag, f'--model-repository={tmp_path}'], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert theirs.returncode == 1 and message in theirs.stdout + theirs.stderr


def test_invalid_forward_pattern_stops_the_start(tmp_path):
    import subprocess, sys
    r = subprocess.run([sys.executable, '-m', 'triton_mini', '--http-header-forward-pattern=(', f'--model-repository={tmp_path}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--http-header-forward-pattern: '(' is not a regular expression" in r.stderr


def test_upgrade_header_does_not_eat_the_body(repo):
    "curl --http2 on plain HTTP sends `Upgrade: h2c`; llhttp would take the body for the new protocol. Triton answers over HTTP/1.1."
    s = MiniProcess(repo, grpc=False)
    try:
        body = json.dumps(OK).encode()
        for upgrade in (b'h2c', b'websocket'):
            with socket.create_connection(('127.0.0.1', s.http_port), timeout=30) as c:
                c.sendall(b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: ' + upgrade +
                          b'\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % len(body) + body)
                data = b''
                while chunk := c.recv(65536): data += chunk
            assert data.startswith(b'HTTP/1.1 200') and b'"data":[2.0,3.0,4.0,5.0]' in data, data[:300]
    finally: assert s.stop() == 0
