"""`triton-mini perf` (issue 46, stage 1) against a running server: the triton-mini command on the bundled repository
over HTTP and gRPC, and the real Triton 2.51 (oracle), checked through its CSV and report, as a user runs it."""
import asyncio, csv, json, os, shutil, subprocess, sys, threading
from pathlib import Path

import numpy as np
import pytest

from triton_servers import ROOT, copy_models, http, wait_until

FAST = ['-p', '500', '-s', '50', '--max-trials', '4']   # short windows: the tests check the tool, not the server


def perf(*flags, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'triton_mini', 'perf', *flags], capture_output=True, text=True, timeout=timeout)


def add_sub_repo(tmp_path) -> Path:
    "Only the bundled add_sub (the bundled repository's GGUF models need llama-cpp-python, which real Triton lacks)."
    shutil.copytree(ROOT / 'model_repository' / 'add_sub', tmp_path / 'repo' / 'add_sub')
    return tmp_path / 'repo'


def check_csv(path:Path, levels:list):
    rows = list(csv.DictReader(open(path)))
    assert sorted(int(r['Concurrency']) for r in rows) == levels     # rows come by increasing throughput, as perf_analyzer's
    assert [float(r['Inferences/Second']) for r in rows] == sorted(float(r['Inferences/Second']) for r in rows)
    for r in rows:
        assert float(r['Inferences/Second']) > 0
        assert int(r['p50 latency']) <= int(r['p99 latency'])
        assert int(r['Server Compute Infer']) > 0          # the statistics extension's deltas reached the report
    return rows


@pytest.fixture(scope='module')
def server(launch_module, tmp_path_factory):
    return launch_module.mini_process(add_sub_repo(tmp_path_factory.mktemp('perf')))


def stream_repo(tmp_path) -> Path:
    "add_sub and the decoupled `streamer` (N responses per request, then an empty final one)."
    return copy_models(add_sub_repo(tmp_path), 'python_backend/streamer')


STREAM_DATA = {'data': [{'TEXT': ['hi'], 'N': [3], 'DELAY_MS': [0]}]}    # 3 responses per request


def check_streaming(port:int, tmp_path) -> None:
    "--streaming over gRPC: the decoupled streamer (3 responses a request) and add_sub (one), as perf_analyzer counts them."
    data, out = tmp_path / 'stream.json', tmp_path / 'stream.csv'
    data.write_text(json.dumps(STREAM_DATA))
    r = perf('-m', 'streamer', '-i', 'grpc', '-u', f'localhost:{port}', '--streaming', '--input-data', str(data),
             '--concurrency-range', '1:2', '-f', str(out), *FAST)
    assert r.returncode == 0, r.stderr
    for row in check_csv(out, [1, 2]):
        assert abs(float(row['Response Throughput']) - 3 * float(row['Inferences/Second'])) < 0.1, row
    assert 'Response Throughput: ' in r.stdout and 'Avg gRPC time: ' in r.stdout and '(un)marshal request/response' in r.stdout
    r = perf('-m', 'add_sub', '-i', 'grpc', '-u', f'localhost:{port}', '--streaming', '--concurrency-range', '2', '-f', str(out), *FAST)
    assert r.returncode == 0, r.stderr
    assert 'Response Throughput' not in out.read_text() and 'Response Throughput' not in r.stdout
    check_csv(out, [2])
    r = perf('-m', 'streamer', '-i', 'grpc', '-u', f'localhost:{port}', '--input-data', str(data), *FAST)
    assert (r.returncode, r.stderr.strip()) == (1, 'error: Decoupled models must be run with `--async` and `--streaming` and '
                                                   'either `-i grpc` or `--service-kind=triton_c_api`')


@pytest.mark.slow
def test_each_level_knows_how_busy_its_load_workers_were(server):
    "The client's CPU over the stable windows, for the saturation warning (issue 46): a share of the workers' cores."
    from triton_mini.perf import parse_args, run
    args = parse_args(['-m', 'add_sub', '-u', f'localhost:{server.http_port}', '--concurrency-range', '1:5:4', *FAST])
    levels = run(args, log=lambda *a: None)
    assert [l.client[1] for l in levels] == [1, 2]          # c=5: two worker processes (THREADS_PER_WORKER is 4)
    assert all(0 < l.client[0] < 1.5 for l in levels), [l.client for l in levels]   # busy a little, not idle, not over


@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['http', 'grpc'])
def test_perf_over_both_protocols(server, tmp_path, protocol):
    port = server.http_port if protocol == 'http' else server.grpc_port
    out = tmp_path / 'perf.csv'
    verbose = ['--verbose-csv'] if protocol == 'grpc' else []    # perf_analyzer's extra columns, only when asked
    r = perf('-m', 'add_sub', '-i', protocol, '-u', f'localhost:{port}', '--concurrency-range', '1:2', '-f', str(out), *verbose, *FAST)
    assert r.returncode == 0, r.stderr
    header = check_csv(out, [1, 2])[0].keys()
    assert ('Avg latency' in header and 'response wait' in header) == bool(verbose), header
    assert 'Concurrency: 1, throughput: ' in r.stdout and 'Concurrency: 2, throughput: ' in r.stdout
    assert 'Successful request count: 0' not in r.stdout and 'compute infer' in r.stdout


@pytest.mark.slow
def test_request_rate_and_batch(server):
    r = perf('-m', 'add_sub', '-u', f'localhost:{server.http_port}', '--request-rate-range', '100', '-b', '4', '--input-data', 'zero', *FAST)
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith('Request Rate: 100,'))
    assert 300 < float(line.split('throughput: ')[1].split()[0]) < 500     # 100 requests/s of 4 inferences


@pytest.mark.slow
@pytest.mark.parametrize('flags, says', [
    (['-m', 'nope'], "Request for unknown model: 'nope' is not found"),
    (['-m', 'add_sub', '--shape', 'INPUT0:5'], "unexpected shape for input 'INPUT0'"),
    (['-m', 'add_sub', '--input-data', 'BAD'], "input 'INPUT0' has 3 elements, its shape [4] needs 4"),
])
def test_bad_input_is_one_line(server, tmp_path, flags, says):
    bad = tmp_path / 'bad.json'
    bad.write_text('{"data": [{"INPUT0": [1, 2, 3], "INPUT1": [1, 2, 3, 4]}]}')
    r = perf(*[str(bad) if f == 'BAD' else f for f in flags], '-u', f'localhost:{server.http_port}', *FAST)
    assert (r.returncode, len(r.stderr.strip().splitlines())) == (1, 1), r.stderr
    assert r.stderr.startswith('error: ') and says in r.stderr


SHM_REGIONS = {'INPUT0_0_0': 32, 'INPUT1_0_0': 32, 'OUTPUT0': 32, 'OUTPUT1': 32}   # add_sub at -b 2: 2 x 4 FP32


def shm_run(http_port:int, protocol:str, port:int) -> tuple:
    """`--shared-memory system` at -b 2: (the regions the server listed while the run went on, {name: byte_size},
    the finished process, the regions listed after it)."""
    def status(): return json.loads(http(http_port, 'GET', '/v2/systemsharedmemory/status')[2])
    seen = {}
    def registered():
        seen.update({r['name']: int(r['byte_size']) for r in status()})
        return len(seen) == len(SHM_REGIONS) or proc.poll() is not None
    proc = subprocess.Popen([sys.executable, '-m', 'triton_mini', 'perf', '-m', 'add_sub', '-i', protocol, '-u', f'localhost:{port}',
                             '--shared-memory', 'system', '-b', '2', '--concurrency-range', '1:2', *FAST],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(registered, 60, 'the regions to be registered')
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None: proc.kill()
    leftovers = [f for f in os.listdir('/dev/shm') if f.startswith(f'triton_mini_perf_{proc.pid}_')]
    return seen, (proc.returncode, out, err), status(), leftovers


@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['http', 'grpc'])
def test_shared_memory_system(server, protocol):
    "perf_analyzer's regions are registered during the run, the requests read and write them, and all is gone after."
    seen, (code, out, err), after, leftovers = shm_run(server.http_port, protocol, server.http_port if protocol == 'http' else server.grpc_port)
    assert code == 0, err
    assert seen == SHM_REGIONS and after == [] and leftovers == []
    assert 'Concurrency: 2, throughput: ' in out and 'Successful request count: 0' not in out


class Until(list):
    "A record list that sets `stop` once it holds `n` records: the senders stop on a count, not a clock."
    def __init__(self, n, stop): super().__init__(); self.n, self.stop = n, stop
    def append(self, x):
        super().append(x); self.n -= 1
        if self.n <= 0: self.stop.set()


def async_overlap(protocol:str, port:int, n:int=4) -> tuple:
    "(most requests in flight, errors) of `n` --async senders run by this one thread until 200 answers."
    from triton_mini.perf import LoadSpec, _async_senders, grpc_request, http_request, max_in_flight
    tensors = {'INPUT0': np.ones((1, 4), np.float32), 'INPUT1': np.ones((1, 4), np.float32)}
    req = (http_request if protocol == 'http' else grpc_request)('add_sub', '', tensors)
    stop, errors = threading.Event(), []
    got = Until(200, stop)
    asyncio.run(_async_senders(LoadSpec(protocol, f'localhost:{port}', [req]), 0, 1, n, stop, got, errors))
    return max_in_flight(np.array(got)), errors


@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['http', 'grpc'])
def test_async_keeps_concurrency_in_flight_from_one_thread(server, protocol):
    assert async_overlap(protocol, server.http_port if protocol == 'http' else server.grpc_port) == (4, [])


@pytest.mark.slow
@pytest.mark.parametrize('protocol', ['http', 'grpc'])
def test_perf_async(server, tmp_path, protocol):
    port = server.http_port if protocol == 'http' else server.grpc_port
    out = tmp_path / 'perf.csv'
    r = perf('-m', 'add_sub', '-i', protocol, '-u', f'localhost:{port}', '--async', '--concurrency-range', '1:3:2', '-f', str(out), *FAST)
    assert r.returncode == 0, r.stderr
    check_csv(out, [1, 3])
    assert 'Using asynchronous calls for inference' in r.stdout


@pytest.mark.slow
def test_streaming(launch_module, tmp_path):
    check_streaming(launch_module.mini_process(stream_repo(tmp_path)).grpc_port, tmp_path)


@pytest.mark.parametrize('flags, says', [
    (['--streaming'], 'error: Streaming is only allowed with gRPC protocol and Triton C API.'),
    (['--streaming', '-i', 'grpc', '--sync'], 'error: can not use streaming with synchronous API'),
])
def test_streaming_flag_errors(flags, says):
    "perf_analyzer's words, before any connection."
    r = perf('-m', 'add_sub', '-u', 'localhost:1', *flags)
    assert (r.returncode, r.stderr.strip()) == (1, says)


def test_server_down_is_one_line():
    r = perf('-m', 'add_sub', '-u', 'localhost:1')
    assert r.returncode == 1 and r.stderr.strip() == 'error: cannot connect to the server at localhost:1 (Connection refused); is it running?'


def test_perf_is_a_client():
    "The load generator talks to servers through the protocol only: it imports no part of triton_mini."
    from test_layering import imports_of
    assert imports_of('perf') == set()


@pytest.mark.oracle
def test_perf_against_real_triton(real_triton, tmp_path):
    "The same command measures the real Triton 2.51, server-side statistics included, over HTTP and gRPC."
    triton = real_triton(add_sub_repo(tmp_path))
    for protocol, port in (('http', triton.http_port), ('grpc', triton.grpc_port)):
        out = tmp_path / f'{protocol}.csv'
        r = perf('-m', 'add_sub', '-i', protocol, '-u', f'localhost:{port}', '--concurrency-range', '1:2', '-f', str(out), *FAST)
        assert r.returncode == 0, r.stderr
        check_csv(out, [1, 2])


@pytest.mark.oracle
def test_shared_memory_against_real_triton(real_triton, tmp_path):
    "Real Triton 2.51 lists the same regions during the run, serves the requests from them, and has none after."
    triton = real_triton(add_sub_repo(tmp_path))
    for protocol, port in (('http', triton.http_port), ('grpc', triton.grpc_port)):
        seen, (code, out, err), after, leftovers = shm_run(triton.http_port, protocol, port)
        assert code == 0, err
        assert seen == SHM_REGIONS and after == [] and leftovers == []
        assert 'Successful request count: 0' not in out


@pytest.mark.oracle
def test_async_against_real_triton(real_triton, tmp_path):
    "--async keeps the requests in flight from one thread against real Triton 2.51 too, and the command measures it."
    triton = real_triton(add_sub_repo(tmp_path))
    for protocol, port in (('http', triton.http_port), ('grpc', triton.grpc_port)):
        assert async_overlap(protocol, port) == (4, [])
        out = tmp_path / f'{protocol}.csv'
        r = perf('-m', 'add_sub', '-i', protocol, '-u', f'localhost:{port}', '--async', '--concurrency-range', '1:3:2', '-f', str(out), *FAST)
        assert r.returncode == 0, r.stderr
        check_csv(out, [1, 3])


@pytest.mark.oracle
def test_streaming_against_real_triton(real_triton, tmp_path):
    "Real Triton 2.51 streams the same: 3 responses a request from the decoupled model (its empty final one not counted)."
    check_streaming(real_triton(stream_repo(tmp_path)).grpc_port, tmp_path)
