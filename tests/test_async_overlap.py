"""What an `async def execute` overlaps (issue 42), read from the models' own records, never from wall-clock bounds.

Four requests go at once to one instance of a probe model whose `async def execute` waits (on a BLS call to a slow
model with enough instances not to be the bottleneck, on a decoupled BLS call, or on `asyncio.sleep`) and answers
with its own start and end times. What Triton 2.51 does (tests below):

- not decoupled, `max_batch_size: 0` or dynamic batching: the execute is awaited, one at a time per instance;
- decoupled: execute returns at once, its coroutines share the instance's loop: all four overlap;
- `async_exec` waits in a thread of the loop's default executor (`min(32, CPUs + 4)` threads): eight gathered BLS
  calls to an eight-instance model run that many at once (6 on two CPUs), the rest after.

The fast test runs triton_mini in process (thread mode); the oracle test serves the same repository with the real
Triton and with `triton-mini` (stub processes, as a user runs it) and compares the patterns.
"""
import os, queue, textwrap, threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from triton_mini.backend import InferenceRequest
from triton_mini.server import TritonServer

from triton_servers import start_together, wait_until

PROBE = '''
import asyncio, json, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    """Waits `wait_ms` (a BLS call, a decoupled BLS call, asyncio.sleep, or eight gathered BLS calls) and answers every
    request with SPANS: [start, end] of this execute, or with `gather` the [start, end] of each callee execute."""
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.wait = cfg["parameters"]["wait"]["string_value"]
        self.ms = np.array([float(cfg["parameters"]["wait_ms"]["string_value"])], np.float32)
        self.decoupled = cfg.get("model_transaction_policy", {}).get("decoupled", False)
        self.batching = cfg.get("max_batch_size", 0) > 0

    def call(self, target):
        return pb_utils.InferenceRequest(model_name=target, requested_output_names=["SPAN"], inputs=[pb_utils.Tensor("MS", self.ms)])

    async def execute(self, requests):
        start = time.time()
        if self.wait == "bls":
            r = await self.call("sleeper").async_exec()
            if r.has_error(): raise pb_utils.TritonModelException(r.error().message())
        elif self.wait == "dbls":
            for r in await self.call("dsleeper").async_exec(decoupled=True):
                if r.has_error(): raise pb_utils.TritonModelException(r.error().message())
        elif self.wait == "sleep":
            await asyncio.sleep(self.ms[0] / 1000)
        if self.wait == "gather":
            got = await asyncio.gather(*[self.call("sleeper").async_exec() for _ in range(8)])
            spans = np.array([pb_utils.get_output_tensor_by_name(r, "SPAN").as_numpy() for r in got], np.float64)
        else:
            spans = np.array([[start, time.time()]], np.float64)
        out = [pb_utils.InferenceResponse([pb_utils.Tensor("SPANS", spans[None] if self.batching else spans)]) for _ in requests]
        if not self.decoupled: return out
        for request, response in zip(requests, out):
            request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

SLEEPER = '''
import json, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    "Sleeps MS milliseconds; SPAN: [start, end]. Decoupled: one response, then the final flag alone."
    def initialize(self, args):
        self.decoupled = json.loads(args["model_config"]).get("model_transaction_policy", {}).get("decoupled", False)

    def execute(self, requests):
        start = time.time()
        time.sleep(max(float(pb_utils.get_input_tensor_by_name(r, "MS").as_numpy()[0]) for r in requests) / 1000)
        out = [pb_utils.InferenceResponse([pb_utils.Tensor("SPAN", np.array([start, time.time()]))]) for _ in requests]
        if not self.decoupled: return out
        for request, response in zip(requests, out):
            sender = request.get_response_sender()
            sender.send(response)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

# name: (wait, decoupled, dynamic batching); what Triton 2.51 did with four requests sent at once (max in flight):
PROBES = {
    'bls_nd': ('bls', False, False),       'bls_nd_db': ('bls', False, True),
    'bls_dec': ('bls', True, False),       'bls_dec_db': ('bls', True, True),
    'dbls_nd': ('dbls', False, False),     'dbls_dec': ('dbls', True, False),
    'sleep_nd': ('sleep', False, False),   'sleep_dec': ('sleep', True, False),
}
TRITON = {'bls_nd': 1, 'bls_nd_db': 1, 'bls_dec': 4, 'bls_dec_db': 4, 'dbls_nd': 1, 'dbls_dec': 4, 'sleep_nd': 1, 'sleep_dec': 4}


def probe_config(name, wait, decoupled, batching, wait_ms) -> str:
    "`dynamic_batching` with max_batch_size 1: every execute has one request, through the dynamic batcher."
    return textwrap.dedent(f'''\
        backend: "python"
        max_batch_size: {1 if batching else 0}
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "SPANS" data_type: TYPE_FP64 dims: [ -1, 2 ] }} ]
        parameters [ {{ key: "wait" value: {{ string_value: "{wait}" }} }}, {{ key: "wait_ms" value: {{ string_value: "{wait_ms}" }} }} ]
        instance_group [ {{ count: 1 kind: KIND_CPU }} ]
        ''') + ('model_transaction_policy { decoupled: true }\n' if decoupled else '') + ('dynamic_batching { }\n' if batching else '')


def write_repo(root:Path, wait_ms:int, gather:bool=False) -> Path:
    "The probes, `sleeper` (8 instances: never the bottleneck) and `dsleeper` (decoupled, 4); `gather` adds that probe."
    def model(name, source, config):
        (root / name / '1').mkdir(parents=True, exist_ok=True)
        (root / name / '1' / 'model.py').write_text(source)
        (root / name / 'config.pbtxt').write_text(config)
    io = ('input [ { name: "MS" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "SPAN" data_type: TYPE_FP64 dims: [ 2 ] } ]\n'
          'backend: "python"\nmax_batch_size: 0\n')
    model('sleeper', SLEEPER, io + 'instance_group [ { count: 8 kind: KIND_CPU } ]\n')
    model('dsleeper', SLEEPER, io + 'instance_group [ { count: 4 kind: KIND_CPU } ]\nmodel_transaction_policy { decoupled: true }\n')
    for name, spec in PROBES.items(): model(name, PROBE, probe_config(name, *spec, wait_ms))
    if gather: model('gather', PROBE, probe_config('gather', 'gather', False, False, wait_ms))
    return root


def most_at_once(spans) -> int:
    "The most (start, end) spans open at the same moment (an end before a start at the same instant)."
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in edges: now += step; most = max(most, now)
    return most


def executes(answers) -> set:
    "The distinct execute spans in the answers (a batch answers each of its requests with the same span)."
    return {tuple(span) for a in answers for span in np.asarray(a).reshape(-1, 2).tolist()}


# ------------------------------------------------------------------------------------------------------ in process

def submit_four(server, name:str, batching:bool) -> list:
    "Four requests submitted at once; their SPANS outputs."
    answers = queue.Queue()
    def callback(req, resp, final):
        if resp is not None: answers.put(resp.outputs['SPANS'] if resp.error is None else resp.error.message)
    x = np.ones([1, 1] if batching else [1], np.float32)
    for i in range(4): server.submit(InferenceRequest(name, {'IN': x}, id=str(i), response_callback=callback))
    got = [answers.get(timeout=60) for _ in range(4)]
    assert all(not isinstance(a, str) for a in got), got
    return got


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    s = TritonServer(write_repo(tmp_path_factory.mktemp('async_overlap'), wait_ms=300), python_backend_mode='thread')
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize('name', ['dbls_dec', 'bls_dec_db', 'bls_nd', 'sleep_dec'])
def test_async_execute_overlaps_as_triton_in_thread_mode(server, name):
    spans = executes(submit_four(server, name, PROBES[name][2]))
    assert len(spans) == 4 and most_at_once(spans) == TRITON[name], (name, sorted(spans))


# ------------------------------------------------------------------------------------------------------ the oracle

def stream(port:int, name:str, batching:bool, n:int=4) -> list:
    "`n` requests on one gRPC stream (decoupled models or not), sent at once; their SPANS outputs."
    import tritonclient.grpc as grpcclient
    answers = queue.Queue()
    c = grpcclient.InferenceServerClient(f'127.0.0.1:{port}')
    c.start_stream(callback=lambda result, error: answers.put(error if error is not None else result.as_numpy('SPANS')))
    try:
        for i in range(n):
            x = grpcclient.InferInput('IN', [1, 1] if batching else [1], 'FP32')
            x.set_data_from_numpy(np.ones([1, 1] if batching else [1], np.float32))
            c.async_stream_infer(name, [x], request_id=str(i))
        got = [answers.get(timeout=120) for _ in range(n)]
    finally: c.stop_stream(); c.close()
    assert all(isinstance(a, np.ndarray) for a in got), got
    return got


def patterns(server) -> dict:
    "Per probe: (executes, most in flight); for `gather`, the most callee executes at once of its eight BLS calls."
    out = {}
    for name, (_, _, batching) in PROBES.items():
        spans = executes(stream(server.grpc_port, name, batching))
        out[name] = (len(spans), most_at_once(spans))
    out['gather'] = most_at_once(executes(stream(server.grpc_port, 'gather', False, n=1)))
    return out


@pytest.mark.oracle
def test_async_execute_overlaps_like_triton(tmp_path, real_triton, mini_process):
    repo = write_repo(tmp_path / 'models', wait_ms=1000, gather=True)
    real, mini = start_together(lambda: real_triton(repo), lambda: mini_process(repo))
    with ThreadPoolExecutor(2) as pool: seen = dict(zip(('real', 'mini'), pool.map(patterns, (real, mini))))
    assert {k: v for k, v in seen['real'].items() if k != 'gather'} == {k: (4, n) for k, n in TRITON.items()}, seen
    assert seen['real']['gather'] == min(8, 32, (os.cpu_count() or 1) + 4), seen
    assert seen['mini'] == seen['real'], seen


def test_bls_waiting_threads_end_with_the_instance(tmp_path):
    "In thread mode an instance's `async_exec` threads (its loop's default executor) end when the model is unloaded."
    s = TritonServer(write_repo(tmp_path, wait_ms=100), python_backend_mode='thread', model_control_mode='explicit')
    s.start()
    try:
        for name in ('dsleeper', 'dbls_dec'): s.load_model(name)
        before = set(threading.enumerate())   # other servers of this process have instances of the same name
        submit_four(s, 'dbls_dec', False)
        waiting = lambda: [t.name for t in set(threading.enumerate()) - before if t.name.startswith('triton_mini:dbls_dec_0_0:bls')]
        assert len(waiting()) == 4, waiting()
        s.unload_model('dbls_dec')
        wait_until(lambda: not waiting(), 10, 'the BLS threads of the unloaded instance to end')
    finally: s.stop()
