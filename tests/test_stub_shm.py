"""Big tensors across the stub hop through shared memory (issue 42, nbs/04c_stub_process.ipynb "Big tensors through
shared memory"): the codec round-trips every numeric layout through a region and leaves BYTES on the socket, blocks
come back once the reader drops its arrays, a full region falls back to the socket, a served model echoes 1 MB both
ways under many hops in flight, and no segment is left behind, even by a stub that crashes."""
import json, os, socket, struct, threading, urllib.request
from concurrent.futures import ThreadPoolExecutor

import mmap
import numpy as np
import pytest

from triton_mini import stub_process as sp
from triton_mini.portability import anonymous_shm

def region_pair(size=4 << 20):
    "Channels a (the server) and b (the stub) with regions as `offer_regions` / `accept_regions` leave them."
    a, b = sp.channel_pair()
    ra, rb = (sp.Region(anonymous_shm(size), size) for _ in range(2))
    a.out, a.inn, b.out, b.inn = ra, rb, rb, ra
    return a, b

def hop(a, b, msg):
    "Send `msg` from channel a (on a thread: a big one fills the socket) and receive it on b."
    t = threading.Thread(target=sp.send_message, args=(a, msg)); t.start()
    try: return sp.recv_message(b)
    finally: t.join()

def in_shm(arr) -> bool: return isinstance(arr.base, mmap.mmap)

LAYOUTS = {
    'c': lambda: np.arange(6 * 5000, dtype=np.float32).reshape(6, 5000),
    'fortran': lambda: np.asfortranarray(np.arange(6 * 5000, dtype=np.int64).reshape(6, 5000)),
    'strided': lambda: np.arange(400 * 300, dtype=np.float64).reshape(400, 300)[::3, ::2],
    'transposed': lambda: np.arange(300 * 200, dtype=np.uint16).reshape(300, 200).T,
    'bool': lambda: np.arange(100_000) % 3 == 0,
    'fp16': lambda: np.linspace(0, 1, 70_000).astype(np.float16),
    'int8': lambda: (np.arange(70_000) % 250 - 125).astype(np.int8),
    'complex': lambda: (np.arange(10_000) * (1 + 2j)).astype(np.complex128),
    'big-endian': lambda: np.arange(20_000, dtype='>i4'),
}

@pytest.mark.parametrize('name', LAYOUTS)
def test_every_layout_round_trips_through_the_region(name):
    a, b = region_pair()
    x = LAYOUTS[name]()
    got = hop(a, b, ('execute', {'IN': x}))[1]['IN']
    assert in_shm(got) and got.dtype == x.dtype and got.shape == x.shape and np.array_equal(got, x)
    assert got.flags.writeable and got.flags.f_contiguous == (x.flags.f_contiguous and not x.flags.c_contiguous or got.ndim < 2 and got.flags.f_contiguous)
    a.close(); b.close()

@pytest.mark.parametrize('x', [np.float32(3.5), np.array(7, np.int64), np.zeros((0, 4), np.float32), np.zeros(0, np.uint8)],
                         ids=['scalar', '0-d', 'empty-2d', 'empty'])
def test_0d_and_empty_round_trip_with_no_threshold(monkeypatch, x):
    monkeypatch.setattr(sp, 'STUB_SHM_MIN', 0)
    a, b = region_pair()
    got = hop(a, b, x)
    assert np.asarray(got).shape == np.shape(x) and np.asarray(got).dtype == np.asarray(x).dtype and np.array_equal(got, x)
    a.close(); b.close()

def test_bytes_and_small_tensors_stay_on_the_socket():
    a, b = region_pair()
    text = np.array([b'abc' * (i % 7) for i in range(100_000)], dtype=object)
    small = np.arange(100, dtype=np.float32)
    got_text, got_small = hop(a, b, (text, small))
    assert got_text.tolist() == text.tolist() and np.array_equal(got_small, small)
    assert not in_shm(got_small) and a.out.taken == {}
    a.close(); b.close()

def test_blocks_come_back_once_the_reader_drops_its_arrays():
    a, b = region_pair()
    xs = [np.full(100_000, i, np.float32) for i in range(5)]
    got = hop(a, b, xs)
    assert len(a.out.taken) == 5
    kept = got[2][10:20]          # a view of one of them: that block stays out
    del got
    hop(b, a, 'done')
    assert len(a.out.taken) == 1
    assert np.array_equal(kept, np.full(10, 2, np.float32))
    del kept
    hop(b, a, 'done')
    assert a.out.taken == {} and a.out.free == [[0, 4 << 20]]   # merged back into one block
    a.close(); b.close()

def test_a_full_region_falls_back_to_the_socket():
    a, b = region_pair(size=1 << 20)
    xs = [np.full(300_000, i, np.float32) for i in range(4)]   # 1.2 MB each: none fits
    xs += [np.full(100_000, i, np.float32) for i in range(4, 8)]   # 400 KB each: two fit
    got = hop(a, b, xs)
    assert [in_shm(g) for g in got] == [False] * 4 + [True, True, False, False]
    assert all(np.array_equal(g, x) for g, x in zip(got, xs))
    del got
    hop(b, a, 'done')
    assert [in_shm(g) for g in hop(a, b, xs[4:])] == [True, True, False, False]   # room again
    a.close(); b.close()

def test_a_pickle_that_fails_gives_its_blocks_back():
    a, b = region_pair()
    with pytest.raises(Exception): sp.send_message(a, (np.zeros(100_000, np.float32), lambda: 0))
    assert a.out.taken == {}
    a.close(); b.close()

def test_no_regions_over_tcp_or_when_off(monkeypatch):
    monkeypatch.setattr(sp, 'STUB_SHM', True)
    with socket.create_server(('127.0.0.1', 0)) as srv:
        c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
        done = []
        t = threading.Thread(target=lambda: done.append(sp.accept_regions(sp.Channel(s), sp.Channel(s)))); t.start()
        work, side = sp.offer_regions(sp.Channel(c), sp.Channel(c)); t.join()
        assert (work.out, work.inn, done[0][0].out, done[0][0].inn) == (None,) * 4
        c.close(); s.close()
    monkeypatch.setattr(sp, 'STUB_SHM', False)
    x, y = socket.socketpair()
    t = threading.Thread(target=lambda: sp.accept_regions(sp.Channel(y), sp.Channel(y))); t.start()
    assert sp.offer_regions(sp.Channel(x), sp.Channel(x))[0].out is None; t.join()

def test_where_there_is_no_memfd_no_name_is_left(monkeypatch):
    pytest.importorskip('_posixshmem')
    before = set(os.listdir('/dev/shm'))
    monkeypatch.delattr(os, 'memfd_create')
    fd = anonymous_shm(1 << 16)
    try: assert os.fstat(fd).st_size == 1 << 16 and set(os.listdir('/dev/shm')) == before
    finally: os.close(fd)


# ---------------------------------------------------------------------------------------------- served, switch on

ECHO = '''
import os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if x.size and x.flat[0] < 0: os._exit(1)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x + 1)]))
        return out
'''
ECHO_CONFIG = '''backend: "python"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 500 }
input [{ name: "IN" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [-1] }]
'''

@pytest.fixture
def echo_repo(tmp_path):
    r = tmp_path / 'models'
    (r / 'echo' / '1').mkdir(parents=True)
    (r / 'echo' / '1' / 'model.py').write_text(ECHO)
    (r / 'echo' / 'config.pbtxt').write_text(ECHO_CONFIG)
    return r

def binary_infer(port:int, x:np.ndarray) -> np.ndarray:
    head = json.dumps({'inputs': [{'name': 'IN', 'shape': [1, x.size], 'datatype': 'FP32', 'parameters': {'binary_data_size': x.nbytes}}],
                       'outputs': [{'name': 'OUT', 'parameters': {'binary_data': True}}]}).encode()
    req = urllib.request.Request(f'http://127.0.0.1:{port}/v2/models/echo/infer', data=head + x.astype('<f4').tobytes(), method='POST',
                                 headers={'Inference-Header-Content-Length': str(len(head)), 'Content-Type': 'application/octet-stream'})
    with urllib.request.urlopen(req, timeout=60) as r:
        body, n = r.read(), int(r.headers['Inference-Header-Content-Length'])
    return np.frombuffer(body[n:], '<f4')

def shm_files() -> set:
    "The shared-memory objects this code could leave (portability.anonymous_shm names them triton_mini_*; other processes' come and go)."
    return {f for f in os.listdir('/dev/shm') if f.startswith('triton_mini')}

def test_1mb_both_ways_with_many_hops_in_flight_then_a_crash_leaves_nothing(mini_process, echo_repo):
    before = shm_files()
    s = mini_process(echo_repo, '--python-backend-mode=process', env={'TRITON_MINI_STUB_SHM': '1'})
    x = np.arange(256 * 1024, dtype=np.float32)       # 1 MiB
    assert np.array_equal(binary_infer(s.http_port, x), x + 1)
    stub = next(p for p in __import__('psutil').Process(s.ps.pid).children(recursive=True)
                if 'echo' in ' '.join(p.cmdline()))
    assert any('memfd:triton_mini' in m.path for m in stub.memory_maps()), (stub.cmdline(), [m.path for m in stub.memory_maps()][-8:])
    def one(i):   # each its own values: an answer that is another request's shows
        xi = np.full(64 * 1024 + i, i, np.float32)
        return np.array_equal(binary_infer(s.http_port, xi), xi + 1)
    with ThreadPoolExecutor(16) as pool: assert all(pool.map(one, range(400)))
    with pytest.raises(urllib.error.HTTPError): binary_infer(s.http_port, np.full(100_000, -1, np.float32))   # os._exit in the stub
    assert not stub.is_running() or stub.status() == 'zombie'
    assert not shm_files() - before   # nothing left behind
    s.stop()
    assert not shm_files() - before
