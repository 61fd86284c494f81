#!/usr/bin/env python
"""Where the first token's time goes through triton-mini's OpenAI front end, against `generate_stream` on the same
model and the same server (issue 15). The server runs under a launcher (this file with --serve) that wraps a few
functions with time.monotonic stamps (one clock for every process on Linux); model.py is the bundled
qwen_gguf_stream's with two stamps added (execute starts, first token sent). Requests go one at a time, the APIs in
turn, every one from the same raw http.client code (and the OpenAI API once more through the `openai` SDK, as
bench/openai_llm.py measures it); llama_cpp.server on the same GGUF is interleaved as the reference.

    python bench/openai_ttft.py --requests 40
    python bench/openai_ttft.py --tree before=/path/to/old/checkout --tree after=.   # old and new code, same run

Hops (medians over the requests, ms):
  client -> app        client sends until the front end's ASGI app is called (connect, uvicorn's parse)
  app -> submit        the front end's work before TritonServer.submit (body, JSON, model lookup, request building)
  submit -> execute    scheduler, the instance thread, the stub hop, model.py reading its inputs
  execute -> token     llama.cpp's first token (model.py's stamps)
  token -> loop        the response's hop back: stub -> server process -> the event loop's queue
  loop -> send         the front end's work on the first token (decode, chunk JSON, SSE framing) until send()
  send -> client       uvicorn writes it, the client reads and parses it
"""
import argparse, http.client, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT, MAX_TOKENS = 'Once upon a time', 96


def serve(stamps:str, argv:list):
    "The launcher: triton-mini's CLI with stamps on the request path, one JSON line per request appended to `stamps`."
    import triton_mini.server as srv, triton_mini.openai_frontend as oai, triton_mini.http_server as hs
    from triton_mini.cli import main
    now, cur = time.monotonic, {}

    def wrap_app(cls):
        orig = cls.__call__
        async def __call__(self, scope, receive, send):
            if scope['type'] != 'http' or scope['method'] != 'POST': return await orig(self, scope, receive, send)
            cur.clear(); cur['app'] = now()
            async def stamped_send(msg):
                if msg['type'] == 'http.response.body' and msg.get('body') and 'send' not in cur: cur['send'] = now()
                await send(msg)
            await orig(self, scope, receive, stamped_send)
            with open(stamps, 'a') as f: f.write(json.dumps(cur) + '\n')
        cls.__call__ = __call__
    wrap_app(oai.OpenAIFrontend); wrap_app(hs.HTTPFrontend)

    submit = srv.TritonServer.submit
    def stamped_submit(self, req):
        cur.setdefault('submit', now())
        return submit(self, req)
    srv.TritonServer.submit = stamped_submit

    def stamped_call_in_loop(loop, fn, *args):
        if 'cb' not in cur:
            cur['cb'] = now()
            def first(*a):
                cur['loop'] = now(); return fn(*a)
            return srv.call_in_loop(loop, first, *args)
        return srv.call_in_loop(loop, fn, *args)
    for mod in (oai, hs):
        if hasattr(mod, 'call_in_loop'): mod.call_in_loop = stamped_call_in_loop
    sys.exit(main(argv))


def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def stamped_repo(root:Path, gguf:Path, exec_stamps:Path) -> Path:
    "bench/openai_llm.py's 1 instance x 2 threads repository, model.py stamping execute's start and its first token."
    sys.path.insert(0, str(ROOT / 'bench')); import openai_llm
    repo = openai_llm.make_repo(root, gguf, 1, 2)
    mp = repo / 'qwen_gguf_stream' / '1' / 'model.py'
    src = mp.read_text()
    src = src.replace("            for chunk in self.llm(prompt, echo=False, stream=True, **sampling):",
                      "            import time as _t; _ts = [_t.monotonic()]\n            for chunk in self.llm(prompt, echo=False, stream=True, **sampling):")
    src = src.replace("                    sender.send(text_response(text))",
                      "                    if len(_ts) == 1: _ts.append(_t.monotonic())\n                    sender.send(text_response(text))")
    src = src.replace("            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n        return None",
                      f"            open({str(exec_stamps)!r}, 'a').write(json.dumps(_ts) + '\\n')\n"
                      "            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n        return None")
    assert src.count('_ts') == 4, 'model.py changed: update the stamps'
    mp.write_text(src)
    return repo


def wait_ready(port, proc, path, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None: raise RuntimeError(f'server exited with {proc.returncode}')
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=2); c.request('GET', path)
            if c.getresponse().status == 200: return
        except OSError: time.sleep(0.3)
    raise TimeoutError('server did not become ready')


def raw_stream(port, path, body, text_of):
    "One streamed request over a fresh connection, as the SDK makes one: (monotonic at send, monotonic at the first text)."
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=300)
    t0, first = time.monotonic(), None
    conn.request('POST', path, json.dumps(body), {'Content-Type': 'application/json'})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    for line in r:
        if line.startswith(b'data:') and first is None and line[5:].strip() != b'[DONE]' and text_of(json.loads(line[5:])): first = time.monotonic()
    conn.close()
    return t0, first


def completion_text(doc): return doc.get('choices') and doc['choices'][0].get('text')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--requests', type=int, default=40)
    ap.add_argument('--tree', action='append', default=[], metavar='LABEL=PATH',
                    help='a triton-mini checkout to serve from (repeatable; default: this one)')
    ap.add_argument('--no-llama', action='store_true')
    ap.add_argument('--mode', default='process', choices=('process', 'thread'), help="--python-backend-mode (bench/openai_llm.py's: process)")
    ap.add_argument('--pause', type=float, default=0.05)
    ap.add_argument('--out', default=None, help='append the table to this markdown file')
    if sys.argv[1:2] == ['--serve']: return serve(sys.argv[2], sys.argv[3:])
    args = ap.parse_args()
    import openai
    sys.path.insert(0, str(ROOT)); from triton_mini.llm import write_tiny_gguf
    trees = [t.split('=', 1) for t in args.tree] or [['triton-mini', str(ROOT)]]
    root = Path(tempfile.mkdtemp(prefix='openai_ttft_'))
    gguf = root / 'model.gguf'
    write_tiny_gguf(gguf, n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
    procs, runs, stamp_files = [], {}, {}
    body = {'prompt': PROMPT, 'max_tokens': MAX_TOKENS, 'temperature': 0.0}
    try:
        for label, tree in trees:
            d = root / label; d.mkdir()
            ex, st = d / 'exec.jsonl', d / 'server.jsonl'
            repo = stamped_repo(d, gguf, ex)
            oport, hport = free_port(), free_port()
            cmd = [sys.executable, __file__, '--serve', str(st), '--model-repository', str(repo), f'--python-backend-mode={args.mode}',
                   '--allow-grpc=false', '--allow-metrics=false', f'--http-port={hport}', f'--openai-port={oport}', '--log-info=false']
            p = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(Path(tree).resolve())), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p); wait_ready(oport, p, '/v1/models')
            stamp_files[label] = (ex, st)
            client = openai.OpenAI(base_url=f'http://127.0.0.1:{oport}/v1', api_key='x', max_retries=0, timeout=300)
            runs[f'{label}, OpenAI /v1/completions'] = (label, lambda p=oport: raw_stream(p, '/v1/completions', dict(body, model='qwen_gguf_stream', stream=True), completion_text))
            runs[f'{label}, generate_stream'] = (label, lambda p=hport: raw_stream(p, '/v2/models/qwen_gguf_stream/generate_stream', body, lambda d: d.get('generated_text')))
            runs[f'{label}, OpenAI via the openai SDK'] = (label, lambda c=client: sdk_stream(c, 'qwen_gguf_stream'))
        if not args.no_llama:
            lport = free_port()
            p = subprocess.Popen([sys.executable, '-m', 'llama_cpp.server', '--model', str(gguf), '--n_threads', '2', '--host', '127.0.0.1',
                                  '--port', str(lport), '--n_ctx', '512', '--verbose', 'false'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p); wait_ready(lport, p, '/v1/models')
            lclient = openai.OpenAI(base_url=f'http://127.0.0.1:{lport}/v1', api_key='x', max_retries=0, timeout=300)
            runs['llama_cpp.server, /v1/completions'] = (None, lambda p=lport: raw_stream(p, '/v1/completions', dict(body, model=str(gguf), stream=True), completion_text))
            runs['llama_cpp.server, via the openai SDK'] = (None, lambda c=lclient: sdk_stream(c, str(gguf)))
        for _ in range(3):
            for _, run in runs.values(): run()
        time.sleep(0.3)
        for ex, st in stamp_files.values(): ex.write_text(''); st.write_text('')
        rows = {k: [] for k in runs}
        for i in range(args.requests):
            for name, (label, run) in runs.items():
                time.sleep(args.pause)
                t0, first = run()
                row = {'ttft': first - t0}
                if label is not None:
                    time.sleep(0.02)   # the stamps are written as the request ends
                    ex, st = stamp_files[label]
                    e, s = json.loads(ex.read_text().splitlines()[-1]), json.loads(st.read_text().splitlines()[-1])
                    ex.write_text(''); st.write_text('')
                    row.update({'client -> app': s['app'] - t0, 'app -> submit': s['submit'] - s['app'], 'submit -> execute': e[0] - s['submit'],
                                'execute -> token': e[1] - e[0], 'token -> loop': s['loop'] - e[1], 'loop -> send': s['send'] - s['loop'],
                                'send -> client': first - s['send']})
                rows[name].append(row)
    finally:
        for p in procs: p.terminate(); p.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    hops = ['client -> app', 'app -> submit', 'submit -> execute', 'execute -> token', 'token -> loop', 'loop -> send', 'send -> client']
    med = lambda rs, k: f'{1000 * statistics.median(r[k] for r in rs):.2f}' if k in rs[0] else '-'
    lines = ['| server, API, client | ' + ' | '.join(hops) + ' | TTFT median | TTFT p90 |', '|---' * (len(hops) + 3) + '|']
    for name, rs in rows.items():
        lines.append(f'| {name} | ' + ' | '.join(med(rs, k) for k in hops) + f" | **{med(rs, 'ttft')}** | {1000 * sorted(r['ttft'] for r in rs)[int(0.9 * len(rs))]:.2f} |")
    ttft = {n: statistics.median(r['ttft'] for r in rs) for n, rs in rows.items()}
    notes = []
    if not args.no_llama:
        for label, _ in trees:
            notes.append(f"{label} / llama_cpp.server, TTFT over the openai SDK {ttft[f'{label}, OpenAI via the openai SDK'] / ttft['llama_cpp.server, via the openai SDK']:.2f}x, "
                         f"over raw http.client {ttft[f'{label}, OpenAI /v1/completions'] / ttft['llama_cpp.server, /v1/completions']:.2f}x")
    text = '\n'.join(lines) + '\n\n' + ''.join(f'- {n}\n' for n in notes) + (
        f'\nMedians in ms over {args.requests} requests each, one at a time, APIs in turn ({args.pause}s apart), load average at the end '
        f'{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.\n')
    print(text)
    if args.out:
        with open(args.out, 'a') as f: f.write(text + '\n')


def sdk_stream(client, model):
    t0, first = time.monotonic(), None
    for c in client.completions.create(model=model, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0, stream=True):
        if first is None and c.choices and c.choices[0].text: first = time.monotonic()
    return t0, first


if __name__ == '__main__': main()
