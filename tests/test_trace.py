"""The trace extension (07b_trace): settings with Triton's validation, sampling by rate and count, the trace file;
then the same settings requests, flags and traced requests against the real Triton 2.51 (`oracle`)."""
import json, time
from pathlib import Path

import numpy as np
import pytest

from triton_mini.errors import TritonError
from triton_mini.server import TritonServer
from triton_mini.trace import TraceManager, TraceSetting, parse_trace_update
from triton_servers import copy_models, request, start_together

grpcclient = pytest.importorskip('tritonclient.grpc')

X4 = np.array([[1, 2, 3, 4]], np.float32)
ADD_SUB = {'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                      {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]}
ENS = {'inputs': [{'name': 'X', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}]}
CORE = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']
SERVED = [*CORE[:-1], 'INFER_RESPONSE_COMPLETE', 'REQUEST_END']   # a front end's request: Triton's front ends add the response event


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    return copy_models(tmp_path_factory.mktemp('trace') / 'models', 'conformance/add_sub', 'conformance/ens',
                       'conformance/step_a', 'conformance/step_b', 'conformance/step_c')


def traces(path) -> dict:
    "A trace file as {trace id: {'info': the model object, 'names': [timestamp names in file order], 'ns': [...]}}."
    out = {}
    for o in json.loads(Path(path).read_text()):
        t = out.setdefault(o['id'], {'info': None, 'names': [], 'ns': []})
        if 'timestamps' in o:
            t['names'].append(o['timestamps'][0]['name']); t['ns'].append(o['timestamps'][0]['ns'])
        else: t['info'] = o
    return out


# ------------------------------------------------------------------------------------------------- settings, no server
@pytest.mark.parametrize('doc, grpc, error', [
    ({'trace_file': '/tmp/x'}, False, ('trace file location can not be updated through network protocol', 'UNSUPPORTED')),
    ({'trace_file': []}, True, ('trace file location can not be updated through network protocol', 'UNSUPPORTED')),
    ({'log_frequency': 2}, False, ('attempt to access JSON non-string as string', 'INTERNAL')),
    ({'trace_level': 'TIMESTAMPS'}, False, ('attempt to access JSON non-array as array', 'INTERNAL')),
    ({'trace_level': ['OFF', 'TIMESTAMPS']}, False, ("Expect only one trace level 'OFF' is specified", 'INVALID_ARG')),
    ({'trace_rate': 'abc'}, False, ("Unable to parse 'trace_rate', got: abc", 'INVALID_ARG')),
    ({'trace_rate': '99999999999'}, False, ("Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999", 'INVALID_ARG')),
    ({'trace_count': ['99999999999']}, True, ("Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 99999999999", 'INVALID_ARG')),
    ({'trace_count': '-2'}, False, ("Unable to parse 'trace_count'. Expecting value >= -1, got:-2", 'INVALID_ARG')),
    ({'trace_count': ['-2']}, True, ("Unable to parse 'trace_count'. Expecting value >= -1, got: -2", 'INVALID_ARG')),
    ({'log_frequency': ['1', '2']}, True, ("expect only 1 value for 'log_frequency'", 'INVALID_ARG')),
])
def test_bad_settings_get_tritons_errors(doc, grpc, error):
    with pytest.raises(TritonError) as e: parse_trace_update(doc, grpc)
    assert (e.value.message, e.value.code) == error


def test_settings_read_numbers_like_stoi_and_skip_unknown_names():
    assert parse_trace_update({'trace_rate': ' 3x', 'log_frequency': '-1', 'trace_level': ['FOO'], 'foo': '1'}) == \
        {'rate': 3, 'log_frequency': 4294967295}
    tm = TraceManager(TraceSetting(level=('TIMESTAMPS',), file='/tmp/t.json'))
    with pytest.raises(TritonError, match='sample rate must be non-zero'): tm.update(None, parse_trace_update({'trace_rate': '0'}))
    assert tm.get().rate == 1000                                      # a refused update changes nothing
    assert TraceManager().update(None, {'rate': 0}).rate == 0         # tracing OFF: Triton checks nothing (2.51)


def test_model_overrides_follow_and_fall_back_to_the_global_setting():
    tm = TraceManager(TraceSetting(level=('TIMESTAMPS',), rate=1, file='t.json'))
    tm.update('m', {'rate': 5, 'level': ('TENSORS',)})
    tm.update(None, {'count': 7, 'rate': 2})
    assert tm.get('m').to_json() == {'trace_level': ['TENSORS'], 'trace_rate': '5', 'trace_count': '7', 'log_frequency': '0',
                                          'trace_file': 't.json', 'trace_mode': 'triton'}
    assert tm.update('m', {'rate': None}).rate == 2                   # null: the global value
    assert tm.update(None, {'rate': None}).rate == 1                  # global null: the value the server started with
    assert tm.get('m').rate == 1


# ------------------------------------------------------------------------------------------------- a server in process
def test_tracing_off_costs_one_check(repo):
    server = TritonServer(repo, model_control_mode='explicit', load_models=['add_sub'])
    server.start()
    try:
        from triton_mini.backend import InferenceRequest
        from triton_mini.scheduler import ResponseWaiter
        w = ResponseWaiter()
        req = InferenceRequest('add_sub', {'INPUT0': X4, 'INPUT1': X4}, response_callback=w)
        server.submit(req)
        w.wait(10)
        assert server._traces is None and req.trace is None and req.response_callback is w   # nothing wrapped, nothing made
        assert server.trace_setting().to_json()['trace_level'] == ['OFF']
    finally: server.stop()


def test_rate_and_count_pick_the_traced_requests(repo, tmp_path):
    server = TritonServer(repo, model_control_mode='explicit', load_models=['add_sub'])
    server.configure_tracing(TraceSetting(level=('TIMESTAMPS',), rate=2, count=2, file=str(tmp_path / 'trace.json')))
    server.start()
    for i in range(7): server.infer('add_sub', {'INPUT0': X4, 'INPUT1': X4}, id=f'r{i}')
    assert server.trace_setting().to_json()['trace_count'] == '0'
    server.stop()
    written = traces(tmp_path / 'trace.json')
    assert [t['info']['request_id'] for t in written.values()] == ['r1', 'r3']     # every 2nd, then the count ran out
    for t in written.values():
        assert t['names'] == CORE
        assert t['ns'] == sorted(t['ns'])                                              # the timestamps happened in this order
        assert t['info'] | {'request_id': ''} == {'id': t['info']['id'], 'model_name': 'add_sub', 'model_version': 1, 'request_id': ''}


def test_log_frequency_writes_numbered_files(repo, tmp_path):
    server = TritonServer(repo, model_control_mode='explicit', load_models=['add_sub'])
    server.configure_tracing(TraceSetting(level=('TIMESTAMPS',), rate=1, log_frequency=2, file=str(tmp_path / 't.json')))
    server.start()
    for i in range(5): server.infer('add_sub', {'INPUT0': X4, 'INPUT1': X4})
    assert sorted(p.name for p in tmp_path.iterdir()) == ['t.json.0', 't.json.1']     # 2 and 2; the 5th waits for the exit
    server.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['t.json', 't.json.0', 't.json.1']
    assert [len(traces(tmp_path / n)) for n in ('t.json.0', 't.json.1', 't.json')] == [2, 2, 1]


def test_front_ends_and_ensembles_add_their_timestamps(repo, tmp_path, launch):
    mini = launch.mini(repo, grpc=True, model_control_mode='explicit', load_models=['add_sub', 'ens'])
    mini.server.configure_tracing(TraceSetting(level=('TIMESTAMPS',), rate=1, file=str(tmp_path / 'trace.json')))
    assert request(mini.http_port, 'POST', '/v2/models/add_sub/infer', {**ADD_SUB, 'id': 'h'})[0] == 200
    assert request(mini.http_port, 'POST', '/v2/models/ens/infer', {**ENS, 'id': 'e'})[0] == 200
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{mini.grpc_port}')
    inputs = [grpcclient.InferInput(n, [1, 4], 'FP32') for n in ('INPUT0', 'INPUT1')]
    for i in inputs: i.set_data_from_numpy(X4)
    client.infer('add_sub', inputs, request_id='g')
    client.close()
    mini.stop()
    written = traces(tmp_path / 'trace.json')
    by_request = {(t['info']['request_id'], t['info']['model_name']): t for t in written.values()}
    assert by_request['h', 'add_sub']['names'] == ['HTTP_RECV_START', 'HTTP_RECV_END', *SERVED, 'HTTP_SEND_START', 'HTTP_SEND_END']
    assert by_request['g', 'add_sub']['names'] == ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END', *SERVED, 'GRPC_SEND_START', 'GRPC_SEND_END']
    parent = by_request['e', 'ens']
    assert parent['names'] == ['HTTP_RECV_START', 'HTTP_RECV_END', 'REQUEST_START', 'QUEUE_START', 'INFER_RESPONSE_COMPLETE',
                               'REQUEST_END', 'HTTP_SEND_START', 'HTTP_SEND_END']
    steps = [t for (rid, model), t in by_request.items() if rid == 'e' and model != 'ens']
    assert sorted(t['info']['model_name'] for t in steps) == ['step_a', 'step_b', 'step_c']
    assert {t['info']['parent_id'] for t in steps} == {parent['info']['id']}
    assert 'parent_id' not in parent['info']


def test_settings_endpoints_in_process(repo, launch):
    mini = launch.mini(repo, grpc=True, model_control_mode='explicit', load_models=['add_sub'])
    assert json.loads(request(mini.http_port, 'POST', '/v2/trace/setting', {'trace_level': ['TIMESTAMPS']})[2]) == \
        {'error': 'Attempting to set invalid trace setting :trace file name is not given'}
    mini.server.configure_tracing(TraceSetting(file='/nonexistent/trace.json'))      # what --trace-config triton,file= does
    s, _, b = request(mini.http_port, 'POST', '/v2/models/add_sub/trace/setting', {'trace_rate': '5', 'trace_level': ['TIMESTAMPS']})
    assert (s, json.loads(b)['trace_rate']) == (200, '5')
    assert json.loads(request(mini.http_port, 'GET', '/v2/trace/setting')[2])['trace_rate'] == '1000'
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{mini.grpc_port}')
    got = client.get_trace_settings(model_name='add_sub', as_json=True)['settings']
    assert (got['trace_rate']['value'], got['trace_level']['value']) == (['5'], ['TIMESTAMPS'])
    got = client.update_trace_settings(model_name='add_sub', settings={'trace_rate': None}, as_json=True)['settings']
    assert got['trace_rate']['value'] == ['1000']
    client.close()


# ------------------------------------------------------------------------------------------------- the oracle
TRACE_FLAGS = ('--trace-config', 'level=TIMESTAMPS', '--trace-config', 'rate=1', '--trace-config', 'triton,log-frequency=0')

HTTP_PROBES = [   # in order: each one changes what the next ones see
    ('GET', '/v2/trace/setting', None), ('GET', '/v2/models/add_sub/trace/setting', None),
    ('POST', '/v2/trace/setting', {'log_frequency': '2'}), ('POST', '/v2/trace/setting', {'log_frequency': 2}),
    ('POST', '/v2/trace/setting', {'trace_rate': 'abc'}), ('POST', '/v2/trace/setting', {'trace_rate': '0'}),
    ('POST', '/v2/trace/setting', {'trace_rate': '-1'}), ('POST', '/v2/trace/setting', {'trace_rate': ' 3x'}),
    ('POST', '/v2/trace/setting', {'trace_rate': '99999999999'}), ('POST', '/v2/trace/setting', {'trace_count': '-2'}),
    ('POST', '/v2/trace/setting', {'trace_count': 'x'}), ('POST', '/v2/trace/setting', {'log_frequency': 'x'}),
    ('POST', '/v2/trace/setting', {'trace_level': 'TIMESTAMPS'}), ('POST', '/v2/trace/setting', {'trace_level': ['FOO']}),
    ('POST', '/v2/trace/setting', {'trace_level': ['OFF', 'TIMESTAMPS']}), ('POST', '/v2/trace/setting', {'trace_level': []}),
    ('POST', '/v2/trace/setting', {'trace_level': ['TENSORS', 'TIMESTAMPS']}), ('POST', '/v2/trace/setting', {'trace_level': ['OFF']}),
    ('POST', '/v2/trace/setting', {'trace_level': None, 'trace_rate': None}),
    ('POST', '/v2/trace/setting', {'trace_file': '/tmp/x.json'}), ('POST', '/v2/trace/setting', {'foo': '1'}),
    ('POST', '/v2/trace/setting', b'notjson'), ('POST', '/v2/trace/setting', []), ('POST', '/v2/trace/setting', {}),
    ('POST', '/v2/models/add_sub/trace/setting', {'trace_rate': '5', 'trace_level': ['TENSORS']}),
    ('POST', '/v2/trace/setting', {'trace_count': '7'}), ('GET', '/v2/models/add_sub/trace/setting', None),
    ('POST', '/v2/models/add_sub/trace/setting', {'trace_rate': None}),
    ('POST', '/v2/models/add_sub/trace/setting', {'trace_level': None, 'trace_count': None}),
    ('POST', '/v2/models/add_sub/trace/setting', {'trace_file': 'y'}),
    ('POST', '/v2/trace/setting', {'trace_level': ['OFF'], 'trace_rate': '0'}), ('POST', '/v2/trace/setting', {'trace_count': '2'}),
    ('POST', '/v2/trace/setting', {'trace_level': ['TIMESTAMPS']}), ('POST', '/v2/models/add_sub/trace/setting', {'trace_level': ['TENSORS']}),
    ('POST', '/v2/trace/setting', {'trace_level': ['TIMESTAMPS'], 'trace_rate': '4'}),
    ('GET', '/v2/models/nope/trace/setting', None), ('POST', '/v2/models/nope/trace/setting', {}),
    ('GET', '/v2/models/add_sub/versions/1/trace/setting', None), ('PUT', '/v2/trace/setting', None),
    ('GET', '/v2', None),
]


def _answer(port, method, path, body, trace_dir):
    s, _, b = request(port, method, path, b'' if body is None else body)
    text = b.decode().replace(str(trace_dir), '<dir>')
    doc = json.loads(text) if text else None
    if path == '/v2' and doc: doc = doc['extensions']
    return s, doc


@pytest.mark.oracle
def test_settings_over_http_match_triton(repo, tmp_path, launch):
    dirs = [tmp_path / 'mini', tmp_path / 'real']
    for d in dirs: d.mkdir()
    mini, real = start_together(
        lambda: launch.mini_process(repo, *TRACE_FLAGS, '--trace-config', f'triton,file={dirs[0]}/trace.json', grpc=False, metrics=False),
        lambda: launch.real_triton(repo, *TRACE_FLAGS, '--trace-config', f'triton,file={dirs[1]}/trace.json', grpc=False, metrics=False))
    differences = []
    for method, path, body in HTTP_PROBES:
        ours, theirs = _answer(mini.http_port, method, path, body, dirs[0]), _answer(real.http_port, method, path, body, dirs[1])
        if ours != theirs: differences.append(f'{method} {path} {body!r}:\n  triton-mini: {ours}\n  real Triton: {theirs}')
    assert not differences, '\n'.join(differences)


GRPC_PROBES = [
    ('', None), ('add_sub', None), ('', {'trace_rate': '7'}), ('', {'trace_rate': 'abc'}), ('', {'trace_rate': '0'}),
    ('', {'trace_count': '-2'}), ('', {'trace_file': 'x'}), ('', {'trace_file': None}), ('', {'trace_level': ['OFF', 'TIMESTAMPS']}),
    ('', {'trace_level': 'FOO'}), ('', {'trace_rate': None}), ('', {'trace_rate': '99999999999'}), ('', {'trace_count': '99999999999'}),
    ('', {'log_frequency': '99999999999'}), ('', {'log_frequency': 'x'}), ('', {'foo': '1'}), ('', {'trace_rate': ['1', '2']}),
    ('', {'trace_count': ['1', '2']}), ('nope', {}), ('nope', None), ('', {'trace_rate': '-1'}),
    ('add_sub', {'trace_rate': '9', 'trace_level': ['TENSORS']}), ('add_sub', {'trace_rate': None}), ('add_sub', None),
]


def _grpc_answer(port, model, settings, trace_dir):
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{port}')
    try:
        if settings is None: got = client.get_trace_settings(model_name=model, as_json=True)
        else: got = client.update_trace_settings(model_name=model, settings=settings, as_json=True)
        return 'OK', {k: [x.replace(str(trace_dir), '<dir>') for x in v.get('value', [])] for k, v in got['settings'].items()}
    except grpcclient.InferenceServerException as e: return str(e.status()), e.message()
    finally: client.close()


@pytest.mark.oracle
def test_settings_over_grpc_match_triton(repo, tmp_path, launch):
    dirs = [tmp_path / 'mini', tmp_path / 'real']
    for d in dirs: d.mkdir()
    mini, real = start_together(
        lambda: launch.mini_process(repo, *TRACE_FLAGS, '--trace-config', f'triton,file={dirs[0]}/trace.json', metrics=False),
        lambda: launch.real_triton(repo, *TRACE_FLAGS, '--trace-config', f'triton,file={dirs[1]}/trace.json', metrics=False))
    differences = []
    for model, settings in GRPC_PROBES:
        ours, theirs = _grpc_answer(mini.grpc_port, model, settings, dirs[0]), _grpc_answer(real.grpc_port, model, settings, dirs[1])
        if ours != theirs: differences.append(f'{model!r} {settings!r}:\n  triton-mini: {ours}\n  real Triton: {theirs}')
    assert not differences, '\n'.join(differences)


@pytest.mark.oracle
def test_trace_files_match_tritons(repo, tmp_path, launch):
    "The same requests traced by both: the same traces, model objects and timestamp names (their order may differ)."
    dirs = [tmp_path / 'mini', tmp_path / 'real']
    for d in dirs: d.mkdir()
    flags = ('--trace-config', 'level=TIMESTAMPS', '--trace-config', 'rate=2', '--trace-config', 'count=3')
    servers = start_together(
        lambda: launch.mini_process(repo, *flags, '--trace-config', f'triton,file={dirs[0]}/trace.json', metrics=False),
        lambda: launch.real_triton(repo, *flags, '--trace-config', f'triton,file={dirs[1]}/trace.json', metrics=False))
    for server in servers:
        for i in range(4): assert request(server.http_port, 'POST', '/v2/models/add_sub/infer', {**ADD_SUB, 'id': f'h{i}'})[0] == 200
        assert request(server.http_port, 'POST', '/v2/models/ens/infer', {**ENS, 'id': 'e'})[0] == 200
        assert request(server.http_port, 'POST', '/v2/models/ens/infer', {**ENS, 'id': 'e2'})[0] == 200   # the count ran out
        client = grpcclient.InferenceServerClient(f'127.0.0.1:{server.grpc_port}')
        inputs = [grpcclient.InferInput(n, [1, 4], 'FP32') for n in ('INPUT0', 'INPUT1')]
        for x in inputs: x.set_data_from_numpy(X4)
        client.infer('add_sub', inputs, request_id='g')
        client.close()
        server.stop()
    ours, theirs = (traces(d / 'trace.json') for d in dirs)
    def shape(written):
        ids = {i: n for n, i in enumerate(sorted(written))}     # ids renumbered from 0 in order
        return sorted((json.dumps({**t['info'], 'id': ids[t['info']['id']],
                                   **({'parent_id': ids[t['info']['parent_id']]} if 'parent_id' in t['info'] else {})}, sort_keys=True),
                       tuple(sorted(t['names']))) for t in written.values())
    assert shape(ours) == shape(theirs)


DECOUPLED = '''
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            s, x = r.get_response_sender(), pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            for i in range(3): s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x + i)]))
            s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


@pytest.mark.oracle
def test_stream_traces_match_tritons(repo, tmp_path, launch):
    """A decoupled model's request over a gRPC stream (three responses, then the final flag as an empty response), and
    add_sub over the same stream: Triton writes one INFER_RESPONSE_COMPLETE, a GRPC_SEND pair per message, the
    COMPUTE_* of `execute` and REQUEST_END after them (not at the final flag, which comes first)."""
    import queue
    models = tmp_path / 'models'
    copy_models(models, 'conformance/add_sub')
    (models / 'dec' / '1').mkdir(parents=True)
    (models / 'dec' / '1' / 'model.py').write_text(DECOUPLED)
    (models / 'dec' / 'config.pbtxt').write_text('backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
                                                 'input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
                                                 'output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]\n')
    dirs = [tmp_path / 'mini', tmp_path / 'real']
    for d in dirs: d.mkdir()
    flags = ('--trace-config', 'level=TIMESTAMPS', '--trace-config', 'rate=1')
    servers = start_together(
        lambda: launch.mini_process(models, *flags, '--trace-config', f'triton,file={dirs[0]}/trace.json', metrics=False),
        lambda: launch.real_triton(models, *flags, '--trace-config', f'triton,file={dirs[1]}/trace.json', metrics=False))
    for server in servers:
        got = queue.Queue()
        client = grpcclient.InferenceServerClient(f'127.0.0.1:{server.grpc_port}')
        client.start_stream(callback=lambda result, error: got.put(error or result))
        x = grpcclient.InferInput('IN', [1], 'FP32'); x.set_data_from_numpy(np.array([1], np.float32))
        client.async_stream_infer('dec', [x], request_id='d', enable_empty_final_response=True)
        answers = [got.get(timeout=30) for _ in range(4)]
        inputs = [grpcclient.InferInput(n, [1, 4], 'FP32') for n in ('INPUT0', 'INPUT1')]
        for i in inputs: i.set_data_from_numpy(X4)
        client.async_stream_infer('add_sub', inputs, request_id='a')
        answers.append(got.get(timeout=30))
        client.stop_stream(); client.close()
        assert not [a for a in answers if isinstance(a, Exception)], answers
        server.stop()
    ours, theirs = (traces(d / 'trace.json') for d in dirs)
    by_request = lambda written: {t['info']['request_id']: (t['info']['model_name'], sorted(t['names'])) for t in written.values()}
    assert by_request(ours) == by_request(theirs)
    dec = by_request(ours)['d'][1]
    assert dec.count('GRPC_SEND_START') == 4 and dec.count('INFER_RESPONSE_COMPLETE') == 1 and 'COMPUTE_END' in dec
