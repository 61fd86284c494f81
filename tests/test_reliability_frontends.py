"""Issue 26, the front ends' rows: a bad JSON body that leaked its memory (row 2), BYTES requests and big JSON
bodies that stalled the event loop (rows 3 and 6), and the low ones (row 10: a trickled body, a deep `file:` key,
requests cut at the exit timeout). Each test sends the bad request, then checks that the server is still live
and ready and that a healthy model next to it answers.

One triton-mini process serves the module (its memory and latency are measured from outside); the unit tests
call the code in process.
"""
import asyncio, gc, glob, gzip, json, os, socket, struct, sys, threading, time

import numpy as np
import pytest

from triton_servers import MiniProcess, copy_models, request

MB = 1 << 20
OK = {'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                 {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]}


@pytest.fixture(scope='module')
def tmp_root(tmp_path_factory): return tmp_path_factory.mktemp('reliability')


@pytest.fixture(scope='module')
def server(tmp_root):
    "triton-mini with add_sub and identity_bytes, explicit control (for loads), its own TMPDIR (override folders)."
    repo = copy_models(tmp_root / 'models', 'conformance/add_sub', 'conformance/identity_bytes')
    (tmp_root / 'tmp').mkdir()
    s = MiniProcess(repo, '--model-control-mode=explicit', '--load-model=add_sub', '--load-model=identity_bytes',
                    '--http-body-timeout-secs=0.4', env={'TMPDIR': str(tmp_root / 'tmp')})
    yield s
    assert s.stop() == 0


def still_healthy(s):
    "Live, ready, and add_sub answers."
    assert s.request('GET', '/v2/health/live')[0] == 200
    assert s.request('GET', '/v2/health/ready')[0] == 200
    status, _, body = s.request('POST', '/v2/models/add_sub/infer', json.dumps(OK).encode())
    assert status == 200 and json.loads(body)['outputs'][0]['data'] == [2.0, 3.0, 4.0, 5.0]


# The bound on a health check's worst latency while a big request is decoded. A blocked event loop shows as the whole
# decode (seconds; real Triton 2.51: 519-573 ms for the 63 MiB body); 250 ms leaves room for a loaded CI machine
# running other test workers on the same two cores (215 ms seen there once, 34-46 ms when quiet: bench/results).
# Where the blocked loop itself is measured (the 63 MiB body: ~470 ms quiet), the bound grows to half of it when a loaded
# machine makes it slower: 275 ms was seen once in CI with two test workers on the two cores.
HEALTH_BOUND_S = 0.25

def quiet_latency(s, seconds:float=2.0) -> float:
    "The worst /v2/health/live latency over `seconds` with nothing else sent: the machine's own noise, this moment."
    return health_latency_during(s, lambda: time.sleep(seconds))[1]


def health_bound(s) -> float:
    """HEALTH_BOUND_S on top of the latency the machine shows right now with no load from this test: on two cores
    shared with other test workers a quiet server's health check alone has taken 100+ ms, and a bound that ignores it
    fails for the machine, not the server (284 ms against 250 was seen once in CI). A blocked loop still shows as the
    whole decode, seconds."""
    return HEALTH_BOUND_S + quiet_latency(s)


def health_latency_during(s, work) -> tuple:
    "(work's result, the worst /v2/health/live latency in seconds while `work()` ran, how many checks)."
    worst, n, done = [0.0], [0], threading.Event()
    def poll():
        while not done.is_set():
            t = time.perf_counter()
            assert request(s.http_port, 'GET', '/v2/health/live', timeout=30)[0] == 200
            worst[0], n[0] = max(worst[0], time.perf_counter() - t), n[0] + 1
            time.sleep(0.005)
    t = threading.Thread(target=poll); t.start()
    try: result = work()
    finally: done.set(); t.join()
    return result, worst[0], n[0]


# ---------------------------------------------------------------------------------------------------------
# Row 2: a body that fails to parse is freed

def test_parse_json_keeps_no_exception():
    "The frame of a failed parse keeps nothing alive: no exception (whose traceback holds the frame) in a local."
    from triton_mini.http_server import parse_json
    from triton_mini.errors import TritonError
    bad = b'{"inputs": [' + b'1,' * 200_000 + b'x]}'      # over 256 KiB: orjson's failure path
    refs = sys.getrefcount(bad)
    gc.disable()                  # a cycle would be freed by a collection that happens to run: none may
    try:
        for _ in range(3):
            with pytest.raises(TritonError, match='Invalid value'): parse_json(bad)
        assert sys.getrefcount(bad) == refs
    finally: gc.enable()


@pytest.mark.slow
def test_bad_json_bodies_do_not_grow_memory(server):
    "50 gzipped bodies of 8 MB that fail to parse: RSS grows by < 50 MB (before: the whole body, and more, per request)."
    bad = gzip.compress(b'{"inputs": [' + b'1,' * (4 * MB) + b'x]}')
    gz = {'Content-Encoding': 'gzip'}
    for _ in range(3): server.request('POST', '/v2/models/add_sub/infer', bad, gz)
    base = server.rss()
    for _ in range(50):
        status, _, body = server.request('POST', '/v2/models/add_sub/infer', bad, gz)
        assert status == 500 and b"failed to parse the request JSON buffer: Invalid value." in body
    grew = (server.rss() - base) / MB
    assert grew < 50, f'RSS grew by {grew:.0f} MB after 50 bad bodies'
    still_healthy(server)


# ---------------------------------------------------------------------------------------------------------
# Rows 3 and 6: the event loop stays free while big requests decode

@pytest.fixture(scope='module')
def thread_server(tmp_root):
    "The same models in thread mode (Python models on the server's threads, not stub processes)."
    repo = copy_models(tmp_root / 'thread_models', 'conformance/add_sub', 'conformance/identity_bytes')
    s = MiniProcess(repo, '--python-backend-mode=thread')
    yield s
    assert s.stop() == 0


@pytest.mark.slow   # a latency bound: run where the machine is quiet, not in the fast loop
@pytest.mark.parametrize('mode', ['thread', 'process'])   # process: the hop pickles BYTES in slices without a memo (04c)
def test_grpc_many_bytes_elements_keep_health_answered(server, thread_server, mode):
    "A gRPC request of a million small BYTES elements of varied length: health answers within HEALTH_BOUND_S meanwhile."
    server = thread_server if mode == 'thread' else server
    import tritonclient.grpc as grpcclient
    values = np.array([b'abcdefghij'[:i % 11] for i in range(1_000_000)], dtype=object)
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{server.grpc_port}')
    try:
        inp = grpcclient.InferInput('IN', [len(values)], 'BYTES'); inp.set_data_from_numpy(values)
        for attempt in range(2):   # a blocked loop fails every time; a spike of the shared machine seldom twice running
            bound = health_bound(server)
            result, worst, checks = health_latency_during(server, lambda: client.infer('identity_bytes', [inp], client_timeout=120))
            if worst < bound: break
    finally: client.close()
    assert (result.as_numpy('OUT') == values).all()
    assert checks >= 3 and worst < bound, f'health took {worst * 1000:.0f} ms ({checks} checks; bound {bound * 1000:.0f} ms), twice'
    still_healthy(server)


BAD_63MIB = b'{"inputs": [' + b'1,' * ((63 * MB - 16) // 2) + b'x]}'     # issue 26 row 6: fails at its last bytes


@pytest.mark.slow   # a latency bound: run where the machine is quiet, not in the fast loop
def test_big_json_body_keeps_health_answered(server):
    "An HTTP body of half a million nested BYTES strings (7 MB of JSON, over 4 MiB: decoded in the worker process): health within HEALTH_BOUND_S."
    n = 500_000
    body = json.dumps({'inputs': [{'name': 'IN', 'shape': [n], 'datatype': 'BYTES', 'data': [['abcdefgh'], ['ijk']] * (n // 2)}]}).encode()
    for attempt in range(2):   # a blocked loop fails every time; a spike of the shared machine seldom twice running
        bound = health_bound(server)
        (status, _, out), worst, checks = health_latency_during(server, lambda: server.request('POST', '/v2/models/identity_bytes/infer', body))
        if worst < bound: break
    assert status == 200 and len(json.loads(out)['outputs'][0]['data']) == n
    assert checks >= 3 and worst < bound, f'health took {worst * 1000:.0f} ms ({checks} checks; bound {bound * 1000:.0f} ms), twice'
    still_healthy(server)


def blocked_loop_s(gz:bytes) -> float:
    "How long a loop that inflated and parsed `gz` itself would stop answering, timed here and now (same machine, same load)."
    from triton_mini.http_hardening import inflate
    from triton_mini.http_server import parse_json
    from triton_mini.errors import TritonError
    t = time.perf_counter()
    try: parse_json(inflate(gz, 64 * MB))
    except TritonError: pass
    return time.perf_counter() - t


@pytest.mark.slow   # a latency bound: run where the machine is quiet, not in the fast loop
def test_63mib_json_body_keeps_health_answered(server):
    "Issue 26 row 6: the 64 KB gzip of a 63 MiB body that fails at its end (decoded in the worker process): health within HEALTH_BOUND_S."
    gz = gzip.compress(BAD_63MIB)
    send = lambda: server.request('POST', '/v2/models/add_sub/infer', gz, {'Content-Encoding': 'gzip'})
    send()                                                 # the worker process starts on first use
    for _ in range(3):
        (status, _, out), worst, checks = health_latency_during(server, send)
        assert (status, out) == (500, b'{"error":"failed to parse the request JSON buffer: Invalid value. at 66060284"}')
        bound = max(HEALTH_BOUND_S, blocked_loop_s(gz) / 2)
        assert checks >= 3 and worst < bound, f'health took {worst * 1000:.0f} ms ({checks} checks; bound {bound * 1000:.0f} ms)'
    still_healthy(server)


def test_worker_decodes_as_inline():
    "A big body decoded in the worker process: the same arrays, options and request fields as inline; a bad one the same error."
    from triton_mini.http_server import DecodeWorker, decode_in_worker, decode_infer_request, _unpack_inputs
    from triton_mini.errors import TritonError
    n = 1_000_000
    rng = np.random.default_rng(0)
    strings = [b'', b'a', 'é'.encode(), b'xyz' * 50] * (n // 40)
    doc = {'id': 'big', 'parameters': {'sequence_id': 'corr', 'sequence_end': True, 'user': 3},
           'inputs': [{'name': 'F', 'shape': [n // 4, 4], 'datatype': 'FP32', 'data': rng.standard_normal(n).tolist()},
                      {'name': 'I', 'shape': [n], 'datatype': 'INT64', 'data': rng.integers(-2**62, 2**62, n).tolist()},
                      {'name': 'B', 'shape': [2, n // 1000], 'datatype': 'BOOL', 'data': [[True, False] * (n // 2000)] * 2},
                      {'name': 'S', 'shape': [len(strings)], 'datatype': 'BYTES', 'data': [s.decode() for s in strings]}],
           'outputs': [{'name': 'OUT', 'parameters': {'classification': 2}}]}
    body = json.dumps(doc).encode()
    bad = body.replace(b'"data": [', b'"data": ["x", ', 1)          # a string among F's numbers: fails in the conversion
    worker = DecodeWorker()
    try:
        kind, wreq, wopts = asyncio.run(worker.run(decode_in_worker, 'm', 3, body, None))
        out = asyncio.run(worker.run(decode_in_worker, 'm', 3, bad, None))
        trunc = asyncio.run(worker.run(decode_in_worker, 'm', 3, body[:-1000], None))
    finally: worker.close()
    assert worker.pool is None
    req, opts = decode_infer_request('m', 3, body, None)
    wreq.inputs = _unpack_inputs(wreq.inputs)
    assert kind == 'ok' and len(body) > 8 * MB and wopts == opts and list(wreq.inputs) == list(req.inputs)
    for k, a in req.inputs.items():
        assert wreq.inputs[k].dtype == a.dtype and wreq.inputs[k].shape == a.shape and (wreq.inputs[k] == a).all(), k
    assert list(wreq.inputs['S']) == strings
    assert (wreq.id, wreq.parameters, wreq.correlation_id, wreq.flags, wreq.model_version) == \
           (req.id, req.parameters, req.correlation_id, req.flags, req.model_version)
    for b, got in ((bad, out), (body[:-1000], trunc)):
        with pytest.raises(TritonError) as e: decode_infer_request('m', 3, b, None)
        assert got == ('error', e.value.message, e.value.code), (got, e.value)


def test_worker_is_replaced():
    "The decoding process is replaced after max_tasks bodies (also after concurrent ones) and when it is killed."
    from concurrent.futures.process import BrokenProcessPool
    from triton_mini.http_server import DecodeWorker, decode_in_worker
    bad = b'{"inputs": [1, x]}'
    want = ('error', 'failed to parse the request JSON buffer: Invalid value. at 15', 'INTERNAL')
    async def go(w):
        run = lambda: asyncio.wait_for(w.run(decode_in_worker, 'm', 1, bad, None), 30)
        assert await asyncio.gather(*[run() for _ in range(4)]) == [want] * 4
        pids = set()
        for _ in range(7):
            assert await run() == want
            pids |= set(w.pool._processes)
        assert len(pids) >= 2                                 # replaced after 3 tasks (Python 3.11's max_tasks_per_child hung here)
        for proc in list(w.pool._processes.values()): proc.kill(); proc.join()
        try: assert await run() == want                        # the dead worker's pool may not know yet
        except BrokenProcessPool: pass
        assert await run() == want and await run() == want     # a fresh process
    w = DecodeWorker(max_tasks=3)
    try: asyncio.run(go(w))
    finally: w.close()


# ---------------------------------------------------------------------------------------------------------
# Row 10

def test_trickled_body_is_closed(server):
    "A body sent a byte every 0.2 s (each within --http-body-timeout-secs=0.4) is cut at 5 x 0.4 s in all."
    c = socket.create_connection(('127.0.0.1', server.http_port))
    try:
        c.sendall(b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n')
        start, closed = time.monotonic(), False
        while time.monotonic() - start < 10:
            try: c.sendall(b' ')
            except OSError: closed = True; break
            c.settimeout(0.2)
            try:
                if c.recv(1024) == b'': closed = True; break
            except socket.timeout: pass
            except OSError: closed = True; break
        took = time.monotonic() - start
    finally: c.close()
    assert closed and 1.5 < took < 5, f'closed={closed} after {took:.1f} s'
    still_healthy(server)


def test_deep_file_key_leaves_no_temp_dir(server, tmp_root):
    "A load whose file: key nests 1,500 folders fails with Triton's poll error and leaves no override folder behind."
    key = 'file:' + '/'.join(['d'] * 1500) + '/model.py'
    body = json.dumps({'parameters': {'config': '{"backend": "python"}', key: 'eA=='}}).encode()
    status, _, answer = server.request('POST', '/v2/repository/models/deep/load', body)
    assert (status, json.loads(answer)) == (500, {'error': "failed to load 'deep', failed to poll from model repository"})
    assert glob.glob(str(tmp_root / 'tmp' / 'triton_mini_override_*')) == []
    still_healthy(server)


def test_request_cut_at_exit_timeout_gets_json():
    "A request still running when uvicorn cancels it (the exit timeout) gets Triton's JSON error shape, not plain text."
    from triton_mini.http_server import HTTPFrontend, CUT_AT_EXIT
    app = HTTPFrontend.__new__(HTTPFrontend)
    async def hang(*a): await asyncio.sleep(3600)
    app._serve = hang
    async def main():
        sent = []
        async def send(msg): sent.append(msg)
        task = asyncio.ensure_future(app({'type': 'http', 'method': 'GET', 'path': '/v2/health/ready', 'headers': []}, None, send))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait([task])
        return sent
    sent = asyncio.run(main())
    assert sent[0]['status'] == 503 and (b'content-type', b'application/json') in sent[0]['headers']
    assert json.loads(sent[1]['body']) == {'error': CUT_AT_EXIT}
