"""`--metrics-config`: Triton's latency summaries (summary_latencies, summary_quantiles) and counter_latencies=false.
Unit tests of the CKMS sketch and its sliding window against numpy, and the real Triton 2.51 as the judge of the
families, help texts, label sets, quantile labels and counts."""
import math, socket
import numpy as np
import pytest

parser = pytest.importorskip('prometheus_client.parser')
from triton_mini.metrics import (CKMSQuantiles, DEFAULT_QUANTILES, MetricsConfig, Summary, parse_metrics_config,
                                 parse_quantiles)
from triton_servers import copy_models, http, settled, start_together, wait_until

ADD_SUB = {'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 2, 3, 4]} for n in ('INPUT0', 'INPUT1')]}


def metrics_text(server) -> str:
    "The server's /metrics. Real Triton opens its metrics port tens of ms after it answers ready: wait for the port."
    wait_until(lambda: _accepts(server.metrics_port), 30, 'the metrics port')
    return http(server.metrics_port, 'GET', '/metrics')[2]


def _accepts(port:int) -> bool:
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=1): return True
    except OSError: return False


def rank_error(data, value, q) -> float:
    "How far from `q` the ranks `value` holds in `data` are, as a fraction (0 when its run of equal values covers q)."
    s = np.sort(data)
    lo, hi = np.searchsorted(s, value, 'left') / len(s), np.searchsorted(s, value, 'right') / len(s)
    return max(lo - q, q - hi, 0)


@pytest.mark.parametrize('dist', ['uniform', 'lognormal', 'integers'])
def test_ckms_quantiles_within_their_rank_error_of_numpy(dist):
    rng = np.random.default_rng(1)
    data = {'uniform': rng.uniform(0, 1000, 20_000), 'lognormal': rng.lognormal(6, 1.5, 20_000),
            'integers': rng.integers(0, 50, 20_000).astype(float)}[dist]
    ck = CKMSQuantiles(DEFAULT_QUANTILES)
    for v in data: ck.insert(v)
    for q, err in DEFAULT_QUANTILES:
        got = ck.get(q)
        assert rank_error(data, got, q) <= err + 1 / len(data), (q, got, np.quantile(data, q))
    assert len(ck.samples) < len(data) / 4   # bounded: a sketch, not a copy


def test_ckms_small_sets_match_what_triton_printed():
    "Three add_sub requests on real Triton took 562, 711 and 52391 µs; it printed 562 for the median, 711 above."
    ck = CKMSQuantiles(DEFAULT_QUANTILES)
    for v in (711, 52391, 562): ck.insert(v)
    assert [ck.get(q) for q, _ in DEFAULT_QUANTILES] == [562, 711, 711, 711, 711]


def test_ckms_exact_on_one_value_and_nan_on_none():
    ck = CKMSQuantiles(DEFAULT_QUANTILES)
    assert math.isnan(ck.get(0.5))
    ck.insert(7)
    assert [ck.get(q) for q, _ in DEFAULT_QUANTILES] == [7] * 5


def test_summary_window_forgets_after_max_age_but_keeps_count_and_sum():
    now = [0.0]
    s = Summary(clock=lambda: now[0])
    for v in range(1, 101): s.observe(v)
    count, total, values = s.collect()
    assert (count, total) == (100, 5050)
    assert abs(dict(values)[0.5] - np.quantile(np.arange(1, 101), 0.5)) <= 5
    now[0] = 61
    count, total, values = s.collect()
    assert (count, total) == (100, 5050) and all(math.isnan(v) for _, v in values)
    s.observe(3)
    assert dict(s.collect()[2])[0.9] == 3


def test_settings_read_as_triton_reads_them():
    assert MetricsConfig.from_settings({'summary_latencies': 'maybe', 'foo': 'bar', 'histogram_latencies': 'true'}) == MetricsConfig()
    assert MetricsConfig.from_settings({'summary_latencies': 'True'}).summary_latencies is False   # only 'true', as in Triton
    assert parse_quantiles('0.5:0.05, 0.9:0.01') == ((0.5, 0.05), (0.9, 0.01))
    assert parse_quantiles('0.5:x,abc,0.7:0.1') == ((0.7, 0.1),)
    with pytest.raises(ValueError, match='Got foo'): parse_metrics_config(['foo'])


def summary_view(text:str) -> dict:
    "{family: (type, help, {frozenset(labels) of each sample, quantile label included}, {model: count})} of the summary families."
    out = {}
    for f in parser.text_string_to_metric_families(text):
        if f.type != 'summary': continue
        labels = {(s.name[len(f.name):], frozenset(s.labels.items())) for s in f.samples}
        counts = {s.labels['model']: s.value for s in f.samples if s.name == f.name + '_count'}
        out[f.name] = (f.type, f.documentation, labels, counts)
    return out


def type_lines(text:str) -> list: return [l for l in text.splitlines() if l.startswith(('# HELP', '# TYPE'))]


@pytest.mark.oracle
def test_summaries_match_real_triton(tmp_path, real_triton, mini_process):
    repo = copy_models(tmp_path / 'models', 'conformance/add_sub', 'conformance/decoupled')
    flags = ('--metrics-config=summary_latencies=true', '--metrics-config=summary_quantiles=0.5:0.05,0.9:0.01,0.99:0.001')
    theirs, ours = start_together(lambda: real_triton(repo, *flags), lambda: mini_process(repo, *flags))
    scrape = lambda srv: metrics_text(srv)
    before = [scrape(s) for s in (theirs, ours)]
    assert summary_view(before[0]) == summary_view(before[1])
    nan_lines = lambda t: sorted(l for l in t.splitlines() if l.endswith(' Nan'))
    assert nan_lines(before[0]) == nan_lines(before[1]) and len(nan_lines(before[0])) == 2 * 5 * 3
    for srv in (theirs, ours):
        for _ in range(5): assert http(srv.http_port, 'POST', '/v2/models/add_sub/infer', ADD_SUB)[0] == 200
    after = [scrape(s) for s in (theirs, ours)]
    v_theirs, v_ours = summary_view(after[0]), summary_view(after[1])
    assert v_theirs == v_ours
    assert v_ours['nv_inference_request_summary_us'][3] == {'add_sub': 5, 'decoupled': 0}
    summary_help = [l for l in type_lines(after[0]) if 'summary' in l]
    assert summary_help == [l for l in type_lines(after[1]) if 'summary' in l]
    add_sub = lambda t: sorted(l.rsplit(' ', 1)[0] for l in t.splitlines() if 'summary_us{model="add_sub"' in l)
    assert add_sub(after[0]) == add_sub(after[1])   # same series, label order included (quantile last)


@pytest.mark.oracle
def test_counter_latencies_false_matches_real_triton(tmp_path, real_triton, mini_process):
    repo = copy_models(tmp_path / 'models', 'conformance/add_sub')
    flags = ('--metrics-config=counter_latencies=false', '--metrics-config=foo=bar')
    servers = start_together(lambda: real_triton(repo, *flags), lambda: mini_process(repo, *flags))
    families = [{l.split()[2] for l in type_lines(metrics_text(s)) if l.startswith('# TYPE nv_inference')}
                for s in servers]
    assert families[0] == families[1] and not any(f.endswith('_duration_us') for f in families[0])


@pytest.mark.oracle
def test_metrics_config_without_equals_stops_like_real_triton(tmp_path, real_triton, mini_process):
    repo = copy_models(tmp_path / 'models', 'conformance/add_sub')
    servers = [launch(repo, '--metrics-config=foo', wait=None) for launch in (real_triton, mini_process)]
    codes = [s.proc.wait(120) for s in servers]
    assert codes == [1, 1]
    for s in servers: assert '--metrics-config option format is <setting>=<value>. Got foo' in s.log()


@pytest.mark.oracle
def test_a_model_loaded_later_has_summaries_from_its_first_request(tmp_path, real_triton, mini_process):
    """Triton gives a version its summaries as it loads: an explicit load, then three requests before any scrape,
    counts 3. (A reload is not compared: Triton reuses the old version's reporter while anything still holds it,
    MetricModelReporter::Create keys them by label, so its count after unload+load+1 request was 4 in one run, 1 in
    another; a reloaded version here starts again.)"""
    repo = copy_models(tmp_path / 'models', 'conformance/add_sub', 'conformance/add_sub_nobatch')
    flags = ('--model-control-mode=explicit', '--load-model=add_sub_nobatch', '--metrics-config=summary_latencies=true')
    servers = start_together(lambda: real_triton(repo, *flags), lambda: mini_process(repo, *flags))
    views = []
    for srv in servers:
        assert http(srv.http_port, 'POST', '/v2/repository/models/add_sub/load')[0] == 200
        for _ in range(3): assert http(srv.http_port, 'POST', '/v2/models/add_sub/infer', ADD_SUB)[0] == 200
        views.append(settled(lambda: summary_view(metrics_text(srv))))   # counted at release
    assert views[0] == views[1]
    assert views[1]['nv_inference_request_summary_us'][3] == {'add_sub': 3, 'add_sub_nobatch': 0}
