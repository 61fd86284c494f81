"""Two Python bindings of llama.cpp on the same GGUF files: llama-cpp-python (what the bundled qwen_gguf model.py
imports; PyPI has only its source, so pip compiles llama.cpp) against xllamacpp (prebuilt CPU wheels on PyPI).

For each binding, GGUF, thread count and caller (the main thread, or a Python worker thread as triton_mini runs a
model instance's execute), one fresh process loads the model, warms up with one short generation, then streams
one greedy generation of the guide's prompt and records when each token arrives: time to first token (prompt
evaluation + first token) and decode tokens/s ((n-1) / (last - first)). Rounds interleave the bindings so a
shared machine's drift hits both; the medians go to stdout and, with every raw run, to
bench/results/<date>-llm-bindings.json.

The GGUFs: the bundled stand-in (qwen_gguf/1/model.gguf, 2 x 64, 259 tokens) and a random-weight model of
Qwen2.5-0.5B's shape (24 layers x 896, 14 heads, ffn 4864, 151,936 tokens, Q4_0: about 370 MB, close to the
guide's Qwen3.5-0.8B Q4_K_M), written by triton_mini.llm.write_tiny_gguf. Random weights cost the same
arithmetic as trained ones, so the speeds carry over; the text does not.

    python bench/llm_bindings.py                      # both bindings importable by this Python
    python bench/llm_bindings.py --install            # fresh venvs, empty pip cache: also times each pip install
    python bench/llm_bindings.py                      # again: reuses those venvs and their install times
    python bench/llm_bindings.py --xllamacpp-python /tmp/xl/bin/python --rounds 5

It is not a timed test: nothing asserts on the numbers.
"""
import argparse, datetime, json, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = '请用中文介绍人工智能'
PACKAGES = {'llama-cpp-python': 'llama_cpp', 'xllamacpp': 'xllamacpp'}

# One measurement, run by the binding's own Python: argv = binding, gguf, threads, caller, tokens, out.json
WORKER = r'''
import json, sys, threading, time
binding, gguf, threads, caller, tokens, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
PROMPT = "请用中文介绍人工智能"

def load():
    if binding == "llama-cpp-python":
        from llama_cpp import Llama
        llm = Llama(model_path=gguf, n_ctx=4096, n_threads=threads, n_threads_batch=threads, n_gpu_layers=0, verbose=False)
        def generate(n, on_token):          # the bundled qwen_gguf_stream model.py's call
            for chunk in llm(PROMPT, max_tokens=n, temperature=0, stream=True):
                if chunk["choices"][0]["text"]: on_token(chunk["choices"][0]["text"])
        return generate
    import xllamacpp as xl
    p = xl.CommonParams()
    p.model.path = gguf; p.n_ctx = 4096; p.n_parallel = 1; p.n_gpu_layers = 0; p.warmup = False
    p.cpuparams.n_threads = threads; p.cpuparams_batch.n_threads = threads
    server = xl.Server(p)
    def generate(n, on_token):              # OpenAI-style completion request; the callback gets each chunk
        def cb(chunk):
            text = chunk["choices"][0]["text"] if isinstance(chunk, dict) and chunk.get("choices") else ""
            if text: on_token(text)
        server.handle_completions({"prompt": PROMPT, "max_tokens": n, "temperature": 0, "stream": True}, cb)
    return generate

def run():
    t = time.perf_counter(); generate = load(); result["load_s"] = time.perf_counter() - t
    generate(4, lambda text: None)          # warm-up
    stamps, texts = [], []
    start = time.perf_counter()
    generate(tokens, lambda text: (stamps.append(time.perf_counter()), texts.append(text)))
    result.update(tokens=len(stamps), ttft_s=stamps[0] - start if stamps else None, text="".join(texts)[:64],
                  decode_tok_s=(len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else None)

result = {}
if caller == "thread":
    th = threading.Thread(target=run); th.start(); th.join()
else: run()
json.dump(result, open(out, "w"))
'''


def write_models(cache:Path) -> dict:
    "The two GGUFs, written once into `cache`."
    sys.path.insert(0, str(ROOT))
    from gguf import TokenType
    from triton_mini.llm import byte_vocab, write_tiny_gguf
    cache.mkdir(parents=True, exist_ok=True)
    big = cache / 'qwen2.5-0.5b-shape-q4_0.gguf'
    if not big.exists():
        print(f'writing {big.name} (random weights, Q4_0; about a minute) ...', flush=True)
        vocab = byte_vocab() + [(f'w{i}', TokenType.NORMAL, True) for i in range(151_936 - 259)]
        write_tiny_gguf(big.with_suffix('.tmp'), n_layer=24, n_embd=896, n_head=14, n_ff=4864, vocab=vocab, qtype='Q4_0')
        big.with_suffix('.tmp').rename(big)
    return {'bundled stand-in (237 KB)': ROOT / 'model_repository' / 'qwen_gguf' / '1' / 'model.gguf',
            f'Qwen2.5-0.5B shape, Q4_0 ({big.stat().st_size / 2**20:.0f} MB)': big}


def install(root:Path) -> tuple:
    "A fresh venv per binding, pip cache empty; returns ({binding: python}, {binding: seconds}), also kept in root."
    pythons, seconds = {}, {}
    for pkg in PACKAGES:
        venv, cache = root / pkg, root / f'{pkg}-pip-cache'
        shutil.rmtree(venv, ignore_errors=True); shutil.rmtree(cache, ignore_errors=True)
        subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True)
        print(f'pip install {pkg} in a fresh venv (empty cache) ...', flush=True)
        t = time.perf_counter()
        subprocess.run([str(venv / 'bin' / 'pip'), 'install', '-q', '--disable-pip-version-check', pkg], check=True,
                       env={**os.environ, 'PIP_CACHE_DIR': str(cache)})
        seconds[pkg] = round(time.perf_counter() - t, 1)
        print(f'  {seconds[pkg]} s', flush=True)
        pythons[pkg] = str(venv / 'bin' / 'python')
    (root / 'install_seconds.json').write_text(json.dumps(seconds))
    return pythons, seconds


def installed(root:Path) -> tuple:
    "The venvs and install times of an earlier --install run into `root`."
    return ({pkg: str(root / pkg / 'bin' / 'python') for pkg in PACKAGES},
            json.loads((root / 'install_seconds.json').read_text()))


def version(python:str, pkg:str) -> str:
    code = f'import importlib.metadata as m; print(m.version({pkg!r}))'
    return subprocess.run([python, '-c', code], capture_output=True, text=True).stdout.strip()


def measure(python, binding, gguf, threads, caller, tokens) -> dict:
    with tempfile.NamedTemporaryFile(suffix='.json') as out:
        r = subprocess.run([python, '-c', WORKER, binding, str(gguf), str(threads), caller, str(tokens), out.name],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0: return {'error': r.stderr[-2000:]}
        return json.loads(Path(out.name).read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--llama-cpp-python-python', default=sys.executable, metavar='PYTHON')
    ap.add_argument('--xllamacpp-python', default=sys.executable, metavar='PYTHON')
    ap.add_argument('--install', action='store_true', help='fresh venvs with an empty pip cache; time each install')
    ap.add_argument('--venvs', default=str(Path(tempfile.gettempdir()) / 'llm-bindings-venvs'),
                    help='where --install puts its venvs; a later run without --install reuses them')
    ap.add_argument('--cache', default=str(Path(tempfile.gettempdir()) / 'triton_mini_bench_gguf'))
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--tokens', type=int, default=64)
    ap.add_argument('--threads', type=int, nargs='+', default=[1, 2])
    ap.add_argument('--no-save', action='store_true')
    a = ap.parse_args()
    pythons = {'llama-cpp-python': a.llama_cpp_python_python, 'xllamacpp': a.xllamacpp_python}
    install_s = {}
    if a.install: pythons, install_s = install(Path(a.venvs))
    elif (Path(a.venvs) / 'install_seconds.json').exists(): pythons, install_s = installed(Path(a.venvs))
    models = write_models(Path(a.cache))
    runs = []
    for rnd in range(a.rounds):
        for model, gguf in models.items():
            for threads in a.threads:
                for caller in ('main', 'thread'):
                    for binding in (PACKAGES if rnd % 2 == 0 else list(PACKAGES)[::-1]):
                        r = measure(pythons[binding], binding, gguf, threads, caller, a.tokens)
                        runs.append(dict(round=rnd, model=model, threads=threads, caller=caller, binding=binding, **r,
                                         load_average_1min=round(os.getloadavg()[0], 2)))
                        print(json.dumps(runs[-1], ensure_ascii=False), flush=True)
    summary = summarize(runs)
    doc = {'date': datetime.date.today().isoformat(), 'prompt': PROMPT, 'tokens': a.tokens, 'rounds': a.rounds,
           'cpus': len(os.sched_getaffinity(0)), 'load_average': os.getloadavg(),
           'versions': {b: version(p, b) for b, p in pythons.items()}, 'install_seconds_fresh_venv_empty_cache': install_s,
           'summary': summary, 'runs': runs}
    print_table(doc)
    if not a.no_save:
        out = ROOT / 'bench' / 'results' / f'{doc["date"]}-llm-bindings.json'
        out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + '\n')
        print(f'wrote {out.relative_to(ROOT)}')


def summarize(runs) -> list:
    "Medians over rounds for each (model, threads, caller, binding)."
    keys = sorted({(r['model'], r['threads'], r['caller'], r['binding']) for r in runs}, key=str)
    med = lambda xs: round(statistics.median(xs), 4) if xs else None
    out = []
    for k in keys:
        rs = [r for r in runs if (r['model'], r['threads'], r['caller'], r['binding']) == k and 'error' not in r]
        out.append(dict(zip(('model', 'threads', 'caller', 'binding'), k), n=len(rs),
                        decode_tok_s=med([r['decode_tok_s'] for r in rs if r.get('decode_tok_s')]),
                        decode_tok_s_range=[round(f([r['decode_tok_s'] for r in rs if r.get('decode_tok_s')]), 1) for f in (min, max)] if rs else None,
                        ttft_ms=med([1000 * r['ttft_s'] for r in rs if r.get('ttft_s') is not None]),
                        load_s=med([r['load_s'] for r in rs]), tokens=med([r['tokens'] for r in rs])))
    for s in out:   # same model, same greedy decoding: do the two bindings write the same text?
        texts = {r['binding']: r.get('text') for r in runs if (r['model'], r['threads'], r['caller'], r['round']) == (s['model'], s['threads'], s['caller'], 0)}
        s['same_text_as_other_binding'] = len(set(texts.values())) == 1 if len(texts) == 2 else None
    return out


def print_table(doc):
    print(f"\nversions {doc['versions']}; install (fresh venv, empty cache) {doc['install_seconds_fresh_venv_empty_cache']}")
    print('| model | threads | caller | binding | decode tok/s (min-max) | time to first token, ms | load, s | same text |')
    print('|---|---|---|---|---|---|---|---|')
    for s in doc['summary']:
        lo, hi = s['decode_tok_s_range'] or (None, None)
        print(f"| {s['model']} | {s['threads']} | {s['caller']} | {s['binding']} | {s['decode_tok_s']:.1f} ({lo}-{hi}) "
              f"| {s['ttft_ms']:.1f} | {s['load_s']:.2f} | {s['same_text_as_other_binding']} |")


if __name__ == '__main__': main()
