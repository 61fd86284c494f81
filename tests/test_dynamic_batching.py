"""Layer 5 under real concurrency: the default scheduler, the dynamic batcher, instance groups (issue 4, Layer 5).

Real threads and real Python models (tests/model_factory.py RECORDER: it logs every execute() with its requests'
ids and shapes) through `TritonServer`. Threads are released together by a Barrier; a test that needs an instance
busy holds it with `ExecutionProbe.hold()` and waits for executions with `wait_started` instead of sleeping. Models
sleep to simulate work. Expected behaviour: /work/shared/spec/dynamic-batching.md (E1-E5, P1-P3, Q1-Q2, O1-O2, N1).

Tests marked `oracle` run the same repository on the real Triton 2.51 and on triton_mini over HTTP and compare the
batches; they are skipped when the oracle is absent (env TRITON_ORACLE or <repo>/../shared/oracle/real-triton).
"""
import asyncio, json, shutil, sys, threading, time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from model_factory import (ExecutionProbe, clear_executions, http_infer,  # noqa: E402
                           read_executions, recorder_config, run_threads, write_model)
from triton_servers import oracle_or_skip  # noqa: E402
from triton_mini.backend import InferenceRequest  # noqa: E402
from triton_mini.http_server import HTTPFrontend, call_asgi  # noqa: E402
from triton_mini.scheduler import ResponseWaiter  # noqa: E402
from triton_mini.server import TritonServer  # noqa: E402
from triton_mini.tensors import TritonError  # noqa: E402

DELAY = 0.2   # max_queue_delay of `dyn` and `ragged`, seconds

PRIO = '''dynamic_batching {
  max_queue_delay_microseconds: 0 priority_levels: 3 default_priority_level: 2
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 0 allow_timeout_override: true max_queue_size: 3 }
  priority_queue_policy { key: 1 value: { max_queue_size: 0 timeout_action: DELAY default_timeout_microseconds: 0 } } }'''


def qpolicy(timeout_us, override, action='REJECT', extra=''):
    return (f'dynamic_batching {{ {extra} default_queue_policy {{ timeout_action: {action} '
            f'default_timeout_microseconds: {timeout_us} allow_timeout_override: {str(override).lower()} }} }}')


MODELS = {
    # the spec's `dyn` (E1, E1b, E1c, E3, E5, E5b)
    'dyn': recorder_config(batching=f'dynamic_batching {{ preferred_batch_size: [4, 6] max_queue_delay_microseconds: {int(DELAY * 1e6)} }}'),
    'dyn_default': recorder_config(batching='dynamic_batching { }'),                                   # E2
    'ragged': recorder_config(extra='allow_ragged_batch: true ',                                       # E4
                              batching=f'dynamic_batching {{ max_queue_delay_microseconds: {int(DELAY * 1e6)} }}'),
    'many': recorder_config(instances=2, sleep_ms=10,
                            batching='dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 50000 }'),
    'prio': recorder_config(mbs=2, batching=PRIO),                                                     # P1-P3
    'qpol': recorder_config(mbs=2, batching=qpolicy(10_000_000, True)),                                # Q1
    'qpol_fixed': recorder_config(mbs=2, batching=qpolicy(10_000_000, False)),                         # override not allowed
    'qpol_none': recorder_config(mbs=2, batching=qpolicy(0, True)),                                    # no default timeout
    'qpol_short': recorder_config(mbs=2, batching=qpolicy(100_000, False)),                            # the default expires
    'qdelay': recorder_config(mbs=4, batching=qpolicy(100_000, False, 'DELAY',                         # Q2
                                                      'max_queue_delay_microseconds: 300000 preferred_batch_size: [ 4 ]')),
    'ordered': recorder_config(instances=2, batching='dynamic_batching { preserve_ordering: true }'),  # O1
    'unordered': recorder_config(instances=2, batching='dynamic_batching { }'),                        # O2
    'ordered_full': recorder_config(instances=1, batching='dynamic_batching { preserve_ordering: true '
                                    'default_queue_policy { max_queue_size: 1 } }'),
    'par4': recorder_config(instances=4, sleep_ms=100),   # default scheduler, 4 instances
    'par1': recorder_config(instances=1, sleep_ms=100),
    'nobatcher': recorder_config(),                       # N1: mbs 8 but no dynamic_batching
}


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('batching_repo')
    for name, cfg in MODELS.items(): write_model(root, name, cfg)
    return root


@pytest.fixture(scope='module')
def server(repo):
    s = TritonServer(str(repo))
    failures = s.start()
    assert failures == {}, failures
    yield s
    s.stop()


@pytest.fixture
def probe(server):
    "probe(model): an ExecutionProbe on a model, restored after the test; the model's execution log starts empty."
    made = []
    def make(model):
        clear_executions(server.repository.get(model).model_dir)
        p = ExecutionProbe(server, model)
        made.append(p)
        return p
    yield make
    for p in made: p.restore()


def submit(server, model, value=0, n=1, width=1, rid='', **kw) -> ResponseWaiter:
    "Queue one INT32 request [n, width] filled with `value` (TritonError if refused); wait on the returned waiter."
    w = ResponseWaiter()
    server.submit(InferenceRequest(model, {'X': np.full((n, width), value, np.int32)}, id=rid, response_callback=w, **kw))
    return w


def result(w, timeout=10):
    resp = w.wait(timeout)[0]
    if resp.error is not None: raise resp.error
    return resp.outputs['Y']


def log_of(server, model):
    return read_executions(server.repository.get(model).model_dir)


def ids(records): return [r['ids'] for r in records]


# ---- many concurrent callers -------------------------------------------------------------------------------------

def test_many_concurrent_callers_are_batched_and_get_their_own_rows(server, probe):
    probe('many')
    n, sent = 48, {}
    def call(i):
        rid = f'c{i}'
        x = np.array([[i, -i, 7 * i]], np.int32)
        sent[rid] = time.time()
        return rid, x, server.infer('many', {'X': x}, id=rid).outputs['Y']
    out = run_threads([lambda i=i: call(i) for i in range(n)])
    for res, err in out:
        assert err is None, err
        rid, x, y = res
        np.testing.assert_array_equal(y, x)                  # every caller gets its own rows back
    recs = log_of(server, 'many')
    sizes = [r['n'] for r in recs]
    assert sum(sizes) == n and sorted(i for r in recs for i in r['ids']) == sorted(sent)
    assert max(sizes) <= 8                                   # never above max_batch_size
    assert len(recs) < n / 2, sizes                          # batching happened
    assert {r['instance'] for r in recs} == {'many_0_0', 'many_0_1'}
    for r in recs:                                           # a batch that is not preferred waited the delay first
        if r['n'] not in (4, 8):
            assert r['start'] - min(sent[i] for i in r['ids']) >= 0.05 * 0.8, (r, sizes)
    st = server.statistics('many')['model_stats'][0]
    assert st['inference_count'] == n and st['execution_count'] == len(recs)
    assert sorted(b['batch_size'] for b in st['batch_stats']) == sorted(set(sizes))


def test_concurrent_mixed_shapes_never_share_a_batch_unless_ragged(server, probe):
    for model in ('dyn', 'ragged'): probe(model)
    def call(model, i):
        x = np.full((1, 2 + i % 2), i, np.int32)             # shapes [1,2] and [1,3] interleaved
        return x, server.infer(model, {'X': x}, id=f'{model}{i}').outputs['Y']
    fns = [lambda m=m, i=i: call(m, i) for m in ('dyn', 'ragged') for i in range(16)]
    for (x, y), err in run_threads(fns):
        assert err is None, err
        np.testing.assert_array_equal(x, y)
    for r in log_of(server, 'dyn'):
        assert len({tuple(s[0][1:]) for s in r['shapes']}) == 1, r   # one shape per execute
        assert r['n'] <= 8
    ragged = log_of(server, 'ragged')
    assert sum(r['n'] for r in ragged) == 16 and max(r['n'] for r in ragged) <= 8
    assert any(len({tuple(s[0]) for s in r['shapes']}) == 2 for r in ragged), ragged  # mixed shapes batched


# ---- the spec's experiments, made deterministic by holding the instance busy --------------------------------------

def queue_behind_blocker(server, probe, model, requests, blocker=4):
    """Hold `model`'s instance with a blocker of batch `blocker`, queue `requests` [(value, n, width, rid)], release.

    The blocker is a preferred/full batch so it starts at once; everything else is queued while the instance is
    busy, so the batches formed afterwards depend only on the rules, not on thread timing."""
    p = probe(model)
    with p.hold():
        blk = submit(server, model, 0, blocker, rid='blk')
        p.wait_started(1)
        t0 = time.time()
        waiters = [(rid, submit(server, model, v, n, w, rid=rid)) for v, n, w, rid in requests]
    for rid, w in waiters: result(w)
    result(blk)
    recs = log_of(server, model)
    assert recs[0]['ids'] == ['blk']
    return recs[1:], t0, dict(waiters)


def test_E1_preferred_sizes_are_taken_first(server, probe):
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn', [(i, 1, 1, f'r{i}') for i in range(10)])
    # 10 queued, preferred [4, 6], mbs 8: the largest reachable preferred size (6), then 4, without waiting
    assert ids(recs) == [[f'r{i}' for i in range(6)], [f'r{i}' for i in range(6, 10)]]
    assert recs[1]['start'] - t0 < DELAY / 2


def test_E1b_below_preferred_waits_max_queue_delay(server, probe):
    probe('dyn')
    t0 = time.time()
    waiters = [submit(server, 'dyn', i, rid=f'r{i}') for i in range(3)]
    for i, w in enumerate(waiters): assert result(w).tolist() == [[i]]
    (rec,) = log_of(server, 'dyn')
    waited = rec['start'] - t0                               # the batch's execute started after the delay: not at once,
    assert rec['n'] == 3 and DELAY * 0.9 <= waited < DELAY + 1, waited   # not forever (a loaded machine adds some)


def test_lone_request_waits_max_queue_delay_and_no_delay_means_none(server, probe):
    probe('dyn'); probe('dyn_default')
    t0 = time.time(); result(submit(server, 'dyn', 1)); lone = time.time() - t0
    t0 = time.time(); result(submit(server, 'dyn_default', 1)); immediate = time.time() - t0
    assert DELAY * 0.9 <= lone < DELAY + 0.4, lone
    assert immediate < DELAY / 2, immediate                  # `dynamic_batching {}`: delay 0


def test_E1c_a_waiting_request_joins_the_first_preferred_batch(server, probe):
    probe('dyn')
    slow = submit(server, 'dyn', 1300, rid='slow')           # asks the model to sleep 300 ms; waits (1 < 4)
    rest = [submit(server, 'dyn', i, rid=f'r{i}') for i in range(9)]
    for w in [slow] + rest: result(w)
    recs = log_of(server, 'dyn')
    assert [r['n'] for r in recs] in ([4, 6], [6, 4]), ids(recs)
    assert recs[0]['ids'][0] == 'slow' and recs[1]['start'] >= recs[0]['end'] - 0.01
    assert recs[0]['start'] < recs[0]['end'] - 0.25          # the slow request's batch ran 300 ms


def test_E2_empty_dynamic_batching_fills_max_batch_size(server, probe):
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn_default', [(i, 1, 1, f'r{i}') for i in range(12)], blocker=1)
    assert [r['n'] for r in recs] == [8, 4]                  # preferred defaults to [max_batch_size], no delay
    assert recs[1]['start'] - t0 < DELAY / 2


def test_E3_a_shape_change_ends_the_batch(server, probe):
    reqs = [(0, 1, 2, 'a0'), (0, 1, 2, 'a1'), (0, 1, 3, 'b0'), (0, 1, 3, 'b1'), (0, 1, 2, 'a2'), (0, 1, 3, 'b2')]
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn', reqs)
    assert ids(recs) == [['a0', 'a1'], ['b0', 'b1'], ['a2'], ['b2']]
    assert recs[2]['start'] - t0 < DELAY / 2                 # the next request was incompatible: sent at once
    assert recs[3]['start'] - t0 >= DELAY * 0.9              # the last one could still grow: waited the delay


def test_E4_ragged_inputs_batch_across_shapes(server, probe):
    reqs = [(0, 1, 2, 'a0'), (0, 1, 3, 'b0'), (0, 1, 2, 'a1'), (0, 1, 3, 'b1'), (0, 1, 2, 'a2'), (0, 1, 3, 'b2')]
    recs, t0, _ = queue_behind_blocker(server, probe, 'ragged', reqs, blocker=8)
    assert ids(recs) == [['a0', 'b0', 'a1', 'b1', 'a2', 'b2']]
    assert recs[0]['shapes'] == [[[1, 2]], [[1, 3]]] * 3
    assert recs[0]['start'] - t0 >= DELAY * 0.9              # 6 < preferred 8: waited the delay


def test_E5_batch_size_is_the_sum_of_the_requests_batch_dims(server, probe):
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn', [(0, 3, 1, f'r{i}') for i in range(4)])
    assert ids(recs) == [['r0', 'r1'], ['r2', 'r3']]         # 3 + 3 = 6 is preferred
    assert recs[1]['start'] - t0 < DELAY / 2


def test_E5b_a_request_that_would_overflow_is_left_for_the_next_batch(server, probe):
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn', [(0, 5, 1, f'r{i}') for i in range(3)])
    assert ids(recs) == [['r0'], ['r1'], ['r2']]             # 5 + 5 > 8: never split, never above mbs
    assert recs[1]['start'] - t0 < DELAY / 2
    assert recs[2]['start'] - t0 >= DELAY * 0.9              # nothing behind it: waited the delay


def test_a_request_above_max_batch_size_is_rejected_not_split(server):
    with pytest.raises(TritonError) as e: submit(server, 'dyn', 0, 9)
    assert e.value.message == "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'dyn'"


# ---- priorities and queue policies --------------------------------------------------------------------------------

def test_P1_priority_overtakes_and_max_queue_size_rejects(server, probe):
    p = probe('prio')
    with p.hold():
        blk = submit(server, 'prio', 0, rid='blk')
        p.wait_started(1)
        d = [submit(server, 'prio', i, rid=f'd{i}') for i in range(3)]
        for rid in ('d3', 'd4'):                             # level 2 holds 3 queued requests at most
            with pytest.raises(TritonError) as e: submit(server, 'prio', 0, rid=rid)
            assert (e.value.message, e.value.http_status) == (f'[request id: {rid}] Exceeds maximum queue size', 503)
        h = [submit(server, 'prio', 0, rid=f'h{i}', priority=1) for i in range(2)]
    for w in [blk] + d + h: result(w)
    assert ids(log_of(server, 'prio')) == [['blk'], ['h0', 'h1'], ['d0', 'd1'], ['d2']]
    st = p.model.stats
    assert st.failures['REJECTED'] == 2 and st.fail.count == 2


def test_max_queue_size_rejection_over_http_is_triton_503(server, probe):
    p = probe('prio')
    app = HTTPFrontend(server)
    body = json.dumps({'id': 'over', 'inputs': [{'name': 'X', 'shape': [1, 1], 'datatype': 'INT32', 'data': [0]}]}).encode()
    with p.hold():
        blk = submit(server, 'prio', 0, rid='blk')
        p.wait_started(1)
        queued = [submit(server, 'prio', 0, rid=f'q{i}') for i in range(3)]
        status, _, text = asyncio.run(call_asgi(app, 'POST', '/v2/models/prio/infer', body))
    for w in [blk] + queued: result(w)
    assert (status, json.loads(text)) == (503, {'error': '[request id: over] Exceeds maximum queue size'})


def test_priority_above_priority_levels_uses_the_default_level(server, probe):
    # Triton: a priority of 0 or above priority_levels means default_priority_level (here 2), checked on 2.51
    p = probe('prio')
    with p.hold():
        blk = submit(server, 'prio', 0, rid='blk')
        p.wait_started(1)
        ws = [submit(server, 'prio', 0, rid='p3a', priority=3), submit(server, 'prio', 0, rid='p3b', priority=3),
              submit(server, 'prio', 0, rid='p7', priority=7), submit(server, 'prio', 0, rid='p0', priority=0)]
    for w in [blk] + ws: result(w)
    assert ids(log_of(server, 'prio')) == [['blk'], ['p7', 'p0'], ['p3a', 'p3b']]


def test_Q1_reject_timeout_at_the_deadline_and_only_overrides_a_shorter_request_timeout(server, probe):
    # Triton 2.51 rejects an expired request only when its batcher next forms a batch (here: once the instance is
    # free); triton_mini's reaper rejects it at its deadline, even while every instance is busy (issue 18).
    p = probe('qpol')
    with p.hold():
        blk = submit(server, 'qpol', 0, rid='blk')
        p.wait_started(1)
        f = [submit(server, 'qpol', 0, rid=f'f{i}') for i in range(2)]
        short = submit(server, 'qpol', 0, rid='t100ms', timeout_us=100_000)   # < default 10 s: honoured
        long = submit(server, 'qpol', 0, rid='t20s', timeout_us=20_000_000)   # > default: not an override
        assert short._done.wait(10)          # rejected while the instance is still held
        assert not long._done.is_set()
    err = short.wait(5)[0].error
    assert (err.message, err.http_status) == ('Request timeout expired', 503)  # no [request id] prefix
    for w in [blk, long] + f: result(w)
    assert ids(log_of(server, 'qpol')) == [['blk'], ['f0', 'f1'], ['t20s']]
    assert p.model.stats.failures['REJECTED'] == 1


@pytest.mark.parametrize('model', ['qpol_fixed', 'qpol_none'])
def test_request_timeout_ignored_without_override_or_default(server, probe, model):
    # allow_timeout_override false, or default_timeout_microseconds 0 (P2): the request's timeout does nothing
    p = probe(model)
    with p.hold():
        blk = submit(server, model, 0, rid='blk')
        p.wait_started(1)
        t = submit(server, model, 5, rid='t1ms', timeout_us=1_000)
        assert not t._done.wait(0.05)
    assert result(t).tolist() == [[5]]
    result(blk)


def test_default_timeout_rejects_expired_requests(server, probe):
    p = probe('qpol_short')
    with p.hold():
        blk = submit(server, 'qpol_short', 0, rid='blk')
        p.wait_started(1)
        late = submit(server, 'qpol_short', 0, rid='late')
        assert late._done.wait(10)                           # rejected at its 100 ms deadline, the instance still held
    assert late.wait(5)[0].error.message == 'Request timeout expired'
    result(blk)
    assert ids(log_of(server, 'qpol_short')) == [['blk']]


def test_Q2_delay_moves_expired_requests_behind_the_others(server, probe):
    probe('qdelay')
    r0 = submit(server, 'qdelay', 0, rid='r0')
    assert not r0._done.wait(0.15)                           # 1 < preferred 4, delay 300 ms: still queued, expired
    rest = [submit(server, 'qdelay', 0, rid=f'r{i}') for i in (1, 2, 3)]
    for w in [r0] + rest: result(w)
    (rec,) = log_of(server, 'qdelay')
    assert rec['ids'] == ['r1', 'r2', 'r3', 'r0']            # DELAY: not failed, placed last
    assert r0.wait(5)[0].error is None


def test_delayed_requests_stay_behind_later_arrivals(server, probe):
    # Triton keeps DELAYed requests in a queue of their own, served after the others: one that expired (and was
    # moved) before the others arrived must still go last.
    p = probe('qdelay')
    with p.hold():
        blk = submit(server, 'qdelay', 0, rid='blk')
        p.wait_started(1)
        r0 = submit(server, 'qdelay', 0, rid='r0')
        queue = p.model.scheduler._queues[1]
        deadline = time.monotonic() + 10
        while not (queue and queue[0].expired):              # past r0's 100 ms deadline the reaper delays it
            assert time.monotonic() < deadline, 'r0 was not delayed'
            time.sleep(0.01)
        rest = [submit(server, 'qdelay', 0, rid=f'r{i}') for i in (1, 2, 3)]
    for w in [blk, r0] + rest: result(w)
    assert [i for rec in log_of(server, 'qdelay') for i in rec['ids']] == ['blk', 'r1', 'r2', 'r3', 'r0']


# ---- preserve_ordering ----------------------------------------------------------------------------------------------

def delivery_order(server, probe, model):
    """O1/O2: slow r0 held on one instance, fast r1 then r2 on the other. When r2 has started, r1's response has
    been sent by its worker; returns (was r1 delivered while r0 was still running, final delivery order)."""
    p = probe(model)
    order, lock = [], threading.Lock()
    def waiter(rid):
        w = ResponseWaiter()
        def cb(req, resp, final):
            if final:
                with lock: order.append(rid)
            w(req, resp, final)
        return cb, w
    cbs = {rid: waiter(rid) for rid in ('r0', 'r1', 'r2')}
    def send(rid):
        server.submit(InferenceRequest(model, {'X': np.zeros((1, 1), np.int32)}, id=rid, response_callback=cbs[rid][0]))
    with p.hold():
        send('r0'); p.wait_started(1)
        send('r1'); p.wait_started(2)
        send('r2'); p.wait_started(3)                        # r2 runs on r1's instance, so r1 has been answered
        with lock: early = 'r1' in order
    for rid in cbs: cbs[rid][1].wait(5)
    recs = log_of(server, model)
    assert len({r['instance'] for r in recs}) == 2           # the two requests really ran in parallel
    return early, order


def test_O1_preserve_ordering_holds_a_fast_response_behind_a_slow_one(server, probe):
    early, order = delivery_order(server, probe, 'ordered')
    assert not early and order == ['r0', 'r1', 'r2']


def test_O2_without_preserve_ordering_the_fast_response_goes_first(server, probe):
    early, order = delivery_order(server, probe, 'unordered')
    assert early and order.index('r1') < order.index('r0')


def test_preserve_ordering_survives_a_rejected_request(server, probe):
    # a request refused at the queue (max_queue_size) must not leave a hole that holds every later response back
    p = probe('ordered_full')
    with p.hold():
        blk = submit(server, 'ordered_full', 0, rid='blk')
        p.wait_started(1)
        queued = submit(server, 'ordered_full', 0, rid='queued')
        with pytest.raises(TritonError, match='Exceeds maximum queue size'): submit(server, 'ordered_full', 0, rid='full')
    result(blk); result(queued)
    after = submit(server, 'ordered_full', 3, rid='after')
    assert result(after, timeout=5).tolist() == [[3]]


def test_a_caller_that_went_away_does_not_stop_the_instance(server, probe):
    # async_infer abandoned by a closed event loop: delivering its response fails, the next request is still served
    p = probe('par1')
    async def give_up():
        task = asyncio.ensure_future(server.async_infer('par1', {'X': np.zeros((1, 1), np.int32)}, id='gone'))
        await asyncio.get_running_loop().run_in_executor(None, p.wait_started, 1)
        task.cancel()
    with p.hold():
        asyncio.run(give_up())                               # the loop is closed before the held request finishes
    assert server.infer('par1', {'X': np.full((1, 1), 4, np.int32)}, timeout=5).outputs['Y'].tolist() == [[4]]


# ---- instance groups and the default scheduler ----------------------------------------------------------------------

def timed_parallel(server, model, n=4):
    def call(i):
        return server.infer(model, {'X': np.full((1, 1), i, np.int32)}, id=f'p{i}').outputs['Y']
    t0 = time.time()
    out = run_threads([lambda i=i: call(i) for i in range(n)])
    took = time.time() - t0
    assert [r.tolist() for r, _ in out] == [[[i]] for i in range(n)], out
    return took


def test_instance_group_count_4_runs_4_requests_at_once(server, probe):
    probe('par4'); probe('par1')
    four = timed_parallel(server, 'par4')
    one = timed_parallel(server, 'par1')
    assert four < 0.25, four                                 # ~100 ms, not 400
    assert one >= 0.38, one                                  # 4 x 100 ms one after the other
    recs = log_of(server, 'par4')
    assert sorted(r['instance'] for r in recs) == [f'par4_0_{i}' for i in range(4)]
    assert max(r['start'] for r in recs) < min(r['end'] for r in recs)   # all four overlapped
    seq = log_of(server, 'par1')
    assert all(a['end'] <= b['start'] + 0.005 for a, b in zip(seq, seq[1:]))


def test_N1_default_scheduler_executes_one_request_at_a_time_with_statistics(server, probe):
    p = probe('nobatcher')
    sizes = [1, 2, 3, 1, 2, 3]
    before = server.statistics('nobatcher')['model_stats'][0]
    with p.hold():
        blk = submit(server, 'nobatcher', 0, 2, rid='blk')
        p.wait_started(1)
        ws = [submit(server, 'nobatcher', i, n, rid=f'r{i}') for i, n in enumerate(sizes)]
        assert p.model.stats.pending == len(sizes)           # queued behind the blocker
    for i, w in enumerate(ws): assert result(w).tolist() == [[i]] * sizes[i]
    result(blk)
    recs = log_of(server, 'nobatcher')
    assert [r['n'] for r in recs] == [1] * 7                 # exactly one request per execute
    assert ids(recs) == [['blk']] + [[f'r{i}'] for i in range(6)]   # FIFO
    st = server.statistics('nobatcher')['model_stats'][0]
    assert st['execution_count'] - before['execution_count'] == 7
    assert st['inference_count'] - before['inference_count'] == 2 + sum(sizes)
    inf = st['inference_stats']
    assert inf['success']['count'] - before['inference_stats']['success']['count'] == 7
    assert inf['queue']['count'] - before['inference_stats']['queue']['count'] == 7
    assert inf['fail']['count'] == 0 and p.model.stats.pending == 0
    counts = {b['batch_size']: b['compute_infer']['count'] for b in st['batch_stats']}
    old = {b['batch_size']: b['compute_infer']['count'] for b in before['batch_stats']}
    assert {k: v - old.get(k, 0) for k, v in counts.items()} == {1: 2, 2: 3, 3: 2}


def test_dynamic_batcher_statistics_agree_with_the_batches(server, probe):
    before = server.statistics('dyn')['model_stats'][0]
    recs, t0, _ = queue_behind_blocker(server, probe, 'dyn', [(i, 1, 1, f'r{i}') for i in range(10)])
    st = server.statistics('dyn')['model_stats'][0]
    delta = lambda *k: _get(st, k) - _get(before, k)
    assert delta('execution_count') == 3 and delta('inference_count') == 14
    assert delta('inference_stats', 'success', 'count') == 11 and delta('inference_stats', 'queue', 'count') == 11
    assert delta('inference_stats', 'compute_infer', 'count') == 11   # each request is charged its batch
    got = {b['batch_size']: b['compute_infer']['count'] for b in st['batch_stats']}
    old = {b['batch_size']: b['compute_infer']['count'] for b in before['batch_stats']}
    assert {k: v - old.get(k, 0) for k, v in got.items() if v != old.get(k, 0)} == {4: 2, 6: 1}
    assert delta('inference_stats', 'queue', 'ns') > 0


def _get(d, keys):
    for k in keys: d = d[k]
    return d


# ---- the same experiments on the real Triton ------------------------------------------------------------------------

ORACLE_MODELS = ('dyn', 'ragged', 'prio')


@pytest.fixture(scope='module')
def twins(repo, tmp_path_factory, launch_module):
    "The same repository (copied twice) served by triton_mini and by the real Triton, both over HTTP."
    oracle_or_skip()
    base = tmp_path_factory.mktemp('twins')
    dirs = {}
    for who in ('mini', 'real'):
        dirs[who] = base / who
        for m in ORACLE_MODELS: shutil.copytree(repo / m, dirs[who] / m, ignore=shutil.ignore_patterns('executions_*'))
    real = launch_module.real_triton(dirs['real'], wait='live')
    mini = launch_module.mini(dirs['mini'], metrics=False)
    return {'mini': (mini.http_port, dirs['mini']), 'real': (real.http_port, dirs['real'])}


def http_experiment(port, root, model, specs):
    "Send specs [(value, shape, rid, params)] from threads released together; returns (records, t0, statuses)."
    clear_executions(root / model)
    t0 = time.time()
    out = run_threads([lambda s=s: http_infer(port, model, [s[0]] * int(np.prod(s[1])), s[1], s[2], s[3]) for s in specs])
    statuses = {s[2]: res[0] for s, (res, err) in zip(specs, out)}
    return read_executions(root / model), t0, statuses


EXPERIMENTS = {   # name: (model, specs, check(records, t0) -> comparable summary)
    # E1 over HTTP: which requests meet in the queue depends on arrival timing (real Triton too sends an odd-sized
    # batch before the delay when the machine is busy), so only the total is compared; the in-process E1 test above
    # holds the instance with a probe and checks the exact batches.
    'E1': ('dyn', [(i, [1, 1], f'r{i}', None) for i in range(10)], lambda recs, t0: sum(r['n'] for r in recs)),
    'E1b': ('dyn', [(i, [1, 1], f'r{i}', None) for i in range(3)],
            lambda recs, t0: ([r['n'] for r in recs], recs[0]['start'] - t0 > DELAY * 0.9)),
    'E4': ('ragged', [(i, [1, 2 + i % 2], f'r{i}', None) for i in range(6)],
           lambda recs, t0: ([r['n'] for r in recs], recs[0]['start'] - t0 > DELAY * 0.9)),
    'E5': ('dyn', [(i, [3, 1], f'r{i}', None) for i in range(4)],
           lambda recs, t0: ([r['n'] for r in recs], all(r['start'] - t0 < DELAY / 2 for r in recs))),
    'E5b': ('dyn', [(i, [5, 1], f'r{i}', None) for i in range(3)],
            lambda recs, t0: ([r['n'] for r in recs], [r['start'] - t0 > DELAY * 0.9 for r in recs])),
}


@pytest.mark.oracle
@pytest.mark.parametrize('name', list(EXPERIMENTS))
def test_oracle_batches_match_real_triton(twins, name):
    model, specs, summary = EXPERIMENTS[name]
    got = {}
    for who, (port, root) in twins.items():
        recs, t0, statuses = http_experiment(port, root, model, specs)
        assert set(statuses.values()) == {200}, (who, statuses)
        got[who] = summary(recs, t0)
    assert got['mini'] == got['real'], got


@pytest.mark.oracle
def test_oracle_priority_and_queue_size_match_real_triton(twins):
    # P1 with arrivals spaced in time (the real server cannot be held from here): blocker sleeps 400 ms
    got = {}
    for who, (port, root) in twins.items():
        clear_executions(root / 'prio')
        specs = [(1400, 'blk', None)] + [(0, f'd{i}', None) for i in range(5)] + [(0, f'h{i}', {'priority': 1}) for i in range(2)]
        results, threads = {}, []
        for v, rid, params in specs:
            t = threading.Thread(target=lambda v=v, rid=rid, params=params:
                                 results.__setitem__(rid, http_infer(port, 'prio', [v], [1, 1], rid, params)))
            t.start(); threads.append(t)
            threading.Event().wait(0.03)   # arrival spacing on a remote server, not synchronisation
        for t in threads: t.join(30)
        errors = {rid: body for rid, (status, body) in results.items() if status != 200}
        got[who] = (ids(read_executions(root / 'prio')), errors)
    assert got['mini'] == got['real'], got
    assert got['real'][1] == {f'd{i}': {'error': f'[request id: d{i}] Exceeds maximum queue size'} for i in (3, 4)}
