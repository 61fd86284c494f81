"""The Python backend running real model.py files (tests/models/python_backend), in process and over HTTP.

The models are written the way Triton users write them: Triton's add_sub example, string processing on
BYTES, a model reading `parameters` from its config, BLS calls (exec, async_exec, the decoupled iterator),
a decoupled streamer, every error path of execute, auto_complete_config, initialize/finalize bookkeeping
with three named instances, Logger lines and custom metrics.

The first part runs them in triton_mini and checks results against numpy and Triton's wording (the texts
were captured from Triton 2.51). The `oracle` part serves the very same directory with the real Triton
and with triton_mini over HTTP (tritonclient.http, raw HTTP for generate_stream and /metrics) and
compares outputs, error messages, configs, log lines and metrics.
"""
import json, logging, os, re, threading, time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from triton_mini.backend import InferenceRequest
from triton_mini.cli import TritonLogFormatter
from triton_mini.metrics import MetricsCollector
from triton_mini.server import TritonServer
from triton_mini.tensors import TritonError

from triton_servers import copy_models, http, start_together, wait_until

CODES = ['UNKNOWN', 'INTERNAL', 'NOT_FOUND', 'INVALID_ARG', 'UNAVAILABLE', 'UNSUPPORTED', 'ALREADY_EXISTS', 'CANCELLED']
STATUS = {'UNKNOWN': 400, 'INTERNAL': 500, 'NOT_FOUND': 404, 'INVALID_ARG': 400, 'UNAVAILABLE': 503, 'UNSUPPORTED': 501,
          'ALREADY_EXISTS': 400, 'CANCELLED': 400}   # what Triton 2.51 answers for each code (checked against the oracle)


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    "A copy of tests/models/python_backend; both servers serve this path, so messages naming files compare equal."
    return copy_models(tmp_path_factory.mktemp('pb') / 'models', 'python_backend')


@pytest.fixture(scope='module')
def life_log(repo):
    "The file lifecycle/1/model.py appends its initialize/finalize events to (via $LIFECYCLE_LOG)."
    path, old = repo.parent / 'lifecycle_mini.jsonl', os.environ.get('LIFECYCLE_LOG')
    os.environ['LIFECYCLE_LOG'] = str(path)
    yield path
    if old is None: del os.environ['LIFECYCLE_LOG']
    else: os.environ['LIFECYCLE_LOG'] = old


@pytest.fixture(scope='module')
def server(repo, life_log):
    s = TritonServer(repo, model_control_mode='explicit', load_models=['*'])
    assert s.start() == {}
    yield s
    s.stop()


def events(path) -> list:
    return [json.loads(l) for l in Path(path).read_text().splitlines()] if Path(path).exists() else []


def line_of(repo, model, text) -> int:
    "The line number of `text` in the model's model.py (error messages cite it)."
    return next(i for i, l in enumerate((repo / model / '1' / 'model.py').read_text().splitlines(), 1) if text in l)


def failure(repo, model, what, line) -> str:
    return (f"Failed to process the request(s) for model '{model}_0', message: {what}\n\n"
            f"At:\n  {repo / model / '1' / 'model.py'}({line}): execute\n")


def collect(server, model, inputs, parameters=None) -> list:
    "Submit one request; return [(seconds since submit, response or None, final)] once the final flag came."
    got, done, t0 = [], threading.Event(), time.monotonic()
    def callback(req, resp, final):
        got.append((time.monotonic() - t0, resp, final))
        if final: done.set()
    server.submit(InferenceRequest(model, inputs, parameters=parameters or {}, response_callback=callback))
    assert done.wait(30), f'{model} never sent the final flag'
    return got


def text(values) -> np.ndarray: return np.array([v.encode() if isinstance(v, str) else v for v in values], dtype=object)


# ---------------------------------------------------------------------------------------------- plain models

def test_add_sub_matches_numpy(server):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    r = server.infer('add_sub', {'INPUT0': a, 'INPUT1': b})
    np.testing.assert_array_equal(r['OUTPUT0'], a + b)
    np.testing.assert_array_equal(r['OUTPUT1'], a - b)
    assert r['OUTPUT0'].dtype == np.float32 and list(r.outputs) == ['OUTPUT0', 'OUTPUT1']


def test_default_instance_names(server):
    "Without a name, instance group i of model m is `m_i`, and its instances `m_i_0`, `m_i_1` ... (errors has no group: `errors_0`)."
    assert [i.name for i in server.repository.get('add_sub').instances] == ['add_sub_0_0']
    assert [i.name for i in server.repository.get('errors').instances] == ['errors_0']
    assert sorted(i.name for i in server.repository.get('lifecycle').instances) == ['grp_0', 'grp_1', 'grp_2']


def test_add_sub_only_requested_outputs(server):
    x = np.ones((1, 4), np.float32)
    assert list(server.infer('add_sub', {'INPUT0': x, 'INPUT1': x}, outputs=['OUTPUT1']).outputs) == ['OUTPUT1']


def test_string_ops_on_bytes(server):
    words = ['héllo wörld', 'abc', '', '☃ snow']
    r = server.infer('string_ops', {'TEXT': text(words)})
    assert r['UPPER'].tolist() == [w.upper().encode() for w in words]
    assert r['REVERSED'].tolist() == [w[::-1].encode() for w in words]
    np.testing.assert_array_equal(r['LENGTH'], np.array([len(w) for w in words], np.int32))


def test_scaled_reads_its_config_parameters(server):
    x = np.array([[1, 2, 3], [-1, 0, 0.5]], np.float32)
    r = server.infer('scaled', {'X': x})
    np.testing.assert_allclose(r['Y'], x * 2.5 - 1)
    assert r['NOTE'].tolist() == [[b'scaled by config']] * 2
    np.testing.assert_allclose(server.infer('scaled', {'X': x}, parameters={'offset': 10})['Y'], x * 2.5 + 9)


def test_async_execute_and_bls_exec(server):
    a = np.array([1, 2, 3, 4], np.float32)
    r = server.infer('bls', {'A': a, 'MODE': np.array([0], np.int32)})
    np.testing.assert_array_equal(r['SUM'], a + 1)
    assert json.loads(r['MSG'][0]) == {'outputs': ['OUTPUT0'], 'shape': [1, 4]}
    r = server.infer('bls', {'A': a, 'MODE': np.array([1], np.int32)})      # two async_exec in flight at once
    np.testing.assert_array_equal(r['SUM'], np.concatenate([a + 1, a - 1]))
    assert server.infer('bls', {'A': a, 'MODE': np.array([8], np.int32)})['MSG'].tolist() == [b'OUTPUT0', b'OUTPUT1']
    np.testing.assert_allclose(server.infer('bls', {'A': a, 'MODE': np.array([9], np.int32)})['SUM'], a * 2.5 - 1 + 10)


BLS_ERRORS = {
    2: ["Model no_such_model - Error when running inference: Failed for execute the inference request. Model 'no_such_model' is not ready. | __ErrorCode.INTERNAL"],
    3: ["Model add_sub - Error when running inference: [request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. "
        "Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s). | __ErrorCode.INTERNAL"],
    4: ["Model add_sub - Error when running inference: Failed for execute the inference request. Model 'add_sub' is not ready. | __ErrorCode.INTERNAL"],
    14: ["Model streamer - Error when running inference: Model streamer is using the decoupled. The current BLS request call doesn't "
         "support models using the decoupled transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' "
         "calls for decoupled models.' | __ErrorCode.INTERNAL"],
}

@pytest.mark.parametrize('mode', sorted(BLS_ERRORS))
def test_bls_errors_come_back_in_the_response(server, mode):
    r = server.infer('bls', {'A': np.ones(4, np.float32), 'MODE': np.array([mode], np.int32)})
    assert [m.decode() for m in r['MSG']] == BLS_ERRORS[mode]


def test_bls_errors_of_the_callee_keep_its_message_not_its_code(server, repo):
    "An error the callee answered with has no prefix, and its code becomes INTERNAL (Triton 2.51)."
    r = server.infer('bls', {'A': np.ones(4, np.float32), 'MODE': np.array([10], np.int32)})
    raise_line = line_of(repo, 'errors', 'raise ValueError')
    assert [m.decode() for m in r['MSG']] == [
        'custom error msg | __ErrorCode.INTERNAL', 'error with code NOT_FOUND | __ErrorCode.INTERNAL',
        'error with code INVALID_ARG | __ErrorCode.INTERNAL',
        failure(repo, 'errors', 'ValueError: boom from execute', raise_line) + ' | __ErrorCode.INTERNAL']


@pytest.mark.parametrize('mode, expected', [
    (5, [b'bls #0', b'bls #1', b'bls #2', b'<final-empty>']),           # the final flag alone: one empty response
    (6, [b'async #0', b'async #2', b'<final-empty>']),                  # an error response mid-stream is dropped
    (11, [b'e #0', b'e #2', b'<final-empty>']),
    (13, [b'ERR N must not be negative | __ErrorCode.INTERNAL']),       # an error that ends the stream is kept
    (15, [b'OUTPUT0']),                                                  # not decoupled: its one response, final
])
def test_bls_decoupled_iterator(server, mode, expected):
    r = server.infer('bls', {'A': np.ones(4, np.float32), 'MODE': np.array([mode], np.int32)})
    assert r['MSG'].tolist() == expected


def test_bls_decoupled_iterator_yields_responses_as_they_arrive(server):
    "The streamer waits 200 ms between tokens: the caller must see each token when it is sent."
    r = server.infer('bls', {'A': np.ones(4, np.float32), 'MODE': np.array([7], np.int32)})
    assert r['MSG'].tolist() == [b'slow #0', b'slow #1', b'slow #2', b'<final-empty>']
    t = r['TIMES']
    assert t[0] < 100, t                       # the first token did not wait for the others
    assert t[1] - t[0] > 150 and t[2] - t[1] > 150, t


def test_bls_decoupled_callee_raising_ends_the_iterator(server, repo):
    "Triton 2.51 hangs the caller here; triton_mini ends the stream with the callee's failure."
    r = server.infer('bls', {'A': np.ones(4, np.float32), 'MODE': np.array([12], np.int32)})
    assert r['MSG'][0] == b'r #0'
    assert r['MSG'][1].decode() == 'ERR ' + failure(repo, 'streamer', 'RuntimeError: streamer failed at 1',
                                                     line_of(repo, 'streamer', 'raise RuntimeError')) + ' | __ErrorCode.INTERNAL'


@pytest.mark.oracle
def test_triton_hangs_the_bls_caller_when_a_decoupled_callee_raises(repo, real_triton):
    "The claim above, live: real Triton 2.51 leaves the caller of MODE 12 without an answer (10 s), still serving."
    import socket
    t = real_triton(repo, '--model-control-mode=explicit', '--load-model=bls', '--load-model=streamer')
    body = {'inputs': [{'name': 'A', 'datatype': 'FP32', 'shape': [4], 'data': [1, 1, 1, 1]},
                       {'name': 'MODE', 'datatype': 'INT32', 'shape': [1], 'data': [12]}]}
    with pytest.raises((socket.timeout, TimeoutError)): http(t.http_port, 'POST', '/v2/models/bls/infer', body, timeout=10)
    assert http(t.http_port, 'GET', '/v2/health/live')[0] == 200


# ------------------------------------------------------------------------------------------------ error paths

def error_cases(repo) -> dict:
    "MODE of tests/models/python_backend/errors -> (HTTP status, message) or the outputs, as Triton 2.51 answers."
    size = 'Number of InferenceResponse objects do not match the number of InferenceRequest objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:{}\n'
    fail = lambda what, line: (500, failure(repo, 'errors', what, line))
    line = lambda text_: line_of(repo, 'errors', text_)
    cases = {0: {'OUT': ([0], 'INT32')},
             1: fail('ValueError: boom from execute', line('raise ValueError')),
             2: fail('TritonModelException: model exception msg', line('raise pb_utils.TritonModelException')),
             3: (500, f"Failed to process the request(s) for model 'errors_0', message: " + size.format(0)),
             5: {'OUT': ([1.5], 'FP32')},          # the dtype is not checked against the config
             6: {'OUT': ([1, 2, 3], 'INT32')},     # nor the shape
             7: {}, 8: {},                         # undeclared outputs are dropped silently
             9: (500, 'custom error msg'),
             20: (500, f"Failed to process the request(s) for model 'errors_0', message: " + size.format(2)),
             21: {'OUT': ([21], 'INT32')}, 22: {'OUT': ([22], 'INT32')},
             24: (500, "Failed to process the request(s) for model 'errors_0', message: Expected a list in the execute return, found type '<class 'tuple'>'."),
             25: (500, "Failed to process the request(s) for model 'errors_0', message: Expected an 'InferenceResponse' object in the execute "
                       "function return list, found type '<class 'int'>'."),
             26: (500, "Failed to process the request(s) for model 'errors_0', message: Expected a list in the execute return, found type '<class 'int'>'."),
             23: fail('TritonModelException: Unable to send response. Non-decoupled model cannot send complete final before sending a response.',
                      line('else:  # the final flag without any response') + 1)}
    for i, name in enumerate(CODES): cases[10 + i] = (STATUS[name], f'error with code {name}')
    return cases


def run_errors(server, mode):
    try: r = server.infer('errors', {'MODE': np.array([mode], np.int32)})
    except TritonError as e: return e.http_status, e.message
    return {k: (v.tolist(), {'int32': 'INT32', 'float32': 'FP32'}[str(v.dtype)]) for k, v in r.outputs.items()}


@pytest.mark.parametrize('mode', [0, 1, 2, 3, 5, 6, 7, 8, 9, *range(10, 18), 20, 21, 22, 23, 24, 25, 26])
def test_errors_model(server, repo, mode):
    assert run_errors(server, mode) == error_cases(repo)[mode]


def test_execute_returning_none_fails_instead_of_hanging(server):
    "Triton 2.51 never answers this request; triton_mini fails it with an explanation."
    status, message = run_errors(server, 4)
    assert status == 500 and message.startswith("Failed to process the request(s) for model 'errors_0', message: execute() returned None")


def test_failures_are_counted_like_triton(server):
    """An exception is a failed request (reason BACKEND); an error response still counts as a success.
    A request answered through its sender (mode 21, from another test) reaches the client before `execute` returns and
    its statistics are counted; a plain request first makes the one instance finish (and count) whatever came before."""
    run_errors(server, 0)
    before = server.statistics('errors')['model_stats'][0]['inference_stats']
    run_errors(server, 1); run_errors(server, 9)
    after = server.statistics('errors')['model_stats'][0]['inference_stats']
    assert (after['fail']['count'] - before['fail']['count'], after['success']['count'] - before['success']['count']) == (1, 1)


# ------------------------------------------------------------------------------------------------- decoupled

def stream_inputs(text_, n, delay_ms=0):
    return {'TEXT': np.array([text_], dtype=object), 'N': np.array([n], np.int32), 'DELAY_MS': np.array([delay_ms], np.int32)}


def test_decoupled_responses_arrive_one_by_one(server):
    got = collect(server, 'streamer', stream_inputs(b'tok', 3, delay_ms=150))
    assert [(r.outputs['TOKEN'].tolist(), r.outputs['INDEX'].tolist(), f) for _, r, f in got[:3]] == [
        ([b'tok #0'], [0], False), ([b'tok #1'], [1], False), ([b'tok #2'], [2], False)]
    assert got[3][1:] == (None, True)                      # the final flag, alone
    times = [t for t, _, _ in got]
    assert times[1] - times[0] > 0.1 and times[2] - times[1] > 0.1, times    # not buffered until the end
    assert times[0] < times[3] - 0.25, times


def test_decoupled_error_responses_and_exceptions(server, repo):
    got = collect(server, 'streamer', stream_inputs(b'x', 3), {'fail_at': 1})
    assert [(r.error.message if r.error else r.outputs['TOKEN'][0], f) for _, r, f in got if r is not None] == [
        (b'x #0', False), ('failed at 1', False), (b'x #2', False)]
    got = collect(server, 'streamer', stream_inputs(b'x', 3), {'raise_at': 1})
    assert got[0][1].outputs['TOKEN'].tolist() == [b'x #0']
    assert (got[1][1].error.message, got[1][2], len(got)) == (
        failure(repo, 'streamer', 'RuntimeError: streamer failed at 1', line_of(repo, 'streamer', 'raise RuntimeError')), True, 2)
    got = collect(server, 'streamer', stream_inputs(b'x', -1))
    assert [(r.error.message, f) for _, r, f in got] == [('N must not be negative', True)]
    assert [(r, f) for _, r, f in collect(server, 'streamer', stream_inputs(b'x', 0))] == [(None, True)]


def test_decoupled_execute_must_return_none(server):
    got = collect(server, 'streamer', stream_inputs(b'x', 2), {'return_list': True})
    assert [(r.error.message, f) for _, r, f in got] == [
        ("Failed to process the request(s) for model 'streamer_0', message: Python model 'streamer_0' is using the decoupled mode "
         "and the execute function must return None.", True)]


def test_decoupled_model_is_refused_by_infer(server):
    with pytest.raises(TritonError, match='decoupled'):
        server.infer('streamer', stream_inputs(b'x', 1))


# ------------------------------------------------------------------------------- config, initialize, finalize

def test_auto_complete_config(server):
    cfg = json.loads(server.model_config('autocomplete').to_json())
    assert (cfg['max_batch_size'], cfg['input'][0]['name'], cfg['input'][0]['dims'], cfg['output'][0]['name']) == (4, 'IN', [2], 'OUT')
    assert cfg['dynamic_batching']['preferred_batch_size'] == [4]
    x = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_array_equal(server.infer('autocomplete', {'IN': x})['OUT'], x * 2)


def test_initialize_args(server, repo, life_log):
    inits = [e for e in events(life_log) if e['event'] == 'initialize']
    assert sorted(e['args']['model_instance_name'] for e in inits) == ['grp_0', 'grp_1', 'grp_2']   # <group name>_<index>
    args = inits[0]['args']
    assert sorted(args) == ['model_config', 'model_instance_device_id', 'model_instance_kind', 'model_instance_name',
                            'model_name', 'model_repository', 'model_version']
    assert all(isinstance(v, str) for v in args.values())
    assert {k: v for k, v in args.items() if k not in ('model_config', 'model_instance_name')} == {
        'model_instance_device_id': '0', 'model_instance_kind': 'CPU', 'model_name': 'lifecycle',
        'model_repository': str(repo / 'lifecycle'), 'model_version': '1'}
    assert args['model_config'] == server.model_config('lifecycle').to_json()   # the complete config, as GET /config returns it
    assert {e['model_dir'] for e in inits} == {str(repo / 'lifecycle' / '1')}    # pb_utils.get_model_dir(): the version folder
    r = server.infer('lifecycle', {'X': np.array([1], np.int32)})
    assert json.loads(r['ARGS'][0])['model_name'] == 'lifecycle' and r['MODEL_DIR'][0].decode() == str(repo / 'lifecycle' / '1')


def test_finalize_runs_on_unload(server, life_log):
    before = len([e for e in events(life_log) if e['event'] == 'finalize'])
    server.unload_model('lifecycle')
    server.repository.wait_for_unloads()
    finals = [e['instance'] for e in events(life_log) if e['event'] == 'finalize'][before:]
    assert sorted(finals) == ['grp_0', 'grp_1', 'grp_2']
    server.load_model('lifecycle')
    assert server.model_ready('lifecycle')


# ---------------------------------------------------------------------------------------- logging and metrics

def test_logger_lines(server, repo, caplog):
    caplog.set_level(5, logger='triton_mini.model')
    server.infer('telemetry', {'X': np.array([0.5], np.float32)})
    fmt = TritonLogFormatter()
    lines = [re.sub(r'^(\w)\d{4} [\d:.]+ \d+ ', r'\1 ', fmt.format(r)) for r in caplog.records if r.name == 'triton_mini.model']
    line = lambda s: line_of(repo, 'telemetry', s)
    assert lines == [f'I model.py:{line("info from model x=")}] "info from model x=0.5"',
                     f'W model.py:{line("log_warn(")}] "warning from model"',
                     f'E model.py:{line("log_error(")}] "error from model"',
                     f'I model.py:{line("log_verbose(")}] "verbose from model"',
                     f'I model.py:{line("Logger.log(")}] "plain log call"']


def metric_lines(text_, prefix='telemetry_') -> list:
    return [l for l in text_.splitlines() if l.startswith(prefix) or l.startswith(f'# HELP {prefix}') or l.startswith(f'# TYPE {prefix}')]


def test_custom_metrics_reach_the_server(repo, life_log):
    s = TritonServer(repo, model_control_mode='explicit', load_models=['telemetry'])
    s.start()
    try:
        for x in (0.5, 5.0, 50.0): s.infer('telemetry', {'X': np.array([x], np.float32)})
        assert metric_lines(MetricsCollector(s).render()) == [
            '# HELP telemetry_requests_total requests seen by the model', '# TYPE telemetry_requests_total counter',
            'telemetry_requests_total{model="telemetry",version="1"} 3',
            '# HELP telemetry_last_value last input value', '# TYPE telemetry_last_value gauge',
            'telemetry_last_value{kind="input"} 50',
            '# HELP telemetry_values input values', '# TYPE telemetry_values histogram',
            'telemetry_values_count{kind="input"} 3', 'telemetry_values_sum{kind="input"} 55.5',
            'telemetry_values_bucket{kind="input",le="1"} 1', 'telemetry_values_bucket{kind="input",le="10"} 2',
            'telemetry_values_bucket{kind="input",le="+Inf"} 3']
        before = metric_lines(MetricsCollector(s).render())
        s.unload_model('telemetry'); s.repository.wait_for_unloads()
        assert metric_lines(MetricsCollector(s).render()) == before    # the families outlive the model, as in Triton
        s.load_model('telemetry')
        s.infer('telemetry', {'X': np.array([1.0], np.float32)})
        lines = metric_lines(MetricsCollector(s).render())             # a reloaded model continues the same series
        assert 'telemetry_requests_total{model="telemetry",version="1"} 4' in lines
        assert 'telemetry_values_count{kind="input"} 4' in lines and 'telemetry_values_bucket{kind="input",le="1"} 2' in lines
    finally: s.stop()


# =============================================================================== the same files on real Triton

@pytest.fixture(scope='module')
def both(repo, server, launch_module):
    "The real Triton and triton_mini (HTTP), serving the same directory in explicit mode with every model loaded."
    real, mini = start_together(
        lambda: launch_module.real_triton(repo, '--model-control-mode=explicit', '--load-model=*', env={'LIFECYCLE_LOG': str(repo.parent / 'lifecycle_real.jsonl')}),
        lambda: launch_module.mini(repo, model_control_mode='explicit', load_models=['*']))
    return {'real': real, 'mini': mini}


def client_infer(port, model, inputs, parameters=None, outputs=None):
    "tritonclient.http infer: ('ok', {name: (values, datatype, shape)}) or ('error', status, message)."
    c = httpclient.InferenceServerClient(f'127.0.0.1:{port}', network_timeout=60)
    ins = []
    for name, a in inputs.items():
        i = httpclient.InferInput(name, list(a.shape), {'object': 'BYTES', 'float32': 'FP32', 'int32': 'INT32'}[str(a.dtype)])
        i.set_data_from_numpy(a)
        ins.append(i)
    outs = [httpclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    try: r = c.infer(model, ins, parameters=parameters, outputs=outs)
    except InferenceServerException as e: return ('error', e.status(), e.message())
    finally: c.close()
    return ('ok', {o['name']: (r.as_numpy(o['name']).tolist(), o['datatype'], o['shape']) for o in r.get_response()['outputs']})


A = np.array([1, 2, 3, 4], np.float32)
ORACLE_CASES = [
    ('add_sub', {'INPUT0': np.arange(8, dtype=np.float32).reshape(2, 4), 'INPUT1': np.ones((2, 4), np.float32)}, None),
    ('string_ops', {'TEXT': text(['héllo wörld', 'abc', '☃'])}, None),
    ('scaled', {'X': np.array([[1, 2], [3, 4]], np.float32)}, None),
    ('scaled', {'X': np.array([[1, 2]], np.float32)}, {'offset': 10}),
    ('autocomplete', {'IN': np.array([[1, 2]], np.float32)}, None),
    *[('errors', {'MODE': np.array([m], np.int32)}, None) for m in [0, 1, 2, 3, 5, 6, 7, 8, 9, *range(10, 18), 20, 21, 22, 23, 24, 25, 26]],
    *[('bls', {'A': A, 'MODE': np.array([m], np.int32)}, None) for m in [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15]],
    ('streamer', {'TEXT': text(['x']), 'N': np.array([1], np.int32)}, None),    # decoupled over /infer: refused
    ('nope', {'X': A}, None),
]

@pytest.mark.oracle
@pytest.mark.parametrize('case', ORACLE_CASES, ids=lambda c: f"{c[0]}-{list(c[1].values())[-1].ravel()[0]}")
def test_same_answers_as_triton(both, case):
    model, inputs, params = case
    real, mini = (client_infer(both[k].http_port, model, inputs, params) for k in ('real', 'mini'))
    if model == 'bls' and real[0] == 'ok': real[1].pop('TIMES'); mini[1].pop('TIMES')   # arrival times differ, of course
    assert mini == real


@pytest.mark.oracle
def test_bls_decoupled_iterator_streams_like_triton(both):
    for k in ('real', 'mini'):
        status, got = client_infer(both[k].http_port, 'bls', {'A': A, 'MODE': np.array([7], np.int32)})
        times = got['TIMES'][0]
        assert times[1] - times[0] > 150 and times[2] - times[1] > 150, (k, times)


STREAM_CASES = [({'TEXT': 'x', 'N': 3}, False), ({'TEXT': 'x', 'N': 0}, False),
                ({'TEXT': 'x', 'N': 3, 'parameters': {'fail_at': 1}}, False),
                ({'TEXT': 'x', 'N': 3, 'parameters': {'raise_at': 1}}, False),
                ({'TEXT': 'x', 'N': 3, 'parameters': {'raise_at': 0}}, True),
                ({'TEXT': 'x', 'N': 3, 'parameters': {'return_list': True}}, True),
                ({'TEXT': 'x', 'N': -1}, True)]

@pytest.mark.oracle
@pytest.mark.parametrize('body, first_is_error', STREAM_CASES, ids=[json.dumps(b) for b, _ in STREAM_CASES])
def test_generate_stream_like_triton(both, body, first_is_error):
    real, mini = (http(both[k].http_port, 'POST', '/v2/models/streamer/generate_stream', body) for k in ('real', 'mini'))
    assert mini[2] == real[2]                     # the same events, word for word
    assert mini[:2] == real[:2]                   # and status (400 when the first response is an error, whatever its code)


@pytest.mark.oracle
@pytest.mark.parametrize('model', ['add_sub', 'autocomplete', 'lifecycle', 'streamer', 'scaled', 'bls'])
def test_configs_like_triton(both, model):
    real, mini = (json.loads(http(both[k].http_port, 'GET', f'/v2/models/{model}/config')[2]) for k in ('real', 'mini'))
    assert mini == real


@pytest.mark.oracle
def test_initialize_args_like_triton(both, repo):
    real = [e for e in events(repo.parent / 'lifecycle_real.jsonl') if e['event'] == 'initialize']
    mini_args = json.loads(client_infer(both['mini'].http_port, 'lifecycle', {'X': np.array([1], np.int32)})[1]['ARGS'][0][0])
    assert sorted(e['args']['model_instance_name'] for e in real) == ['grp_0', 'grp_1', 'grp_2']
    strip = lambda a: {k: v for k, v in a.items() if k != 'model_instance_name'}
    assert strip(mini_args) == strip(real[0]['args'])
    assert {e['model_dir'] for e in real} == {str(repo / 'lifecycle' / '1')}


@pytest.mark.oracle
def test_logger_lines_like_triton(both, repo, caplog):
    caplog.set_level(5, logger='triton_mini.model')
    for k in ('real', 'mini'): client_infer(both[k].http_port, 'telemetry', {'X': np.array([0.5], np.float32)})
    fmt = TritonLogFormatter()
    mini = [re.sub(r'^(\w)\d{4} [\d:.]+ \d+ ', r'\1 ', fmt.format(r)) for r in caplog.records if 'from model' in r.getMessage()]
    real_lines = [l for l in both['real'].log().splitlines() if 'model.py:' in l and 'from model' in l]
    real = [re.sub(r'^(\w)\d{4} [\d:.]+ \d+ ', r'\1 ', l) for l in real_lines]
    assert [l for l in mini if 'verbose' not in l] == real     # the oracle runs without --log-verbose


@pytest.mark.oracle
def test_custom_metrics_like_triton(both):
    for k in ('real', 'mini'):
        for x in (2.0, 20.0): client_infer(both[k].http_port, 'telemetry', {'X': np.array([x], np.float32)})
    real, mini = (metric_lines(http(both[k].metrics_port, 'GET', '/metrics')[2]) for k in ('real', 'mini'))
    assert mini == real and 'telemetry_last_value{kind="input"} 20' in mini


@pytest.mark.oracle
def test_unload_runs_finalize_and_keeps_metrics_like_triton(both, repo):
    for k in ('real', 'mini'):
        assert http(both[k].http_port, 'POST', '/v2/repository/models/lifecycle/unload')[0] == 200
        assert http(both[k].http_port, 'POST', '/v2/repository/models/telemetry/unload')[0] == 200
    unloaded = lambda k: all(e.get('state') == 'UNAVAILABLE' for e in json.loads(http(both[k].http_port, 'POST', '/v2/repository/index')[2])
                             if e['name'] in ('lifecycle', 'telemetry'))
    for k in ('real', 'mini'): wait_until(lambda: unloaded(k), 30, f'{k}: lifecycle and telemetry unloaded')
    finals = [e['instance'] for e in events(repo.parent / 'lifecycle_real.jsonl') if e['event'] == 'finalize']
    assert sorted(finals) == ['grp_0', 'grp_1', 'grp_2']
    real, mini = (metric_lines(http(both[k].metrics_port, 'GET', '/metrics')[2]) for k in ('real', 'mini'))
    assert mini == real and len(mini) == 13     # still there after the unload
    for k in ('real', 'mini'):
        assert http(both[k].http_port, 'POST', '/v2/repository/models/telemetry/load')[0] == 200
        client_infer(both[k].http_port, 'telemetry', {'X': np.array([4.0], np.float32)})
    real, mini = (metric_lines(http(both[k].metrics_port, 'GET', '/metrics')[2]) for k in ('real', 'mini'))
    assert mini == real and 'telemetry_requests_total{model="telemetry",version="1"} 4' in mini
