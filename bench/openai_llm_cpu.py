#!/usr/bin/env python
"""CPU time per streamed token in each process: triton-mini (server process, and its stub holding llama.cpp) against
llama_cpp.server (one process), 1 instance x 2 threads, 20 sequential streams after 3 warm-ups. (Issue 15: is the
per-token Python path in the server process what keeps one stream slow?) Linux only (/proc).

    python bench/openai_llm_cpu.py
"""
import sys, os, time, tempfile, statistics, shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]; sys.path[:0] = [str(ROOT), str(ROOT / 'bench')]
import openai_llm as b, openai
from triton_mini.llm import write_tiny_gguf
root = Path(tempfile.mkdtemp(prefix='llm1cpu_')); g = write_tiny_gguf(root/'model.gguf', n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
HZ = os.sysconf('SC_CLK_TCK')
def cpu(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split(); return (int(f[11]) + int(f[12])) / HZ
def kids(pid):
    out = []
    for t in os.listdir(f'/proc/{pid}/task'):
        out += [int(c) for c in open(f'/proc/{pid}/task/{t}/children').read().split()]
    return out
for kind in ('mini', 'llama'):
    proc, port, model = b.start(kind, root, g, 1, 2)
    try:
        client = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key='x', max_retries=0)
        for _ in range(3): b.one_stream(client, model)
        pids = [proc.pid] + kids(proc.pid)
        c0 = [cpu(p) for p in pids]; n = 0; t0 = time.perf_counter(); ttft = []
        for _ in range(20):
            f, k, _w = b.one_stream(client, model); n += k; ttft.append(f)
        wall = time.perf_counter() - t0
        c1 = [cpu(p) for p in pids]
        print(kind, f'pid0 = server, pid1.. = its children (stubs): {n/wall:.0f} tok/s, TTFT median {1000*statistics.median(ttft):.1f} ms;', ', '.join(f'pid{i} cpu {1000*(y-x)/n:.2f} ms/token' for i, (x, y) in enumerate(zip(c0, c1))), flush=True)
    finally: proc.terminate(); proc.wait(30)
shutil.rmtree(root, ignore_errors=True)
