"""Layer 6 under real concurrency: ensembles through `TritonServer` (issue 4, Layer 6).

Python step models (tests/model_factory.py STEP: add1 / mul2 / sum / addv, sleeping to simulate work, logging every
execute with wall-clock start and end) composed into the spec's diamond `ens` (step_c listed first), `ens_simple`
(outputs produced out of config order), a nested ensemble, an ensemble over a dynamically batched step, versioned
steps and failing steps. Validation: every message of /work/shared/spec/ensembles.md §4, poll-stage ones through the
load error + log line + repository index, load-stage ones through explicit-mode `load_model`.

Tests marked `oracle` run the same repositories on the real Triton 2.51 and compare messages and outputs; they are
skipped when the oracle is absent (env TRITON_ORACLE or <repo>/../shared/oracle/real-triton).
"""
import json, logging, re, sys, time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from model_factory import (RECORDER, STEP, TWO_OUTPUTS, ExecutionProbe,  # noqa: E402
                           clear_executions, ensemble_config, http_call, http_infer, io, read_executions, run_threads,
                           step_config, write_model)
from triton_servers import MiniTriton, RealTriton, http, oracle_or_skip, reached, settled  # noqa: E402
from triton_mini.backend import InferenceRequest  # noqa: E402
from triton_mini.scheduler import ResponseWaiter  # noqa: E402
from triton_mini.server import TritonServer  # noqa: E402
from triton_mini.tensors import TritonError  # noqa: E402

STEP_S = 0.2   # each diamond step sleeps this long
QSTEP_MS = 2000   # qstep: one instance, one request per batch, 2 s each; its queue policy lets a request set a timeout
QUEUE_POLICY = ('dynamic_batching { default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000 '
                'allow_timeout_override: true } }')
F2 = ('X', 'TYPE_FP32', (2,))


def fp32(*rows): return np.array(rows, np.float32)


# ---- the repositories -----------------------------------------------------------------------------------------------

M4 = 'backend: "python"\nmax_batch_size: 4\n' + io('input', 'I') + '\n' + io('output', 'O')
M4INT = 'backend: "python"\nmax_batch_size: 4\n' + io('input', 'I', 'TYPE_INT32') + '\n' + io('output', 'O', 'TYPE_INT32')
M4TWO = ('backend: "python"\nmax_batch_size: 4\n' + io('input', 'I') +
         '\noutput [ { name: "O1" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "O2" data_type: TYPE_FP32 dims: [ 2 ] } ]')
ENS_SIMPLE = ensemble_config([('m4two', {'I': 'X'}, {'O1': 't1', 'O2': 'Y2'}), ('m4', {'I': 't1'}, {'O': 'Y1'})],
                             outputs=(('Y1', 'TYPE_FP32', (2,)), ('Y2', 'TYPE_FP32', (2,))))
ONE = [('m4', {'I': 'X'}, {'O': 'Y'})]
ENS_OF_ENS = ensemble_config([('ens_simple', {'X': 'X'}, {'Y1': 'Y1'})], outputs=(('Y1', 'TYPE_FP32', (2,)),))


def write_composing(root):
    "m4 (identity), m4int, m4two (x+1, x+2) and the ensembles built on them."
    write_model(root, 'm4', M4, RECORDER)
    write_model(root, 'm4int', M4INT, RECORDER)
    write_model(root, 'm4two', M4TWO, TWO_OUTPUTS)
    write_model(root, 'ens_simple', ENS_SIMPLE, None)
    write_model(root, 'ens_of_ens', ENS_OF_ENS, None)
    write_model(root, 'ens_mbs0', ensemble_config(ONE, inputs=(('X', 'TYPE_FP32', (-1, 2)),),
                                                  outputs=(('Y', 'TYPE_FP32', (-1, 2)),), mbs=0), None)


# optional inputs (Triton's L0_optional_input): a model answering O<s> = I<s> + 1 for each input I<s> it got, and
# ensembles of two of its steps, the second reading the first's outputs
SOME_OUTPUTS = '''import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        res = []
        for r in requests:
            outs = []
            for s in ("0", "1"):
                t = pb_utils.get_input_tensor_by_name(r, "I" + s)
                if t is not None: outs.append(pb_utils.Tensor("O" + s, t.as_numpy() + 1))
            res.append(pb_utils.InferenceResponse(outs))
        return res
'''
OPT_STEP = ('backend: "python"\nmax_batch_size: 4\n'
            'input [ { name: "I0" data_type: TYPE_FP32 dims: [ 2 ] optional: %s }, { name: "I1" data_type: TYPE_FP32 dims: [ 2 ] optional: %s } ]\n'
            'output [ { name: "O0" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "O1" data_type: TYPE_FP32 dims: [ 2 ] } ]')
ENS_OPT = ('platform: "ensemble"\nmax_batch_size: 4\n'
           'input [ { name: "A" data_type: TYPE_FP32 dims: [ 2 ] optional: true }, { name: "B" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]\n'
           'output [ { name: "YA" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "YB" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
           'ensemble_scheduling { step [ { model_name: "%s" model_version: -1 input_map { key: "I0" value: "A" } '
           'input_map { key: "I1" value: "B" } output_map { key: "O0" value: "a" } output_map { key: "O1" value: "b" } }, '
           '{ model_name: "opt_step" model_version: -1 input_map { key: "I0" value: "a" } input_map { key: "I1" value: "b" } '
           'output_map { key: "O0" value: "YA" } output_map { key: "O1" value: "YB" } } ] }')


def write_optional(root):
    write_model(root, 'opt_step', OPT_STEP % ('true', 'true'), SOME_OUTPUTS)
    write_model(root, 'req_step', OPT_STEP % ('false', 'false'), SOME_OUTPUTS)    # both inputs required
    write_model(root, 'ens_optional', ENS_OPT % 'opt_step', None)
    write_model(root, 'ens_opt_required', ENS_OPT % 'req_step', None)


def write_serving_repo(root):
    write_composing(root)
    write_optional(root)
    write_model(root, 'step_a', step_config('add1', sleep_ms=int(STEP_S * 1000)), STEP)
    write_model(root, 'step_b', step_config('mul2', sleep_ms=int(STEP_S * 1000)), STEP)
    write_model(root, 'step_c', step_config('sum', inputs=('P', 'Q'), output='R', sleep_ms=int(STEP_S * 1000)), STEP)
    write_model(root, 'ens', ensemble_config([('step_c', {'P': 'A', 'Q': 'b_out'}, {'R': 'SUM'}),   # listed first
                                              ('step_a', {'IN': 'X'}, {'OUT': 'A'}),
                                              ('step_b', {'IN': 'X'}, {'OUT': 'b_out'})],
                                             outputs=(('SUM', 'TYPE_FP32', (2,)), ('A', 'TYPE_FP32', (2,)))), None)
    write_model(root, 'errstep', step_config('add1'), STEP)
    write_model(root, 'ens_err', ensemble_config([('errstep', {'IN': 'X'}, {'OUT': 'Y'})]), None)
    write_model(root, 'bstep', step_config('add1', sleep_ms=20, batching=
                                           'dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100000 }'), STEP)
    write_model(root, 'ens_batch', ensemble_config([('bstep', {'IN': 'X'}, {'OUT': 'Y'})]), None)
    write_model(root, 'vstep', step_config('addv') + '\nversion_policy: { all: { } }', STEP, versions=(1, 2))
    write_model(root, 'ens_v1', ensemble_config([('vstep', {'IN': 'X'}, {'OUT': 'Y'}, 1)]), None)
    write_model(root, 'ens_vlatest', ensemble_config([('vstep', {'IN': 'X'}, {'OUT': 'Y'})]), None)
    write_model(root, 'qstep', step_config('add1', mbs=1, sleep_ms=QSTEP_MS, batching=QUEUE_POLICY) +
                '\ninstance_group [ { count: 1 kind: KIND_CPU } ]', STEP)
    write_model(root, 'ens_q', ensemble_config([('qstep', {'IN': 'X'}, {'OUT': 'Y'})], mbs=1), None)
    write_mixed_batching(root)


def write_mixed_batching(root):
    "Batching and non-batching steps in one ensemble (Triton's QA inconsistent_shape, conflicting_scheduler_ensemble)."
    write_model(root, 'b_add', step_config('add1'), STEP)                         # batching (mbs 4), dims [2]
    write_model(root, 'b_mul', step_config('mul2'), STEP)
    write_model(root, 'nb_any', step_config('mul2', mbs=0, dims=(-1, 2)), STEP)   # non-batching, any number of rows
    write_model(root, 'nb_one', step_config('mul2', mbs=0, dims=(2,)), STEP)      # non-batching, one row
    write_model(root, 'ens_mixed', ensemble_config([('b_add', {'IN': 'X'}, {'OUT': 't'}), ('nb_any', {'IN': 't'}, {'OUT': 'Y'})],
                                                   mbs=2), None)
    write_model(root, 'ens_nb_one', ensemble_config([('nb_one', {'IN': 'X'}, {'OUT': 'Y'})]), None)
    write_model(root, 'ens_nb_over_b', ensemble_config([('b_add', {'IN': 'X'}, {'OUT': 't'}), ('b_mul', {'IN': 't'}, {'OUT': 'Y'})],
                                                       mbs=0), None)
    write_model(root, 'ens_nb_chain', ensemble_config([('b_add', {'IN': 'X'}, {'OUT': 't'}), ('nb_one', {'IN': 't'}, {'OUT': 'Y'})],
                                                      mbs=0), None)


# (ensemble, input shape) -> (output, the shape each step received); None: the request fails
MIXED = {
    ('ens_mixed', (2, 2)): ([[4, 6], [8, 10]], {'b_add': [2, 2], 'nb_any': [2, 2]}),     # a batch goes through whole
    ('ens_nb_one', (1, 2)): ([[2, 4]], {'nb_one': [2]}),                                # batch 1: the batch dim dropped, then restored
    ('ens_nb_one', (2, 2)): (None, {}),                                                 # a batch of 2 cannot be one row
    ('ens_nb_over_b', (2,)): ([4, 6], {'b_add': [1, 2], 'b_mul': [1, 2]}),             # a batch dim of 1 added, then dropped
    ('ens_nb_chain', (2,)): ([4, 6], {'b_add': [1, 2], 'nb_one': [2]}),
}


# ensembles.md §4: name -> (config, stage, Triton's message)
BAD = {
    'ens_backend': (ensemble_config(ONE, extra='backend: "python"'), 'poll',
                    "Ensemble model 'ens_backend' must have platform type 'ensemble' and empty backend type"),
    'ens_no_platform': (ensemble_config(ONE).replace('platform: "ensemble"', ''), 'poll',
                        "Invalid model name: Could not determine backend for model 'ens_no_platform' with no backend in "
                        "model configuration. Expected model name of the form 'model.<backend_name>'."),
    'ens_no_steps': (ensemble_config(None), 'poll',
                     'ensemble scheduling must be set for ensemble ens_no_steps whose platform is ensemble'),
    'ens_missing_input_map': (ensemble_config([('m4two', {}, {'O1': 'Y1'}), ('m4', {'I': 'X'}, {'O': 'unused_t'})],
                                              outputs=(('Y1', 'TYPE_FP32', (2,)),)), 'poll',
                              "must specify 'input_map' in step 0 of ensemble 'ens_missing_input_map'"),
    'ens_unused_input': (ensemble_config(ONE, inputs=(F2, ('UNUSED', 'TYPE_FP32', (2,)))), 'poll',
                         "ensemble input 'UNUSED' for ensemble ens_unused_input' is not used"),
    'ens_missing_output': (ensemble_config(ONE, outputs=(('Y', 'TYPE_FP32', (2,)), ('Z', 'TYPE_FP32', (2,)))), 'poll',
                           "ensemble output 'Z' for ensemble ens_missing_output' is not used"),
    'ens_dup_out': (ensemble_config(ONE + ONE), 'poll',
                    "ensemble tensor 'Y' can appear in an output map only once for ensemble 'ens_dup_out' step 1"),
    'ens_cycle': (ensemble_config([('m4', {'I': 't2'}, {'O': 't1'}), ('m4', {'I': 't1'}, {'O': 't2'})] + ONE), 'poll',
                  "ensemble tensor 't2' is unused in ensemble 'ens_cycle'"),
    'ens_cycle2': (ensemble_config([('m4two', {'I': 'X'}, {'O1': 'a', 'O2': 'Y'}), ('m4', {'I': 'b'}, {'O': 'b'})]), 'poll',
                   "ensemble tensor 'b' is unused in ensemble 'ens_cycle2'"),
    'ens_input_is_output': (ensemble_config([('m4', {'I': 'X'}, {'O': 'Z'})], outputs=(F2,)), 'poll',
                            "ensemble tensor 'Z' is unused in ensemble 'ens_input_is_output'"),
    'ens_unknown_model': (ensemble_config([('nope', {'I': 'X'}, {'O': 'Y'})]), 'load',
                          'ensemble ens_unknown_model contains models that are not available or ambiguous: nope'),
    'ens_bad_in_key': (ensemble_config([('m4', {'WRONG': 'X'}, {'O': 'Y'})]), 'load',
                       'in ensemble ens_bad_in_key, ensemble tensor X is mapping to non-existing input WRONG in model m4'),
    'ens_bad_out_key': (ensemble_config([('m4', {'I': 'X'}, {'WRONG': 'Y'})]), 'load',
                        'in ensemble ens_bad_out_key, ensemble tensor Y is mapped from non-existing output WRONG in model m4'),
    'ens_dtype': (ensemble_config([('m4int', {'I': 'X'}, {'O': 'Y'})], outputs=(('Y', 'TYPE_INT32', (2,)),)), 'load',
                  'in ensemble ens_dtype, ensemble tensor X: inconsistent data type: TYPE_FP32 is inferred from model '
                  'ens_dtype while TYPE_INT32 is inferred from model m4int'),
    'ens_shape': (ensemble_config(ONE, inputs=(('X', 'TYPE_FP32', (3,)),)), 'load',
                  'in ensemble ens_shape, ensemble tensor X: inconsistent shape: [-1,3] is inferred from model ens_shape '
                  'while [-1,2] is inferred from model m4'),
    'ens_mbs_too_big': (ensemble_config(ONE, mbs=8), 'load',
                        'ensemble ens_mbs_too_big allows maximum batch size 8, but it contains model m4 which only allows '
                        'maximum batch size to be 4'),
    'ens_unknown_version': (ensemble_config([('m4', {'I': 'X'}, {'O': 'Y'}, 7)]), 'load',
                            "ensemble 'ens_unknown_version' depends on 'm4' whose required version 7 is not loaded."),
}


def write_validation_repo(root):
    write_composing(root)
    for name, (cfg, _, _) in BAD.items(): write_model(root, name, cfg, None)


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp('ensemble_repo')
    write_serving_repo(root)
    s = TritonServer(str(root))
    failures = s.start()
    assert failures == {}, failures
    yield s
    s.stop()


def model_dir(server, name): return server.repository.get(name).model_dir


def log_of(server, name): return read_executions(model_dir(server, name))


# ---- data flow ------------------------------------------------------------------------------------------------------

def test_diamond_runs_independent_steps_concurrently(server):
    for m in ('step_a', 'step_b', 'step_c'): clear_executions(model_dir(server, m))
    t0 = time.time()
    resp = server.infer('ens', {'X': fp32([1, 2])}, id='d1')
    took = time.time() - t0
    assert list(resp.outputs) == ['A', 'SUM']                # production order: A (step_a) before SUM (step_c)
    assert resp['A'].tolist() == [[2, 3]] and resp['SUM'].tolist() == [[4, 7]]   # (x + 1) + 2x
    (a,), (b,), (c,) = (log_of(server, m) for m in ('step_a', 'step_b', 'step_c'))
    assert a['start'] < b['end'] and b['start'] < a['end']   # a and b overlapped
    assert c['start'] >= max(a['end'], b['end']) - 0.005     # c waited for both
    assert took >= 2 * STEP_S * 0.95, took                   # two steps' time at least; not 3 is the overlap above
    assert [r['ids'] for r in (a, b, c)] == [['d1']] * 3     # the request id is passed to every step


def test_concurrent_diamond_requests_all_get_their_own_results(server):
    xs = [fp32([i, 10 * i]) for i in range(4)]
    out = run_threads([lambda x=x: server.infer('ens', {'X': x}) for x in xs])
    for x, (resp, err) in zip(xs, out):
        assert err is None, err
        np.testing.assert_array_equal(resp['SUM'], (x + 1) + 2 * x)


def test_outputs_come_in_production_order_and_can_be_filtered(server):
    resp = server.infer('ens_simple', {'X': fp32([1, 2])}, outputs=['Y1', 'Y2'])
    assert list(resp.outputs) == ['Y2', 'Y1']                # Y2 (step 0) is produced before Y1 (step 1)
    assert resp['Y2'].tolist() == [[3, 4]] and resp['Y1'].tolist() == [[2, 3]]
    only = server.infer('ens_simple', {'X': fp32([1, 2])}, outputs=['Y1'])   # needs the internal t1
    assert list(only.outputs) == ['Y1']
    with pytest.raises(TritonError) as e: server.infer('ens_simple', {'X': fp32([1, 2])}, outputs=['t1'])
    assert e.value.message == "unexpected inference output 't1' for model 'ens_simple'"


def test_requesting_an_output_that_feeds_another_step_runs_the_whole_graph(server):
    # Triton 2.51 answers "unexpected deadlock" here (it prunes the step producing A); triton_mini runs every step
    resp = server.infer('ens', {'X': fp32([1, 2])}, outputs=['SUM'])
    assert list(resp.outputs) == ['SUM'] and resp['SUM'].tolist() == [[4, 7]]


def test_nested_ensemble(server):
    resp = server.infer('ens_of_ens', {'X': fp32([1, 2], [5, 6])})
    assert list(resp.outputs) == ['Y1'] and resp['Y1'].tolist() == [[2, 3], [6, 7]]


def test_an_ensemble_without_batching_can_wrap_a_batching_model(server):
    # max_batch_size 0 with dims [-1, 2]: the whole shape, batch dimension included, goes to m4 (mbs 4)
    resp = server.infer('ens_mbs0', {'X': fp32([1, 2], [3, 4], [5, 6])})
    assert resp['Y'].tolist() == [[1, 2], [3, 4], [5, 6]]


@pytest.mark.parametrize('case', MIXED, ids=lambda c: f'{c[0]}-{c[1]}')
def test_mixed_batching_steps_get_their_own_shapes(server, case):
    "Like Triton, a tensor passing between batching and non-batching steps gains or loses a batch dimension of 1."
    (model, shape), (want, step_shapes) = case, MIXED[case]
    for m in step_shapes: clear_executions(model_dir(server, m))
    x = np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if want is None:
        with pytest.raises(TritonError) as e: server.infer(model, {'X': x})
        assert e.value.message == ("in ensemble 'ens_nb_one', [request id: <id_unknown>] unexpected shape for input 'IN' for model 'nb_one'. "
                                   "Expected [2], got [2,2]. "), e.value.message
        return
    assert server.infer(model, {'X': x})['Y'].tolist() == want
    assert {m: log_of(server, m)[0]['shapes'][0] for m in step_shapes} == step_shapes


def test_step_model_version(server):
    x = fp32([1, 2])
    assert server.infer('ens_v1', {'X': x})['Y'].tolist() == [[2, 3]]        # vstep version 1: x + 1
    assert server.infer('ens_vlatest', {'X': x})['Y'].tolist() == [[3, 4]]   # -1: the latest, version 2


def test_a_step_queues_with_the_ensemble_requests_timeout(server):
    "core's EnsembleContext::InitStep gives each step the request's timeout: behind a busy qstep, 0.1 s runs out."
    x = {'X': fp32([1, 2])}
    p = ExecutionProbe(server, 'qstep')
    def after_busy(**kw):   # once the busy request runs on qstep's one instance (not after a fixed head start)
        p.wait_started(1, timeout=30)
        return server.infer('ens_q', x, timeout=30, **kw)
    try: out = run_threads([lambda: server.infer('qstep', {'IN': fp32([1, 2])}, timeout=30),
                            lambda: after_busy(timeout_us=100_000), lambda: after_busy()])
    finally: p.restore()
    busy, timed_out, patient = out
    assert busy[1] is None and patient[1] is None
    assert patient[0].outputs['Y'].tolist() == [[2, 3]]
    assert isinstance(timed_out[1], TritonError) and 'Request timeout expired' in timed_out[1].message, timed_out


@pytest.mark.oracle
def test_oracle_a_step_queues_with_the_ensemble_requests_timeout(serving_twins):
    "Behind a busy qstep, an ensemble request with timeout 0.1 s fails as Triton's does (status and error text)."
    got = {}
    for who, (port, _) in serving_twins.items():
        out = run_threads([lambda: http_infer(port, 'qstep', [1, 2], [1, 2], datatype='FP32', name='IN'),
                           lambda: (time.sleep(0.5), http_infer(port, 'ens_q', [1, 2], [1, 2], datatype='FP32',
                                                                 params={'timeout': 100_000}))[1]])
        got[who] = [r for r, _ in out]
    assert got['mini'] == got['real'], got
    assert got['real'][1][0] != 200, got


def test_concurrent_ensemble_requests_are_batched_inside_a_dynamic_batching_step(server):
    clear_executions(model_dir(server, 'bstep'))
    p = ExecutionProbe(server, 'bstep')
    try:
        with p.hold():
            blk = ResponseWaiter()
            server.submit(InferenceRequest('bstep', {'IN': fp32(*[[0, 0]] * 4)}, id='blk', response_callback=blk))
            p.wait_started(1)
            waiters = []
            for i in range(8):                               # each ensemble request queues its step at once
                w = ResponseWaiter()
                server.submit(InferenceRequest('ens_batch', {'X': fp32([i, -i])}, id=f'e{i}', response_callback=w))
                waiters.append(w)
        for i, w in enumerate(waiters):
            resp = w.wait(10)[0]
            assert resp.error is None and resp.outputs['Y'].tolist() == [[i + 1, 1 - i]]
        blk.wait(10)
    finally: p.restore()
    recs = log_of(server, 'bstep')
    assert [r['ids'] for r in recs] == [['blk'], [f'e{i}' for i in range(4)], [f'e{i}' for i in range(4, 8)]]


def test_many_threads_through_a_batching_ensemble(server):
    clear_executions(model_dir(server, 'bstep'))
    xs = [fp32([i, i + 0.5]) for i in range(24)]
    out = run_threads([lambda x=x: server.infer('ens_batch', {'X': x})['Y'] for x in xs])
    for x, (y, err) in zip(xs, out):
        assert err is None, err
        np.testing.assert_array_equal(y, x + 1)
    sizes = [r['n'] for r in log_of(server, 'bstep')]
    assert sum(sizes) == 24 and max(sizes) <= 4 and len(sizes) < 24, sizes


def test_optional_inputs_left_out_and_outputs_not_answered_are_placeholders(server):
    "Like Triton's EnsembleContext: steps go without placeholder inputs; the answer leaves placeholder outputs out."
    only_a = server.infer('ens_optional', {'A': fp32([1, 2])})
    assert list(only_a.outputs) == ['YA'] and only_a['YA'].tolist() == [[3, 4]]   # B, then b: left out of both steps
    assert list(server.infer('ens_optional', {'B': fp32([1, 2])}).outputs) == ['YB']
    assert server.infer('ens_optional', {'A': fp32([1, 2])}, outputs=['YB']).outputs == {}   # YB never came: no output
    with pytest.raises(TritonError) as e: server.infer('ens_opt_required', {'A': fp32([1, 2])})   # an error, not a hang
    assert e.value.message == ("in ensemble 'ens_opt_required', [request id: <id_unknown>] expected 2 inputs but got 1 inputs "
                               "for model 'req_step'. Got input(s) ['I0'], but missing required input(s) ['I1']. "
                               "Please provide all required input(s)."), e.value.message


# ---- step failures --------------------------------------------------------------------------------------------------

def step_error(server, mode):
    with pytest.raises(TritonError) as e: server.infer('ens_err', {'X': fp32([mode, 0])})
    return e.value


def test_step_exception_fails_the_ensemble_with_the_step_named(server):
    err = step_error(server, -1)
    path = model_dir(server, 'errstep') / '1' / 'model.py'
    assert re.fullmatch(rf"in ensemble 'ens_err', Failed to process the request\(s\) for model 'errstep_0', message: "
                        rf"ValueError: boom from add1\n\nAt:\n  {re.escape(str(path))}\(\d+\): execute\n", err.message), err.message
    assert err.http_status == 500


def test_step_error_response_keeps_its_status(server):
    nf = step_error(server, -2)
    assert (nf.message, nf.http_status) == ("in ensemble 'ens_err', not found msg", 404)
    other = step_error(server, -3)
    assert (other.message, other.http_status) == ("in ensemble 'ens_err', custom error msg", 500)
    assert server.infer('ens_err', {'X': fp32([1, 2])})['Y'].tolist() == [[2, 3]]   # and the ensemble still works


def stat_counts(stats):
    "The counts of one model's statistics (durations left out): what must agree with Triton."
    st = stats['model_stats'][0]
    return {'inference_count': st['inference_count'], 'execution_count': st['execution_count'],
            **{k: v['count'] for k, v in st['inference_stats'].items()},
            'batch_stats': {b['batch_size']: b['compute_infer']['count'] for b in st['batch_stats']}}


def count_delta(before, after):
    out = {k: after[k] - before[k] for k in after if k != 'batch_stats'}
    out['batch_stats'] = {k: v - before['batch_stats'].get(k, 0) for k, v in after['batch_stats'].items()
                          if v != before['batch_stats'].get(k, 0)}
    return out


def test_ensemble_statistics_count_like_triton(server):
    # Triton 2.51: a successful ensemble request is one execution of its batch size (queue and compute counted);
    # a failed one only a failure, counted twice (test_oracle_a_failed_ensemble_request_counts_twice)
    before = stat_counts(server.statistics('ens_err'))
    server.infer('ens_err', {'X': fp32([1, 2], [3, 4])})
    step_error(server, -2)
    delta = count_delta(before, stat_counts(server.statistics('ens_err')))
    assert delta == {'inference_count': 2, 'execution_count': 1, 'success': 1, 'fail': 2, 'queue': 1, 'compute_input': 1,
                     'compute_infer': 1, 'compute_output': 1, 'cache_hit': 0, 'cache_miss': 0, 'batch_stats': {2: 1}}
    steps = server.statistics('ens')['model_stats'][0]
    before = steps['inference_stats']['compute_infer']['ns']
    server.infer('ens', {'X': fp32([1, 2])})
    after = server.statistics('ens')['model_stats'][0]['inference_stats']['compute_infer']['ns']
    assert after - before >= 3 * STEP_S * 0.9e9              # the three steps' time, not the ~2-step wall time


FAILING_STEP = """import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError('no')) for _ in requests]
"""


@pytest.mark.oracle
def test_oracle_a_failed_ensemble_request_counts_twice(tmp_path):
    """Two ensemble requests whose step fails: Triton 2.51 reports fail count 4 and
    nv_inference_request_failure{reason="OTHER"} 4 (core counts each when it answers with the error and again when
    the request's tracker ends); triton-mini the same."""
    oracle_or_skip()
    repo = tmp_path / 'models'
    (repo / 'failer' / '1').mkdir(parents=True); (repo / 'ens' / '1').mkdir(parents=True)
    io = 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]'
    (repo / 'failer' / 'config.pbtxt').write_text(f'name: "failer" backend: "python" {io}')
    (repo / 'failer' / '1' / 'model.py').write_text(FAILING_STEP)
    (repo / 'ens' / 'config.pbtxt').write_text(f'name: "ens" platform: "ensemble" {io} ensemble_scheduling {{ step [ {{ model_name: '
                                               '"failer" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } ] }')
    body = {'inputs': [{'name': 'IN', 'datatype': 'FP32', 'shape': [1], 'data': [1.0]}]}
    got = {}
    for who, cls in (('real', RealTriton), ('mini', MiniTriton)):
        s = cls(repo)
        try:
            codes = [http(s.http_port, 'POST', '/v2/models/ens/infer', body)[0] for _ in range(2)]
            def counts(s=s):
                fail = json.loads(http(s.http_port, 'GET', '/v2/models/ens/stats')[2])['model_stats'][0]['inference_stats']['fail']['count']
                other = re.search(r'nv_inference_request_failure\{model="ens",reason="OTHER",version="1"\} (\d+)',
                                  http(s.metrics_port, 'GET', '/metrics')[2])
                return fail, other and int(other.group(1))
            got[who] = (codes, *reached(counts, (4, 4)))   # the second count comes when the tracker ends, after the answer
        finally: s.stop()
    assert got['real'] == ([500, 500], 4, 4), got
    assert got['mini'] == got['real'], got


# ---- validation and lifecycle (explicit model control) --------------------------------------------------------------

@pytest.fixture
def explicit(tmp_path):
    write_validation_repo(tmp_path)
    s = TritonServer(str(tmp_path), model_control_mode='explicit')
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize('name', [n for n, v in BAD.items() if v[1] == 'poll'])
def test_poll_stage_validation_messages(explicit, caplog, name):
    caplog.set_level(logging.ERROR, logger='triton_mini')
    with pytest.raises(TritonError) as e: explicit.load_model(name)
    assert (e.value.message, e.value.http_status) == (f"failed to load '{name}', failed to poll from model repository", 500)
    assert f"Poll failed for model directory '{name}': {BAD[name][2]}" in caplog.messages
    assert {'name': name} in explicit.repository_index()     # no version, no state: it never got that far


@pytest.mark.parametrize('name', [n for n, v in BAD.items() if v[1] == 'load'])
def test_load_stage_validation_messages(explicit, name):
    with pytest.raises(TritonError) as e: explicit.load_model(name)
    assert (e.value.message, e.value.http_status) == (f"load failed for model '{name}': {BAD[name][2]}\n", 400)
    assert {'name': name} in explicit.repository_index()
    assert not explicit.model_ready(name)


def test_a_step_writing_an_ensemble_input_is_refused(explicit, tmp_path):
    # Triton 2.51 loads this and then hangs every request; triton_mini refuses it at poll time
    write_model(tmp_path, 'ens_write_input', ensemble_config([('m4', {'I': 'X'}, {'O': 'Y'}), ('m4', {'I': 'Y'}, {'O': 'X'})]), None)
    with pytest.raises(TritonError, match='failed to poll'): explicit.load_model('ens_write_input')


def test_a_poll_failure_loads_no_composing_model(explicit):
    with pytest.raises(TritonError): explicit.load_model('ens_missing_input_map')   # steps use m4two and m4
    assert not explicit.model_ready('m4two') and not explicit.model_ready('m4')


def test_loading_an_ensemble_loads_its_composing_models_and_unloading_one_disables_it(explicit):
    assert explicit.repository_index(ready=True) == []
    explicit.load_model('ens_of_ens')                        # ens_of_ens -> ens_simple -> m4two, m4
    assert [e['name'] for e in explicit.repository_index(ready=True)] == ['ens_of_ens', 'ens_simple', 'm4', 'm4two']
    assert explicit.infer('ens_of_ens', {'X': fp32([1, 2])})['Y1'].tolist() == [[2, 3]]
    explicit.unload_model('m4')
    explicit.repository.wait_for_unloads()
    for name in ('ens_simple', 'ens_of_ens'):
        assert not explicit.model_ready(name)
        with pytest.raises(TritonError) as e: explicit.infer(name, {'X': fp32([1, 2])})
        assert (e.value.message, e.value.http_status) == (f"Request for unknown model: '{name}' has no available versions", 404)
        assert {'name': name, 'version': '1', 'state': 'UNAVAILABLE', 'reason': 'unloaded'} in explicit.repository_index()
    assert explicit.model_ready('m4two')                      # the other composing model stays
    explicit.load_model('ens_simple')                         # reloading the ensemble reloads m4
    assert explicit.model_ready('m4') and explicit.infer('ens_simple', {'X': fp32([0, 0])})['Y1'].tolist() == [[1, 1]]


# ---- the same repositories on the real Triton -----------------------------------------------------------------------

def twin_repos(base, write):
    for who in ('mini', 'real'): write(base / who)
    return base / 'mini', base / 'real'


class LogCapture(logging.Handler):
    def __init__(self): super().__init__(logging.ERROR); self.lines = []
    def emit(self, record): self.lines.append(record.getMessage())


@pytest.fixture(scope='module')
def validation_twins(tmp_path_factory, launch_module):
    oracle_or_skip()
    mini_dir, real_dir = twin_repos(tmp_path_factory.mktemp('ens_validation'), write_validation_repo)
    real = launch_module.real_triton(real_dir, '--model-control-mode=explicit', wait='live')
    cap = LogCapture()
    logging.getLogger('triton_mini').addHandler(cap)
    mini = launch_module.mini(mini_dir, metrics=False, model_control_mode='explicit')
    yield {'mini': mini.http_port, 'real': real.http_port}, cap, real
    logging.getLogger('triton_mini').removeHandler(cap)


@pytest.mark.oracle
def test_oracle_validation_messages_match_real_triton(validation_twins):
    ports, cap, real = validation_twins
    http_call(ports['real'], 'POST', '/v2/repository/models/ens_missing_input_map/load')   # first thing on a fresh server
    index = json.loads(http_call(ports['real'], 'POST', '/v2/repository/index')[1])
    assert {'name': 'm4two'} in index and {'name': 'm4'} in index   # Triton loaded no step model, and neither do we
    for name, (_, stage, message) in BAD.items():
        got = {who: http_call(port, 'POST', f'/v2/repository/models/{name}/load') for who, port in ports.items()}
        assert got['mini'] == got['real'], (name, got)
        if stage == 'poll':
            line = f"Poll failed for model directory '{name}': {message}"
            assert line in cap.lines, name
            assert json.dumps(line) in real.log(), name    # tritonserver logs the message as a JSON string
        else:
            assert json.loads(got['real'][1]) == {'error': f"load failed for model '{name}': {message}\n"}
    index = {who: http_call(port, 'POST', '/v2/repository/index') for who, port in ports.items()}
    bad = lambda body: [e for e in json.loads(body) if e['name'] in BAD]
    assert bad(index['mini'][1]) == bad(index['real'][1]) == [{'name': n} for n in sorted(BAD)]


@pytest.fixture(scope='module')
def serving_twins(tmp_path_factory, launch_module):
    oracle_or_skip()
    mini_dir, real_dir = twin_repos(tmp_path_factory.mktemp('ens_serving'), write_serving_repo)
    real = launch_module.real_triton(real_dir, wait='live')
    mini = launch_module.mini(mini_dir, metrics=False, grpc=True)
    assert mini.failures == {}
    twins = Twins({'mini': (mini.http_port, mini_dir), 'real': (real.http_port, real_dir)})
    twins.grpc = {'mini': mini.grpc_port, 'real': real.grpc_port}
    return twins


class Twins(dict):
    "who -> (HTTP port, repository); `.grpc`: who -> gRPC port."


def pairs(text):
    "A JSON answer with its objects as (key, value) lists: Triton repeats the keys of an ensemble's `parameters`."
    return json.loads(text, object_pairs_hook=list)


@pytest.mark.oracle
@pytest.mark.parametrize('model,outputs', [('ens', None), ('ens_simple', None), ('ens_simple', ['Y1', 'Y2']),
                                           ('ens_simple', ['Y1']), ('ens_of_ens', None), ('ens_v1', None),
                                           ('ens_vlatest', None), ('ens_batch', None), ('ens_mbs0', None)])
def test_oracle_ensemble_outputs_match_real_triton(serving_twins, model, outputs):
    got = {}
    for who, (port, _) in serving_twins.items():
        body = {'id': 'q', 'inputs': [{'name': 'X', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}]}
        if outputs: body['outputs'] = [{'name': o} for o in outputs]
        status, text = http_call(port, 'POST', f'/v2/models/{model}/infer', body)
        got[who] = (status, pairs(text))
    assert got['mini'] == got['real'], got


# Not compared: both inputs sent (both outputs come, and Triton 2.51 orders an ensemble's outputs as its
# std::unordered_map of them iterates, YB before YA here), and no input at all (Triton's Python backend then fails the
# step, "out of bounds index 0: request has 0 inputs"; triton-mini's runs it).
@pytest.mark.oracle
@pytest.mark.parametrize('model,inputs,outputs', [('ens_optional', ['A'], None), ('ens_optional', ['B'], None),
                                                  ('ens_optional', ['A'], ['YA']), ('ens_optional', ['A'], ['YB']),
                                                  ('ens_opt_required', ['A'], None)])
def test_oracle_optional_ensemble_inputs_match_real_triton(serving_twins, model, inputs, outputs):
    got = {}
    for who, (port, _) in serving_twins.items():
        body = {'inputs': [{'name': n, 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]} for n in inputs]}
        if outputs: body['outputs'] = [{'name': o} for o in outputs]
        got[who] = http_call(port, 'POST', f'/v2/models/{model}/infer', body)
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
@pytest.mark.parametrize('model,sequence', [(m, seq) for m in ('ens', 'ens_simple', 'ens_of_ens')
                                            for seq in ({}, {'sequence_id': 7, 'sequence_start': True}, {'sequence_id': 'abc', 'sequence_end': True})
                                            if not (m == 'ens_of_ens' and isinstance(seq.get('sequence_id'), str))])
def test_oracle_ensemble_response_parameters_match_real_triton(serving_twins, model, sequence):
    """The request's sequence, once per output: repeated keys over HTTP (same bytes), one of each in gRPC's map.
    Not asked: a string sequence id through a nested ensemble, on which Triton 2.51 dies (SIGSEGV, observed)."""
    import tritonclient.grpc as grpcclient
    got = {}
    for who, (port, _) in serving_twins.items():
        body = {'inputs': [{'name': 'X', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}], 'parameters': sequence}
        status, text = http_call(port, 'POST', f'/v2/models/{model}/infer', body)
        with grpcclient.InferenceServerClient(f'127.0.0.1:{serving_twins.grpc[who]}') as client:
            x = grpcclient.InferInput('X', [1, 2], 'FP32'); x.set_data_from_numpy(np.float32([[1, 2]]))
            r = client.infer(model, [x], **sequence).get_response()
        got[who] = (status, text, sorted((k, str(v).strip()) for k, v in r.parameters.items()), [o.name for o in r.outputs])
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
@pytest.mark.parametrize('case', MIXED, ids=lambda c: f'{c[0]}-{c[1]}')
def test_oracle_mixed_batching_matches_real_triton(serving_twins, case):
    (model, shape), (_, step_shapes) = case, MIXED[case]
    got = {}
    for who, (port, root) in serving_twins.items():
        for m in step_shapes: clear_executions(root / m)
        data = list(range(1, 1 + int(np.prod(shape))))
        body = {'inputs': [{'name': 'X', 'shape': list(shape), 'datatype': 'FP32', 'data': data}]}
        status, text = http_call(port, 'POST', f'/v2/models/{model}/infer', body)
        got[who] = (status, text, {m: [r['shapes'] for r in read_executions(root / m)] for m in step_shapes})
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
@pytest.mark.parametrize('mode', [-1, -2, -3])
def test_oracle_step_errors_match_real_triton(serving_twins, mode):
    got = {}
    for who, (port, root) in serving_twins.items():
        status, body = http_infer(port, 'ens_err', [mode, 0], [1, 2], datatype='FP32')
        got[who] = (status, body['error'].replace(str(root), '<repo>'))
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
def test_oracle_ensemble_statistics_match_real_triton(serving_twins):
    got = {}
    for who, (port, _) in serving_twins.items():
        before = stat_counts(json.loads(http_call(port, 'GET', '/v2/models/ens_err/stats')[1]))
        assert http_infer(port, 'ens_err', [1, 2, 3, 4], [2, 2], datatype='FP32')[0] == 200
        assert http_infer(port, 'ens_err', [-2, 0], [1, 2], datatype='FP32')[0] == 404
        got[who] = count_delta(before, settled(lambda: stat_counts(json.loads(http_call(port, 'GET', '/v2/models/ens_err/stats')[1]))))
    assert got['real']['fail'] == 2, got   # Triton counts an ensemble failure twice (test_oracle_a_failed_ensemble_request_counts_twice)
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
def test_oracle_diamond_overlaps_like_real_triton(serving_twins):
    for who, (port, root) in serving_twins.items():
        for m in ('step_a', 'step_b', 'step_c'): clear_executions(root / m)
        status, body = http_infer(port, 'ens', [1, 2], [1, 2], datatype='FP32')
        assert status == 200, (who, body)
        (a,), (b,), (c,) = (read_executions(root / m) for m in ('step_a', 'step_b', 'step_c'))
        assert a['start'] < b['end'] and b['start'] < a['end'], who
        assert c['start'] >= max(a['end'], b['end']) - 0.005, who
