"""`model_warmup` as Triton 2.51 runs it (issue 42): on every instance, before the model is READY, an entry's
`batch_size: N` as one execution of N requests of batch 1, `count` times, each counted in the statistics.

triton-mini used to send one request of shape [N, ...] to whichever instance the scheduler picked: with `count: 2`
only one instance was warmed."""
import collections, json

import pytest

import triton_servers as ts
from model_factory import read_executions, recorder_config, write_model

ENTRY = '{{ name: "{name}" batch_size: {n} count: {count} inputs {{ key: "X" value: {{ data_type: TYPE_INT32 dims: [ 3 ] zero_data: true }} }} }}'
WARMUP = f'model_warmup [ {ENTRY.format(name="w2", n=2, count=1)}, {ENTRY.format(name="w1", n=1, count=2)} ]'


def warmup_repo(d):
    "The two models, each in a fresh folder per server (each execution leaves a line in the model's folder)."
    write_model(d, 'warm', recorder_config(instances=2) + '\n' + WARMUP)
    write_model(d, 'warmdb', recorder_config(instances=2, batching='dynamic_batching { }') + '\n' + WARMUP)
    return d


def warmed(server, repo, model) -> tuple:
    "What the warmup ran: per instance, the sorted (requests, shapes) of its executions; and the model's counts."
    runs = collections.defaultdict(list)
    for e in read_executions(repo / model): runs[e['instance']].append((e['n'], e['shapes']))
    stats = json.loads(ts.http(server.http_port, 'GET', f'/v2/models/{model}/stats')[2])['model_stats'][0]
    return ({k: sorted(v) for k, v in runs.items()},
            (stats['execution_count'], stats['inference_count'], stats['inference_stats']['success']['count']))


@pytest.mark.oracle
@pytest.mark.parametrize('mode', ['process', 'thread'])
def test_warmup_per_instance(launch, tmp_path, mode):
    repo, mini_repo = warmup_repo(tmp_path / 'triton'), warmup_repo(tmp_path / 'mini')
    triton, mini = ts.start_together(lambda: launch.real_triton(repo),
                                     lambda: launch.mini_process(mini_repo, f'--python-backend-mode={mode}'))
    for model in ('warm', 'warmdb'):
        expected = warmed(triton, repo, model)
        assert expected == ({f'{model}_0_{i}': [(1, [[[1, 3]]]), (1, [[[1, 3]]]), (2, [[[1, 3]], [[1, 3]]])] for i in (0, 1)},
                            (6, 8, 8))   # the oracle, as observed
        assert warmed(mini, mini_repo, model) == expected
