"""Tokens/s of an LLM served by triton_mini for instance_group count x llama.cpp n_threads (nbs/11_llm.ipynb).

Writes a 51 MB random-weight GGUF (8 layers x 512, triton_mini.llm.write_tiny_gguf), serves seed 003's model.py
with each (count, n_threads) pair from one repository, and measures greedy 32-token generations: one client
alone, then two clients at once, interleaved over rounds; prints medians.

    python bench/llm_threads.py [rounds] [thread|process ...]    # default: 5 rounds, both modes (stub processes are the served default)
"""
import shutil, statistics, sys, tempfile, threading, time
from pathlib import Path

import numpy as np
from triton_mini.cli import example_repository
from triton_mini.llm import write_tiny_gguf
from triton_mini.server import TritonServer

CONFIGS = [(1, 1), (1, 2), (2, 1), (2, 2)]
TOKENS = 32


def build_repository(root:Path) -> Path:
    gguf = write_tiny_gguf(root / 'medium.gguf', n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
    src = example_repository() / 'qwen_gguf'
    for count, threads in CONFIGS:
        d = root / 'models' / f'q_{count}_{threads}'
        (d / '1').mkdir(parents=True)
        shutil.copy(src / '1' / 'model.py', d / '1' / 'model.py')
        (d / '1' / 'model.gguf').symlink_to(gguf)
        cfg = (src / 'config.pbtxt').read_text().replace('name: "qwen_gguf"', f'name: "q_{count}_{threads}"')
        cfg = cfg.replace('count: 1 ', f'count: {count} ').replace('string_value: "1" } }\n]', f'string_value: "{threads}" }} }}\n]')
        (d / 'config.pbtxt').write_text(cfg)
    return root / 'models'


def generate(server, name) -> float:
    t = time.perf_counter()
    server.infer(name, {'prompt': ['请用中文介绍人工智能'], 'max_tokens': np.array([TOKENS], np.int32),
                        'temperature': np.array([0.0], np.float32)})
    return time.perf_counter() - t


def measure(models:Path, mode:str, rounds:int) -> dict:
    "Tokens/s per (count, n_threads): one client alone, then two at once, `rounds` times, Python models run in `mode`."
    with TritonServer(models, python_backend_mode=mode) as server:
        results = {c: {'one': [], 'two': []} for c in CONFIGS}
        for c in CONFIGS: generate(server, f'q_{c[0]}_{c[1]}')          # warm up
        for _ in range(rounds):
            for c in CONFIGS:
                name = f'q_{c[0]}_{c[1]}'
                results[c]['one'].append(TOKENS / generate(server, name))
                threads = [threading.Thread(target=generate, args=(server, name)) for _ in range(2)]
                t = time.perf_counter()
                for th in threads: th.start()
                for th in threads: th.join()
                results[c]['two'].append(2 * TOKENS / (time.perf_counter() - t))
    return results


def main(rounds:int=5, modes=('process', 'thread')):
    with tempfile.TemporaryDirectory() as tmp:
        models = build_repository(Path(tmp))
        runs = {mode: measure(models, mode, rounds) for mode in modes}
    print('| mode | count x n_threads | 1 client tok/s | 2 clients at once, total tok/s |\n|---|---|---|---|')
    for mode, results in runs.items():
        for (count, threads), r in results.items():
            print(f"| {mode} | {count} x {threads} | {statistics.median(r['one']):.0f} | {statistics.median(r['two']):.0f} |")


if __name__ == '__main__': main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, tuple(sys.argv[2:]) or ('process', 'thread'))
