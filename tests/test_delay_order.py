"""`timeout_action: DELAY` keeps arrival order within a priority level, as Triton 2.51 does (issue 42).

Triton moves a request whose queue-policy timeout ran out to its level's *delayed queue*, at the back, in the order
they expire; a level's delayed requests run after its other requests and before the next level's. triton-mini put
each newly expired request ahead of those delayed before it, so requests expiring one by one ran newest first
([0, 3, 2, 1] where Triton runs [0, 1, 2, 3]; with levels [0, 8, 7, 6] where Triton runs [0, 7, 8, 6])."""
import threading, time

import pytest

import triton_servers as ts
from model_factory import http_infer, read_executions, recorder_config, write_model

POLICY = 'timeout_action: DELAY default_timeout_microseconds: 100000'
MODELS = {
    'delay': recorder_config(mbs=1, batching=f'dynamic_batching {{ default_queue_policy {{ {POLICY} }} }}'),
    'delay_levels': recorder_config(mbs=1, batching='dynamic_batching { priority_levels: 2 default_priority_level: 2 '
                                    f'default_queue_policy {{ {POLICY} }} }}'),
}
PACE = 0.05   # seconds between two arrivals: each waiting request expires on its own, 100 ms after it arrived


def write_repo(d):
    for name, cfg in MODELS.items(): write_model(d, name, cfg)
    return d


def order(port, repo, model, priorities) -> list:
    "Request 0 holds the only instance for 0.6 s; the others (ids 1.., `priorities`) arrive PACE apart and expire."
    threads = [threading.Thread(target=http_infer, args=(port, model, [1600], [1, 1], '0'))]
    threads += [threading.Thread(target=http_infer, args=(port, model, [0], [1, 1], str(i)),
                                 kwargs={'params': {'priority': p}} if p else {}) for i, p in priorities]
    for t in threads:
        t.start(); time.sleep(PACE)   # pacing the arrivals, not waiting for anything
    for t in threads: t.join(30)
    return [i for e in read_executions(repo / model) for i in e['ids']]


@pytest.mark.oracle
@pytest.mark.parametrize('mode', ['process', 'thread'])
def test_delay_keeps_arrival_order(launch, tmp_path, mode):
    repo, mini_repo = write_repo(tmp_path / 'triton'), write_repo(tmp_path / 'mini')
    triton, mini = ts.start_together(lambda: launch.real_triton(repo),
                                     lambda: launch.mini_process(mini_repo, f'--python-backend-mode={mode}'))
    cases = [('delay', [(1, 0), (2, 0), (3, 0)], list('0123')), ('delay_levels', [(6, 2), (7, 1), (8, 1)], list('0786'))]
    for model, priorities, observed in cases:
        expected = order(triton.http_port, repo, model, priorities)
        got = order(mini.http_port, mini_repo, model, priorities)
        print(model, 'triton', expected, 'mini', got)
        assert expected == observed   # the oracle, as observed on Triton 2.51
        assert got == expected
