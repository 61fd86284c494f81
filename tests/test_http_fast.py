"""The HTTP front end's fast path for a plain /infer (07a_asgi and 08_http appendices) against its ASGI path.

Two in-process servers over the same models, one with `fast_path=True`, one with it off; the same raw bytes go to
both over real sockets and the answers must be the same bytes (status line, headers, JSON), for successes and
errors. Then what the protocol must keep doing on the fast path: keep-alive, pipelining (in order, mixed with
requests that go the ASGI way), bodies that arrive in pieces, a client that leaves mid-body or mid-inference,
`Connection: close`. The fast path is on by default; CI also runs the HTTP suite with it off: `TRITON_MINI_HTTP_FAST=0 pytest ...`.
"""
import json, socket, time

import pytest

import triton_servers as ts

SLOW_MODEL = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args): self.mark = os.path.join(args["model_repository"], "executions")
    def execute(self, requests):
        with open(self.mark, "a") as f: f.write("x")   # the test waits for this: the request is running
        time.sleep(0.5)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
                for r in requests]
'''
SLOW_CONFIG = '''name: "slow"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = ts.copy_models(tmp_path_factory.mktemp('fast') / 'models', 'conformance')
    (root / 'slow' / '1').mkdir(parents=True)
    (root / 'slow' / '1' / 'model.py').write_text(SLOW_MODEL)
    (root / 'slow' / 'config.pbtxt').write_text(SLOW_CONFIG)
    return root


class Spy:
    "Counts the requests the front end's fast path took."
    def __init__(self, front): self.front, self.taken, self.inner = front, 0, front.fast_handler
    def __call__(self, url, headers, length):
        start = self.inner(url, headers, length)
        self.taken += start is not None
        return start


@pytest.fixture(scope='module')
def servers(repo, launch_module):
    "(fast server, its spy, ASGI-only server)"
    fast = launch_module.mini(repo, metrics=False, http_options={'fast_path': True})
    slow = launch_module.mini(repo, metrics=False, http_options={'fast_path': False})
    front = next(iter(fast.service.apps))
    spy = front.fast_handler = Spy(front)
    return fast, spy, slow


def infer(model, body:bytes, extra:bytes=b'', version:bytes=b'HTTP/1.1') -> bytes:
    return (b'POST /v2/models/' + model.encode() + b'/infer ' + version + b'\r\nHost: x\r\n' + extra +
            b'Content-Length: %d\r\n\r\n' % len(body) + body)


def read_response(f) -> bytes:
    "One whole response from a socket file: head and content-length bytes of body."
    head = b''
    while not head.endswith(b'\r\n\r\n'):
        line = f.readline()
        if not line: raise ConnectionError(f'closed after {head!r}')
        head += line
    n = next(int(l.split(b':')[1]) for l in head.split(b'\r\n') if l.lower().startswith(b'content-length:'))
    return head + f.read(n)


def exchange(port, data:bytes, answers:int=1, pieces=None) -> list:
    "Send `data` (in `pieces` with pauses when given) on one connection; the `answers` responses."
    with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if pieces is None: s.sendall(data)
        else:
            cuts = [0, *pieces, len(data)]
            for a, b in zip(cuts, cuts[1:]): s.sendall(data[a:b]); time.sleep(0.05)
        f = s.makefile('rb')
        return [read_response(f) for _ in range(answers)]


def add_sub(a=1.0, b=2.0, **more) -> bytes:
    doc = {'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': [1, 4], 'data': [a] * 4},
                      {'name': 'INPUT1', 'datatype': 'FP32', 'shape': [1, 4], 'data': [b] * 4}], **more}
    return json.dumps(doc).encode()


def binary_add_sub() -> bytes:
    head = json.dumps({'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': [1, 4], 'parameters': {'binary_data_size': 16}},
                                  {'name': 'INPUT1', 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 2, 3, 4]}],
                       'outputs': [{'name': 'OUTPUT0', 'parameters': {'binary_data': True}}, {'name': 'OUTPUT1'}]}).encode()
    return head, head + bytes(range(16))


def err(mode:int) -> bytes:
    return json.dumps({'inputs': [{'name': 'MODE', 'datatype': 'INT32', 'shape': [1], 'data': [mode]}]}).encode()


head, body = binary_add_sub()
SAME = {   # requests the fast path takes, and must answer exactly as the ASGI path does
    'json': infer('add_sub', add_sub()),
    'with id and params': infer('add_sub', add_sub(id='r1', parameters={'p': 1})),
    'version': infer('add_sub/versions/1', add_sub()),
    'binary in and out': infer('add_sub', body, b'Inference-Header-Content-Length: %d\r\n' % len(head)),
    'classification': infer('classify', json.dumps({'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 4, 2, 3]}],
                                                    'outputs': [{'name': 'OUTPUT0', 'parameters': {'classification': 2}}]}).encode()),
    'raw body': infer('slow', b'\0\0\x80?', b'Inference-Header-Content-Length: 0\r\n'),
    'unknown model': infer('nope', add_sub()),
    'unknown version': infer('add_sub/versions/9', add_sub()),
    'bad json': infer('add_sub', b'{"inputs": ['),
    'bad datatype': infer('add_sub', add_sub().replace(b'FP32', b'FP99', 1)),
    'wrong shape': infer('add_sub', add_sub().replace(b'[1, 4]', b'[1, 5]', 1)),
    'bad parameters': infer('add_sub', add_sub(parameters=[1])),
    'decoupled': infer('decoupled', add_sub()),
    'model raises': infer('errmodel', err(1)),
    'model error': infer('errmodel', err(2)),
    'model not found error': infer('errmodel', err(3)),
    'wrong output': infer('errmodel', err(4)),
    'empty body': infer('add_sub', b''),
    'connection close': infer('add_sub', add_sub(), b'Connection: close\r\n'),
}
ASGI = {   # requests the fast path leaves to ASGI
    'HTTP/1.0': infer('add_sub', add_sub(), version=b'HTTP/1.0'),
    'query string': infer('add_sub?x=1', add_sub()),
    'compressed answer': infer('add_sub', add_sub(), b'Accept-Encoding: deflate\r\n'),   # gzip has a timestamp
    'version beyond int64': infer('add_sub/versions/99999999999999999999', add_sub()),
    'health': b'GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n',
    'GET infer': b'GET /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n\r\n',
}


@pytest.mark.parametrize('name', SAME)
def test_fast_answers_are_the_asgi_answers_byte_for_byte(servers, name):
    fast, spy, slow = servers
    before = spy.taken
    got, want = exchange(fast.http_port, SAME[name]), exchange(slow.http_port, SAME[name])
    assert got == want
    assert spy.taken == before + 1


@pytest.mark.parametrize('name', ASGI)
def test_other_requests_go_the_asgi_way(servers, name):
    fast, spy, slow = servers
    before = spy.taken
    assert exchange(fast.http_port, ASGI[name]) == exchange(slow.http_port, ASGI[name])
    assert spy.taken == before


def test_a_successful_answer_is_what_triton_answers(servers):
    answer = exchange(servers[0].http_port, SAME['json'])[0]
    assert answer.startswith(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ')
    doc = json.loads(answer.split(b'\r\n\r\n', 1)[1])
    assert doc['outputs'][0] == {'name': 'OUTPUT0', 'datatype': 'FP32', 'shape': [1, 4], 'data': [3.0] * 4}


def test_keep_alive_serves_one_request_after_another(servers):
    fast, spy, slow = servers
    with socket.create_connection(('127.0.0.1', fast.http_port), timeout=30) as s:
        f = s.makefile('rb')
        for a in range(5):
            s.sendall(infer('add_sub', add_sub(a)))
            doc = json.loads(read_response(f).split(b'\r\n\r\n', 1)[1])
            assert doc['outputs'][0]['data'] == [a + 2.0] * 4


def test_pipelined_requests_are_answered_in_order(servers):
    fast, spy, slow = servers
    before = spy.taken
    burst = (infer('slow', b'\0\0\x80?', b'Inference-Header-Content-Length: 0\r\n') + infer('add_sub', add_sub(5)) + ASGI['health'] +
             infer('nope', add_sub()) + infer('add_sub', add_sub(7)) + ASGI['compressed answer'] + infer('add_sub', add_sub(9)))
    got = exchange(fast.http_port, burst, answers=7)
    assert got == exchange(slow.http_port, burst, answers=7)
    assert [json.loads(r.split(b'\r\n\r\n', 1)[1])['outputs'][0]['data'][0] for r in (got[1], got[4], got[6])] == [7.0, 9.0, 11.0]
    assert spy.taken == before + 5


def test_a_body_in_pieces(servers):
    fast, spy, slow = servers
    data = infer('add_sub', add_sub(3))
    cut = data.index(b'\r\n\r\n')
    got = exchange(fast.http_port, data, pieces=[10, cut + 2, cut + 4, cut + 30, cut + 31, len(data) - 1])
    assert got == exchange(slow.http_port, data)


def statistics(server, model) -> dict:
    return json.loads(server.request('GET', f'/v2/models/{model}/stats')[2])['model_stats'][0]['inference_stats']


def test_a_client_that_leaves_mid_body_runs_nothing(servers):
    fast, spy, slow = servers
    before = statistics(fast, 'add_sub')['success']['count']
    data = infer('add_sub', add_sub())
    with socket.create_connection(('127.0.0.1', fast.http_port)) as s: s.sendall(data[:-5])
    assert exchange(fast.http_port, data)[0].startswith(b'HTTP/1.1 200 OK')
    assert ts.settled(lambda: statistics(fast, 'add_sub')['success']['count']) == before + 1


def executions(repo) -> int:
    "How many times the slow model's execute has started."
    f = repo / 'slow' / 'executions'
    return len(f.read_text()) if f.exists() else 0


def test_a_client_that_leaves_mid_inference(servers, repo):
    "As on the ASGI path: the inference runs to its end, nothing is written, the server goes on serving."
    fast, spy, slow = servers
    before, started = statistics(fast, 'slow')['success']['count'], executions(repo)
    with socket.create_connection(('127.0.0.1', fast.http_port)) as s:
        s.sendall(infer('slow', b'\0\0\x80?', b'Inference-Header-Content-Length: 0\r\n'))
        ts.wait_until(lambda: executions(repo) > started, 10, 'the request to run')
    ts.wait_until(lambda: statistics(fast, 'slow')['success']['count'] == before + 1, 10, 'the inference to end')
    assert ts.settled(lambda: statistics(fast, 'slow')['success']['count']) == before + 1
    assert exchange(fast.http_port, SAME['json']) == exchange(slow.http_port, SAME['json'])


def test_connection_close_closes(servers):
    with socket.create_connection(('127.0.0.1', servers[0].http_port), timeout=30) as s:
        s.sendall(SAME['connection close'])
        f = s.makefile('rb')
        assert b'\r\nconnection: close\r\n' in read_response(f)
        assert f.read() == b''


def test_the_switch_and_what_the_front_end_leaves_to_asgi(monkeypatch):
    from triton_mini.http_server import HTTPFrontend
    server = None   # the front end does not look at it until a request comes
    monkeypatch.delenv('TRITON_MINI_HTTP_FAST', raising=False)
    assert HTTPFrontend(server).fast_path is True           # on by default (07a's appendix measures why)
    monkeypatch.setenv('TRITON_MINI_HTTP_FAST', '0')
    assert HTTPFrontend(server).fast_path is False
    monkeypatch.setenv('TRITON_MINI_HTTP_FAST', '1')
    assert HTTPFrontend(server).fast_path is True
    on = HTTPFrontend(server, fast_path=True)
    assert on.fast_handler(b'/v2/models/m/infer', {}, 10) is not None
    assert on.fast_handler(b'/v2/models/m/ready', {}, 10) is None
    assert on.fast_handler(b'/v2/models/m/infer', {}, 1 << 20) is None
    assert HTTPFrontend(server, fast_path=True, restricted_apis={'inference': ('k', 'v')}).fast_handler(b'/v2/models/m/infer', {}, 10) is None
    assert HTTPFrontend(server, fast_path=True, header_forward_pattern='x-.*').fast_handler(b'/v2/models/m/infer', {}, 10) is None


@pytest.fixture
def lane(monkeypatch):
    "What the lane (07a: reading the plain request without the parser) found at the start of each read: True = a whole plain request."
    import triton_mini.asgi as asgi
    seen, real = [], asgi.plain_request
    def spy(data, max_head):
        got = real(data, max_head)
        seen.append(got is not None and len(data) >= got[2] + got[3])
        return got
    monkeypatch.setattr(asgi, 'plain_request', spy)
    return seen


def test_the_lane_reads_a_plain_request_without_the_parser(servers, lane):
    fast, spy, slow = servers
    assert exchange(fast.http_port, SAME['json']) == exchange(slow.http_port, SAME['json'])
    assert lane == [True]


def test_the_lane_holds_what_comes_while_it_answers(servers, lane):
    "A pipelining client: the second request arrives with the first, waits in `_held`, and is read by the lane after it."
    fast, spy, slow = servers
    burst = infer('slow', b'\0\0\x80?', b'Inference-Header-Content-Length: 0\r\n') + infer('add_sub', add_sub(5))
    got = exchange(fast.http_port, burst, answers=2)
    assert got == exchange(slow.http_port, burst, answers=2)
    assert lane == [True, True]


def test_the_lane_leaves_odd_heads_and_partial_bodies_to_the_parser(servers, lane):
    fast, spy, slow = servers
    twice = infer('add_sub', add_sub(), b'X-A: 1\r\nX-A: 2\r\n')
    assert exchange(fast.http_port, twice) == exchange(slow.http_port, twice)
    data = infer('add_sub', add_sub(3))
    assert exchange(fast.http_port, data, pieces=[len(data) - 3]) == exchange(slow.http_port, data)
    assert lane == [False, False]   # both answered on the parser-fed fast path


@pytest.mark.slow
def test_an_idle_keep_alive_connection_is_closed_quietly(servers, caplog):
    "After a lane request no keep-alive timer is armed: the guard's sweep closes the idle connection after uvicorn's 5 s, without the slow-client log."
    fast, spy, slow = servers
    with socket.create_connection(('127.0.0.1', fast.http_port), timeout=30) as s:
        s.sendall(SAME['json'])
        f = s.makefile('rb')
        read_response(f)
        started = time.monotonic()
        assert f.read() == b''                 # the server closed it
        assert 4.5 < time.monotonic() - started < 7
    assert 'did not send a request in time' not in caplog.text


def big_binary(model, name, datatype, payload:bytes, shape, out:str, binary_out=True) -> bytes:
    "An /infer of one input sent as `payload` after a small JSON header (the binary tensor extension)."
    head = json.dumps({'inputs': [{'name': name, 'datatype': datatype, 'shape': shape, 'parameters': {'binary_data_size': len(payload)}}],
                       'outputs': [{'name': out, 'parameters': {'binary_data': binary_out}}]}).encode()
    return infer(model, head + payload, b'Inference-Header-Content-Length: %d\r\n' % len(head))


def test_big_binary_bodies_take_the_fast_path(servers, monkeypatch):
    "FAST_BIG_BODY_BYTES (1 MiB by default; 0 turns it off): a binary tensor after a small header, same answer bytes as ASGI."
    from triton_mini import asgi
    fast, spy, slow = servers
    ints = big_binary('identity_int32', 'X', 'INT32', bytes(range(256)) * 1024, [1, 65536], 'Y')        # 256 KiB
    strings = [b'%d' % i for i in range(30000)]
    packed = b''.join(len(s).to_bytes(4, 'little') + s for s in strings)                               # > 64 KiB, parsed
    texts = big_binary('identity_bytes', 'IN', 'BYTES', packed, [len(strings)], 'OUT')
    as_json = big_binary('identity_int32', 'X', 'INT32', bytes(4 * 40000), [1, 40000], 'Y', binary_out=False)
    assert asgi.FAST_BIG_BODY_BYTES == 1 << 20                # on by default
    monkeypatch.setattr(asgi, 'FAST_BIG_BODY_BYTES', 0)
    before = spy.taken
    assert exchange(fast.http_port, ints) == exchange(slow.http_port, ints)
    assert spy.taken == before                                 # off: the ASGI path
    monkeypatch.setattr(asgi, 'FAST_BIG_BODY_BYTES', 1 << 20)
    for data in (ints, texts, as_json):
        got = exchange(fast.http_port, data)
        assert got == exchange(slow.http_port, data)
        assert got[0].startswith(b'HTTP/1.1 200 OK')
    cut = ints.index(b'\r\n\r\n')
    assert exchange(fast.http_port, ints, pieces=[cut + 10, cut + 70000, cut + 200000]) == exchange(slow.http_port, ints)
    assert exchange(fast.http_port, ints + ints, answers=2) == exchange(slow.http_port, ints + ints, answers=2)   # pipelined
    assert spy.taken == before + 6
    too_big = big_binary('identity_int32', 'X', 'INT32', bytes(4 << 18), [1, 1 << 18], 'Y')              # 1 MiB + header
    assert exchange(fast.http_port, too_big) == exchange(slow.http_port, too_big)
    assert spy.taken == before + 6
