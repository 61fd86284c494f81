"""`triton-mini analyze` (issue 46, stage 3) as a user runs it: a tiny search on a fast numpy Python model made here,
checked through the files it writes (output model repository, CSV, PNG, HTML) and its choice; bad input in one line."""
import csv, subprocess, sys

import pytest

MODEL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils
W = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            y = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            for _ in range(10): y = np.tanh(y @ W)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y.astype(np.float32))]))
        return out
'''
CONFIG = '''name: "fast"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1, 128 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1, 128 ] } ]
'''


def analyze(*flags, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'triton_mini', 'analyze', *flags], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / 'repo/fast/1').mkdir(parents=True)
    (tmp_path / 'repo/fast/config.pbtxt').write_text(CONFIG)
    (tmp_path / 'repo/fast/1/model.py').write_text(MODEL_PY)
    return tmp_path / 'repo'


@pytest.mark.slow
def test_a_tiny_search_writes_its_report_and_picks_the_measured_best(repo, tmp_path):
    "Two candidates (1 and 2 instances: the model does not batch), two concurrencies, one 1-second window each."
    out = tmp_path / 'out'
    r = analyze('--model-repository', str(repo), '-m', 'fast', '--run-config-search-max-instance-count', '2',
                '--concurrency', '1,2', '-p', '1000', '--max-trials', '1', '--export-path', str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out / 'results/metrics-model-inference.csv')))
    assert sorted({(row['Model Config Path'], row['Instances']) for row in rows}) == [('fast_config_0', '2'), ('fast_config_default', '1')]
    assert len(rows) == 4 and all(float(row['Throughput (infer/sec)']) > 0 for row in rows)
    best = max(rows, key=lambda row: float(row['Throughput (infer/sec)']))
    assert f"{best['Model Config Path']} (" in r.stdout.split('is chosen')[0].splitlines()[-1]    # the sentence names the measured best
    chosen = out / 'output_model_repository' / best['Model Config Path']
    assert (chosen / 'config.pbtxt').is_file() and (chosen / '1/model.py').is_file()
    assert f"count: {best['Instances']}" in (chosen / 'config.pbtxt').read_text()
    assert f'name: "{best["Model Config Path"]}"' in (chosen / 'config.pbtxt').read_text()
    png = (out / 'plots/latency_throughput.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    page = (out / 'reports/summary.html').read_text()
    assert 'data:image/png;base64,' in page and 'is chosen' in page and best['Model Config Path'] in page
    # a second run does not overwrite the output model repository unless asked
    again = analyze('--model-repository', str(repo), '-m', 'fast', '--export-path', str(out))
    assert again.returncode == 1 and again.stderr.count('\n') == 1 and '--override-output-model-repository' in again.stderr


@pytest.mark.parametrize('flags, words', [
    (['--model-repository', '/no/such/repo', '-m', 'fast'], 'model repository /no/such/repo does not exist'),
    (['-m', 'nope'], "model 'nope' is not in the repository"),
    (['-m', 'fast', '--concurrency', 'lots'], '--concurrency takes comma-separated integers'),
])
def test_bad_input_is_one_line(repo, flags, words):
    if '--model-repository' not in flags: flags = ['--model-repository', str(repo), *flags]
    r = analyze(*flags, timeout=60)
    assert (r.returncode, r.stdout) == (1, '')
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1 and words in r.stderr, r.stderr
