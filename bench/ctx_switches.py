"""Context switches per request of a running server (all its threads) while wrk loads it at each concurrency.

    python bench/ctx_switches.py PID PORT identity 1 8 64     (server pinned to core 0; wrk runs on core 1)
"""
import os, subprocess, sys, time, json, re, tempfile
TMP = tempfile.mkdtemp(prefix='ctx_switches_')
BODY, LUA = os.path.join(TMP, 'body.json'), os.path.join(TMP, 'post.lua')
pid, port, model = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16] if model == 'identity' else [1, 64], "datatype": "FP32", "data": [0.5] * (16 if model == 'identity' else 64)}]})
open(BODY, 'w').write(body)
open(LUA, 'w').write(f'wrk.method="POST"\nwrk.body=io.open("{BODY}"):read("*a")\nwrk.headers["Content-Type"]="application/json"\n')
def cs():
    tot = 0
    for tid in os.listdir(f'/proc/{pid}/task'):
        for line in open(f'/proc/{pid}/task/{tid}/status'):
            if 'ctxt_switches' in line: tot += int(line.split()[1])
    return tot
for c in map(int, sys.argv[4:] or ['1', '8', '64']):
    a = cs()
    out = subprocess.run(['taskset', '-c', '1', 'wrk', '-t1', f'-c{c}', '-d3s', '-s', LUA, f'http://127.0.0.1:{port}/v2/models/{model}/infer'], capture_output=True, text=True).stdout
    b = cs()
    n = int(re.search(r'(\d+) requests in', out).group(1))
    print(f'c={c} req/s={n/3:.0f} ctx switches/request={(b-a)/n:.2f}')
