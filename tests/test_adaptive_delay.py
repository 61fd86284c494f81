"""`adaptive_queue_delay` (issue 14, opt-in): a lone client stops paying the dynamic batcher's queue delay; concurrent
clients are batched as with Triton's rule. Behaviour, counted, not timed against a target."""
import threading, time
import numpy as np
import pytest

from triton_mini.server import TritonServer

CONFIG = '''backend: "identity"
max_batch_size: 8
input [{{ name: "X" data_type: TYPE_FP32 dims: [1] }}]
output [{{ name: "Y" data_type: TYPE_FP32 dims: [1] }}]
dynamic_batching {{ preferred_batch_size: [8] max_queue_delay_microseconds: 50000 }}
{extra}'''
ADAPTIVE = 'parameters { key: "adaptive_queue_delay" value { string_value: "true" } }'


@pytest.fixture
def server(tmp_path):
    for name, extra in (('plain', ''), ('adaptive', ADAPTIVE)):
        (tmp_path / name / '1').mkdir(parents=True)
        (tmp_path / name / 'config.pbtxt').write_text(CONFIG.format(extra=extra))
    with TritonServer(tmp_path) as s:
        s.start()
        yield s


def one_at_a_time(server, name, n=24) -> float:
    t = time.monotonic()
    for i in range(n): server.infer(name, {'X': np.array([[i]], np.float32)})
    return time.monotonic() - t


def test_a_lone_client_stops_waiting_for_company(server):
    plain, adaptive = one_at_a_time(server, 'plain'), one_at_a_time(server, 'adaptive')
    learner = server.repository.get('adaptive', -1).scheduler.learner
    assert learner.futile >= learner.futile_limit and learner.probe_every > learner.first_probe
    assert adaptive < 0.5 * plain, (plain, adaptive)        # 24 x 50 ms waits against ~4 learning waits and a probe
    assert server.repository.get('plain', -1).scheduler.learner is None   # off unless the model asks


def test_concurrent_clients_are_still_batched(server):
    one_at_a_time(server, 'adaptive')                        # it learned that waiting does not pay...
    results, start = [], threading.Barrier(8)
    def client(i):
        start.wait()
        for _ in range(6): results.append(server.infer('adaptive', {'X': np.array([[i]], np.float32)}))
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads: t.start()
    for t in threads: t.join(30)
    stats = server.statistics('adaptive')['model_stats'][0]
    assert len(results) == 48
    batched = [b for b in stats['batch_stats'] if b['batch_size'] > 1]
    assert batched, stats['batch_stats']                     # ...yet eight clients at once still share batches
