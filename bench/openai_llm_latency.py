#!/usr/bin/env python
"""Per-token latency through triton-mini's OpenAI front end, split where model.py can see it: the bundled
qwen_gguf_stream model.py is copied with timestamps added (time.monotonic is one clock for every process on Linux),
1 instance x 2 llama.cpp threads, 20 streams after 3 warm-ups. (Issue 15.)

    python bench/openai_llm_latency.py
"""
import sys, os, time, tempfile, statistics, json, shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]; sys.path[:0] = [str(ROOT), str(ROOT / 'bench')]
import openai_llm as b, openai
from triton_mini.llm import write_tiny_gguf
root = Path(tempfile.mkdtemp(prefix='llm1lat_')); g = write_tiny_gguf(root/'model.gguf', n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
TS = root / 'ts.json'
repo = b.make_repo(root, g, 1, 2); mp = repo/'qwen_gguf_stream'/'1'/'model.py'
src = mp.read_text()
src = src.replace("            for chunk in self.llm(prompt, echo=False, stream=True, **sampling):",
  "            import time as _t; _ts = [_t.monotonic()]\n            for chunk in self.llm(prompt, echo=False, stream=True, **sampling):")
src = src.replace("                    sender.send(text_response(text))", "                    _ts.append(_t.monotonic()); sender.send(text_response(text))")
src = src.replace("            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n        return None",
  "            open(" + repr(str(TS)) + ", 'w').write(json.dumps(_ts))\n            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n        return None")
assert src.count('_ts') == 3; mp.write_text(src)
proc, port, model = b.start('mini', root, g, 1, 2)
try:
    client = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key='x', max_retries=0)
    lat, first, exec_start = [], [], []
    for i in range(23):
        t0 = time.monotonic(); recv = []
        for c in client.completions.create(model=model, prompt=b.PROMPT, max_tokens=b.MAX_TOKENS, temperature=0, stream=True):
            if c.choices and c.choices[0].text: recv.append(time.monotonic())
        if i < 3: continue
        ts = json.load(open(TS))
        exec_start.append(ts[0] - t0); first.append(ts[1] - ts[0])
        lat += [r - s for r, s in zip(recv, ts[1:])]
    ms = lambda xs: f'median {1000*statistics.median(xs):.2f} ms, p90 {1000*sorted(xs)[int(.9*len(xs))]:.2f} ms'
    print('client send -> execute starts:', ms(exec_start)); print('execute start -> first token produced (llama.cpp):', ms(first))
    print('token sent in model.py -> chunk parsed by client:', ms(lat), f'({len(lat)} tokens)')
finally: proc.terminate(); proc.wait(30); shutil.rmtree(root, ignore_errors=True)
