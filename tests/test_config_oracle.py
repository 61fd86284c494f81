"""The config layer (model_config, config_parser, model_config_utils) against the real Triton 2.51 (marker `oracle`).

One server for the whole module (explicit model control, free ports) on a temporary repository holding every
corpus file of tests/configs as a model directory (tiny Python models). Each file is loaded; we record what Triton
does (parse error lines from its log, the poll-stage reason from its log, the load-stage reason from the HTTP body,
or the config JSON from GET /v2/models/<name>/config) and compare it with the corpus header and with triton_mini.
A few JSON configs go through the load API's `config` parameter too.

The oracle is found via $TRITON_ORACLE, else <repo>/../shared/oracle/real-triton; without it every test here is
skipped with that reason. `python tests/test_config_oracle.py --record [stem ...]` rewrites corpus headers from the server.
"""
import json, re, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_config_parser import CASES, PARSE_PREFIX, maps_are_small, outcome  # noqa: E402
from triton_mini.model_config import ConfigError, ModelConfig  # noqa: E402
from triton_mini.config_parser import parse_config  # noqa: E402
from triton_mini.model_config_utils import autofill_config  # noqa: E402
from triton_servers import RealTriton, http, oracle_or_skip  # noqa: E402

pytestmark = pytest.mark.oracle

MODEL_PY = '''import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.outputs = [o["name"] for o in json.loads(args["model_config"])["output"]]

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(n, t.as_numpy()) for n, t in zip(self.outputs, r.inputs())])
                for r in requests]
'''


class Triton(RealTriton):
    "The real tritonserver in explicit mode (nothing loaded), with the client calls and log reads these tests make."
    def __init__(self, repo: Path):
        super().__init__(repo, '--model-control-mode=explicit', wait='live')

    def request(self, method, path, body=None):
        try: return http(self.http_port, method, path, body, timeout=120)[::2]
        except OSError: return None, ''

    def log_size(self) -> int: return self.log_path.stat().st_size

    def wait_log(self, needle: str, start: int, timeout=30) -> str:
        "The log written since byte `start`, once it contains `needle` (the log may lag behind the HTTP answer)."
        deadline = time.monotonic() + timeout
        while needle not in (text := self.log_path.read_bytes()[start:].decode('utf-8', 'replace')):
            if time.monotonic() > deadline: raise AssertionError(f'not in the server log: {needle}')
            time.sleep(0.02)
        return text


def write_repo(repo: Path, cases):
    for case in cases:
        d = repo / case.model
        d.mkdir(parents=True)
        (d / 'config.pbtxt').write_bytes(case.data)
        for f in case.files:
            if f.endswith('/'): (d / f).mkdir(parents=True, exist_ok=True)
            else:
                (d / f).parent.mkdir(parents=True, exist_ok=True)
                (d / f).write_text(MODEL_PY if f.endswith('model.py') else '')


def logged(rest: str) -> str:
    "A message as Triton logs it: JSON-escaped and closed by a quote at the end of the line."
    return json.loads('"' + rest.split('\n')[0].rstrip()[:-1] + '"')


LOAD_PREFIX = re.compile(r"load failed for model '[^']*': version \d+ is at UNAVAILABLE state: (.*);\n$", re.S)


def load(server: Triton, case, unload=True):
    "Load one model; return (expect-style outcome, config JSON or None)."
    start = server.log_size()
    status, body = server.request('POST', f'/v2/repository/models/{case.model}/load')
    if status == 200:
        js = server.request('GET', f'/v2/models/{case.model}/config')[1]
        if unload: server.request('POST', f'/v2/repository/models/{case.model}/unload')
        return 'ok', js
    if status == 500 and 'failed to poll from model repository' in body:
        needle = f"Poll failed for model directory '{case.model}': "
        tail = server.wait_log(needle, start)
        reason = logged(tail[tail.index(needle) + len(needle):])
        if reason.startswith('failed to read text proto from'):
            lines = [l.split(PARSE_PREFIX, 1)[1] for l in tail[:tail.index(needle)].splitlines() if PARSE_PREFIX in l]
            return 'parse ' + ' ;; '.join(lines), None
        return f'poll {reason}', None
    m = LOAD_PREFIX.match(json.loads(body).get('error', '')) if status == 400 else None
    if m: return f'load {m.group(1)}', None
    return f'other {status} {body}', None


def run_corpus(server: Triton, cases) -> dict:
    """Outcome of every case. Files expected to load go in parallel (a Python stub takes ~1 s to start) and stay
    loaded: Triton 2.51 sometimes crashes (SIGSEGV) when models are unloaded while others load."""
    results, slow = {}, []
    for case in cases:
        if case.expect.startswith(('ok', 'load')) and not case.model.startswith(('ens', 'pipeline')): slow.append(case)
        else: results[case.id] = load(server, case)   # parse lines carry no model name: one at a time
    with ThreadPoolExecutor(3) as pool:
        for case, res in zip(slow, pool.map(lambda c: load(server, c, unload=False), slow)): results[case.id] = res
    if server.proc.poll() is not None:
        raise RuntimeError('tritonserver died during the corpus run:\n' + server.log()[-3000:])
    return results


ORACLE_CASES = [c for c in CASES if c.oracle]


@pytest.fixture(scope='module')
def triton(tmp_path_factory):
    oracle_or_skip()
    tmp = tmp_path_factory.mktemp('triton_config')
    write_repo(tmp / 'repo', ORACLE_CASES)
    server = Triton(tmp / 'repo')
    yield server
    server.stop()


@pytest.fixture(scope='module')
def results(triton):
    return run_corpus(triton, ORACLE_CASES)


@pytest.mark.parametrize('case', ORACLE_CASES, ids=lambda c: c.id)
def test_corpus_against_triton(case, results):
    "Triton still does what the corpus header says, and triton_mini does the same."
    got, js = results[case.id]
    assert got == case.expect, 'Triton disagrees with the recorded header (re-record?)'
    mine, my_js = outcome(case)
    assert mine == got
    if js is not None:
        assert json.loads(my_js) == json.loads(js)
        if maps_are_small(json.loads(js)): assert my_js == js


def test_index_reasons(triton, results):
    "For load-stage failures the repository index shows '<Code>: <message>' as the reason: ours."
    index = {m['name']: m for m in json.loads(triton.request('POST', '/v2/repository/index')[1])}
    checked = 0
    for case in ORACLE_CASES:
        if results[case.id][0].startswith('load '):
            assert index[case.model]['state'] == 'UNAVAILABLE'
            assert index[case.model]['reason'] == outcome(case)[0][len('load '):]
            checked += 1
    assert checked >= 5


def test_config_override_round_trip(triton):
    "Our autofilled JSON, sent as the load API's config, loads; Triton returns the same config."
    for name in ('dyn', 'prio', 'seq_oldest'):
        case = next(c for c in CASES if c.id == f'valid/{name}')
        mine = autofill_config(parse_config(case.data), case.model, backend='python').to_json()
        body = json.dumps({'parameters': {'config': mine}})
        assert triton.request('POST', f'/v2/repository/models/{case.model}/load', body)[0] == 200
        back = triton.request('GET', f'/v2/models/{case.model}/config')[1]
        triton.request('POST', f'/v2/repository/models/{case.model}/unload')
        assert json.loads(back) == json.loads(mine)


@pytest.mark.parametrize('override', [
    '{"backend":"python","inputs":[]}', '{"backend":"python","max_batch_size":"x"}',
    '{"backend":"python","input":[{"name":"I","data_type":"TYPE_FLOAT","dims":[2]}]}',
    '{"backend":"python","dynamic_batching":{},"sequence_batching":{}}', '{"backend":"python","input":[{"foo":1}]}'])
def test_config_override_errors(triton, override):
    "A bad JSON config: Triton logs 'Invalid config override: <protobuf message>'; ours is the same message."
    model = 'dyn'
    start = triton.log_size()
    status, body = triton.request('POST', f'/v2/repository/models/{model}/load', json.dumps({'parameters': {'config': override}}))
    assert status == 500
    needle = f"Poll failed for model directory '{model}': Invalid config override: "
    tail = triton.wait_log(needle, start)
    with pytest.raises(ConfigError) as info:
        ModelConfig.from_json(override)
    assert info.value.message == logged(tail[tail.index(needle) + len(needle):])


def record(stems=()):
    "Rewrite header lines 3-4 of the corpus files (all, or those named) from the real server's behaviour."
    cases = [c for c in ORACLE_CASES if not stems or c.path.stem in stems]
    with tempfile.TemporaryDirectory() as tmp:
        write_repo(Path(tmp) / 'repo', cases)
        server = Triton(Path(tmp) / 'repo')
        try:
            results = {c.id: load(server, c) for c in cases}
        finally:
            server.stop()
    odd = {k: v[0] for k, v in results.items() if '\n' in v[0] or v[0].startswith('other')}
    if odd: sys.exit(f'not recorded, unexpected outcomes: {odd}')
    for case in cases:
        got, js = results[case.id]
        lines = case.data.split(b'\n', 4)
        lines[2] = f'# expect: {got}'.encode()
        lines[3] = f'# triton-json: {js if js is not None else "-"}'.encode()
        case.path.write_bytes(b'\n'.join(lines))
        print(f'{case.id}: {got[:150]}')


if __name__ == '__main__':
    if sys.argv[1:2] != ['--record']: sys.exit('usage: python tests/test_config_oracle.py --record [file stem ...]')
    record(sys.argv[2:])
