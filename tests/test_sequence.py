"""The sequence batcher (nbs/05b_sequence_batcher) against the real Triton 2.51: the same interleaved sequences
sent one request at a time to both servers (so batch composition is deterministic), compared response by response:
the control tensors the model saw, the batch each request ran in (fillers with READY=0 included), implicit state,
string ids, the error texts and the autofilled `sequence_batching` config. The models are tests/models/sequence/.
Then triton_mini alone: 64 interleaved sequences x 50 steps from 8 threads, and idle release under load."""
import json, shutil, threading, time
from pathlib import Path

import numpy as np
import pytest

from triton_servers import RealTriton, MiniTriton, http, settled

MODELS = Path(__file__).parent / 'models' / 'sequence'


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    "The sequence models, copied outside the checkout (the oracle must not run inside it)."
    root = tmp_path_factory.mktemp('seq') / 'models'
    shutil.copytree(MODELS, root)
    return root


@pytest.fixture(scope='module')
def mini(repo):
    s = MiniTriton(repo)
    yield s
    s.stop()


@pytest.fixture(scope='module')
def triton(repo):
    s = RealTriton(repo)
    yield s
    s.stop()


def infer(port, model, sid, value, start=False, end=False, batch=1):
    "One sequence request over HTTP: (status, outputs by name or the error text)."
    params = {k: v for k, v in (('sequence_id', sid), ('sequence_start', start), ('sequence_end', end)) if v is not None}
    body = {'parameters': params, 'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [batch, 1], 'data': [value] * batch}]}
    status, _, text = http(port, 'POST', f'/v2/models/{model}/infer', body)
    doc = json.loads(text)
    if status != 200: return status, doc.get('error')
    return status, {o['name']: o['data'] for o in doc['outputs']}


def run(port, model, steps):
    "Send `steps` (sid, value, start, end) one after the other; every answer."
    return [infer(port, model, *s) for s in steps]


INTERLEAVED = [(1, 10, True, False), (2, 20, True, False), (1, 11, False, False), (3, 30, True, False),
               (2, 21, False, True), (1, 12, False, False), (3, 31, False, False), (1, 13, False, True),
               (4, 40, True, False), (3, 32, False, True), (4, 41, False, True)]


@pytest.mark.oracle
def test_seq_controls_interleaved_match_triton(mini, triton):
    "direct: controls per request, CORRID as UINT64, flags()/correlation_id(), the batch with its READY=0 fillers."
    ours, theirs = run(mini.http_port, 'seq_controls', INTERLEAVED), run(triton.http_port, 'seq_controls', INTERLEAVED)
    assert ours == theirs
    assert theirs[1][1]['BATCH_READY'] == [0, 1]     # sequence 1 holds slot 0 but sent nothing: a filler before 2
    assert theirs[2][1]['BATCH_READY'] == [1]        # ... and none after the highest ready slot


@pytest.mark.oracle
def test_seq_oldest_interleaved_match_triton(mini, triton):
    "oldest: no fillers, one request per sequence per batch, CORRID as INT64."
    ours, theirs = run(mini.http_port, 'seq_oldest', INTERLEAVED), run(triton.http_port, 'seq_oldest', INTERLEAVED)
    assert ours == theirs


@pytest.mark.oracle
def test_implicit_state_matches_triton(mini, triton):
    "Triton 2.51's Python backend does not update implicit state: every request sees the initial state (zeros)."
    steps = [(7, 1, True, False), (8, 100, True, False), (7, 2, False, False), (8, 200, False, False),
             (7, 3, False, True), (7, 5, True, False), (8, 300, False, True), (7, 6, False, True)]
    ours, theirs = run(mini.http_port, 'seq_state', steps), run(triton.http_port, 'seq_state', steps)
    assert ours == theirs
    assert [r[1]['SEEN'] for r in ours] == [[0, 1], [0, 1], [0, 0], [0, 0], [0, 0], [0, 1], [0, 0], [0, 0]]
    assert all('SUM_OUT' not in r[1] for r in ours)    # an undeclared state output is dropped


@pytest.mark.oracle
def test_string_ids_match_triton(mini, triton):
    steps = [('abc', 1, True, False), ('xyz', 10, True, False), ('abc', 2, False, False), ('xyz', 20, False, True),
             ('abc', 3, False, True)]
    ours, theirs = run(mini.http_port, 'seq_string', steps), run(triton.http_port, 'seq_string', steps)
    assert ours == theirs


ERRORS = [('no id', 'seq_controls', (None, 1, True, False)), ('id 0', 'seq_controls', (0, 1, True, False)),
          ('empty id', 'seq_string', ('', 1, True, False)),
          ('never started', 'seq_controls', (555, 1, False, False)),
          ('batch of 2', 'seq_controls', (556, 1, True, False, 2)),
          ('string id, numeric CORRID', 'seq_controls', ('s1', 1, True, False)),   # accepted; the model's int() fails (500)
          ('string id never started', 'seq_string', ('nope', 1, False, False))]


@pytest.mark.oracle
@pytest.mark.parametrize('what,model,step', ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_triton(mini, triton, what, model, step):
    ours, theirs = infer(mini.http_port, model, *step), infer(triton.http_port, model, *step)
    assert ours == theirs
    assert theirs[0] == (500 if what.startswith('string id, numeric') else 400)


@pytest.mark.oracle
def test_idle_sequence_is_released_as_triton_does(mini, triton):
    "seq_oldest: max_sequence_idle_microseconds 500000; after 2 s idle the sequence is gone."
    for port in (mini.http_port, triton.http_port): assert infer(port, 'seq_oldest', 77, 1, True)[0] == 200
    time.sleep(2.0)    # four times the idle timeout: the servers' reapers have run
    ours, theirs = infer(mini.http_port, 'seq_oldest', 77, 2), infer(triton.http_port, 'seq_oldest', 77, 2)
    assert ours == theirs


@pytest.mark.oracle
@pytest.mark.parametrize('model', ['seq_controls', 'seq_oldest', 'seq_state', 'seq_string'])
def test_config_sequence_batching_matches_triton(mini, triton, model):
    "GET /v2/models/X/config: the autofilled sequence_batching block, byte for byte."
    block = lambda port: json.dumps(json.loads(http(port, 'GET', f'/v2/models/{model}/config')[2])['sequence_batching'])
    assert block(mini.http_port) == block(triton.http_port)


@pytest.mark.oracle
def test_statistics_count_sequence_requests_like_triton(mini, triton, repo):
    "After the same traffic on a fresh model: inference and execution counts (fillers are executions, not inferences)."
    counts = {}
    for name, port in (('mini', mini.http_port), ('triton', triton.http_port)):
        before = json.loads(http(port, 'GET', '/v2/models/seq_controls/stats')[2])['model_stats'][0]
        run(port, 'seq_controls', [(901, 1, True, False), (902, 1, True, False), (901, 2, False, True), (902, 2, False, True)])
        after = settled(lambda: json.loads(http(port, 'GET', '/v2/models/seq_controls/stats')[2])['model_stats'][0])
        counts[name] = (after['inference_count'] - before['inference_count'], after['execution_count'] - before['execution_count'],
                        after['inference_stats']['success']['count'] - before['inference_stats']['success']['count'])
    assert counts['mini'] == counts['triton']


# (seconds after the first, (sid, value, start, end)): seq_slow runs the first request for 1 s, the rest queue meanwhile
REUSED_ID = [(0.0, (5, 1000, True, False)),    # sequence 5 starts on slot 0; its batch takes 1 s
             (0.25, (5, 1, False, True)),      # its END waits in slot 0: from now on id 5 is free
             (0.5, (5, 2, False, False)),      # so no START: refused at once
             (0.6, (5, 3, True, False)),       # START: a new sequence 5, on a free slot (slot 1)
             (0.75, (5, 4, False, True))]      # the new sequence's END


def send_timed(port, model, timed):
    "Send each step from its own thread at its time; the answers in step order."
    out = [None] * len(timed)
    def one(i, delay, step): time.sleep(delay); out[i] = infer(port, model, *step)
    threads = [threading.Thread(target=one, args=(i, d, s)) for i, (d, s) in enumerate(timed)]
    for t in threads: t.start()
    for t in threads: t.join(30)
    return out


@pytest.mark.oracle
def test_reused_id_after_end_is_a_new_sequence_as_in_triton(mini, triton):
    "core's SequenceBatchScheduler::Enqueue forgets an id when END is queued, not run: a START reusing it is a new sequence."
    ours, theirs = send_timed(mini.http_port, 'seq_slow', REUSED_ID), send_timed(triton.http_port, 'seq_slow', REUSED_ID)
    assert ours == theirs
    assert theirs[2][0] == 400 and 'must specify the START flag' in theirs[2][1]
    assert theirs[1][1]['BATCH_READY'] == theirs[3][1]['BATCH_READY'] == [1, 1]   # old 5's END and new 5's START: one batch
    assert theirs[4][1]['BATCH_READY'] == [0, 1]                                   # slot 0 is free: a filler

def infer_timed_out(port, model, sid, value, start, timeout_us):
    "A sequence request with a timeout (the `timeout` parameter, µs): (status, outputs or the error text)."
    body = {'parameters': {'sequence_id': sid, 'sequence_start': start, 'timeout': timeout_us},
            'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [1, 1], 'data': [value]}]}
    status, _, text = http(port, 'POST', f'/v2/models/{model}/infer', body)
    doc = json.loads(text)
    return (status, doc.get('error')) if status != 200 else (status, 'ok')


def backlog_timeout(port):
    """seq_slow's four slots taken by sequences 11-14 (their first batch takes 1 s); sequence 15 waits in the backlog
    with two requests whose timeouts are 0.3 s and 5 s, then sends a request without START after they expired."""
    timed = [(0.0, lambda i=i: infer(port, 'seq_slow', 11 + i, 1000, True, False)) for i in range(4)] + [
             (0.2, lambda: infer_timed_out(port, 'seq_slow', 15, 1, True, 300_000)),
             (0.3, lambda: infer_timed_out(port, 'seq_slow', 15, 2, False, 5_000_000)),
             (1.5, lambda: infer(port, 'seq_slow', 15, 3, False, False))]
    out = [None] * len(timed)
    def one(i, delay, call): time.sleep(delay); out[i] = call()
    threads = [threading.Thread(target=one, args=(i, d, c)) for i, (d, c) in enumerate(timed)]
    for t in threads: t.start()
    for t in threads: t.join(30)
    for sid in range(11, 15): infer(port, 'seq_slow', sid, 1, False, True)   # end the four: free their slots
    return [o if o[0] != 200 else (200, 'ok') for o in out]


@pytest.mark.oracle
def test_backlog_timeout_as_in_triton(mini, triton):
    """A request timeout reaches a sequence waiting in the backlog (core's SequenceBatchScheduler reaper): every request
    it holds fails 503 "timeout of the corresponding sequence has been expired", and the sequence is forgotten."""
    ours, theirs = backlog_timeout(mini.http_port), backlog_timeout(triton.http_port)
    assert ours == theirs
    expired = (503, 'timeout of the corresponding sequence has been expired')
    assert theirs[4:6] == [expired, expired] and theirs[6][0] == 400 and 'must specify the START flag' in theirs[6][1]

# ---- triton_mini alone: concurrency ----

def _accumulator(tmp_path, mbs, count, extra=''):
    "seq_string (sums kept by the model, keyed by correlation id) with `mbs` slots x `count` instances."
    root = tmp_path / 'models'
    shutil.copytree(MODELS / 'seq_string', root / 'seq_string')
    cfg = root / 'seq_string' / 'config.pbtxt'
    cfg.write_text(cfg.read_text().replace('max_batch_size: 2', f'max_batch_size: {mbs}').replace('count: 1', f'count: {count}')
                   .replace('sequence_batching {', 'sequence_batching {' + extra))
    return root


def test_64_sequences_50_steps_8_threads_exact(tmp_path):
    "64 interleaved sequences (64 direct slots) from 8 threads: every sum exact, nothing lost or crossed."
    from triton_mini.server import TritonServer
    with TritonServer(_accumulator(tmp_path, 8, 8)) as server:
        sums, errors = {}, []
        def client(t):
            try:
                for step in range(50):
                    for sid in range(t * 8 + 1, t * 8 + 9):
                        r = server.infer('seq_string', {'IN': np.array([[sid * 1000 + step]], np.int32)}, sequence_id=sid,
                                         sequence_start=step == 0, sequence_end=step == 49, timeout=60)
                        sums[sid] = r['SUM'].item()
            except Exception as e: errors.append(e)
        threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for th in threads: th.start()
        for th in threads: th.join(300)
        assert not errors, errors[:3]
        assert sums == {sid: sum(sid * 1000 + s for s in range(50)) for sid in range(1, 65)}
        assert server.repository.get('seq_string').scheduler.sequences == {}


@pytest.mark.slow
def test_idle_timeout_releases_slots_under_load(tmp_path):
    "One slot, a sequence abandoned by its client: after the idle timeout the backlogged sequences get the slot."
    from triton_mini.server import TritonServer
    with TritonServer(_accumulator(tmp_path, 1, 1, '\n  max_sequence_idle_microseconds: 300000')) as server:
        one = lambda sid, v, **kw: server.infer('seq_string', {'IN': np.array([[v]], np.int32)}, sequence_id=sid, timeout=60, **kw)
        one(1, 5, sequence_start=True)           # sequence 1 takes the only slot and is never ended
        results = {}
        def later(sid):
            results[sid] = [one(sid, 1, sequence_start=True)['SUM'].item(), one(sid, 2, sequence_end=True)['SUM'].item()]
        threads = [threading.Thread(target=later, args=(sid,)) for sid in (2, 3, 4)]
        for th in threads: th.start()
        for th in threads: th.join(60)
        assert results == {2: [1, 3], 3: [1, 3], 4: [1, 3]}
        with pytest.raises(Exception, match='must specify the START flag'): one(1, 1)
