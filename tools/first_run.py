"""A newcomer's first run, timed: README's serve command in a fresh virtual environment, from this checkout.

It reads the command from README.md (tools/readme_command.py), runs its install part (`pip install .`) in a new
venv with pip's output shown as it goes, then starts its `triton-mini` part and waits until
`/v2/health/ready` answers 200 (README's first curl check), stops it with SIGTERM and checks the exit code.
The server gets free ports (flags appended) so that a server already on 8000 does not spoil the run.

    python tools/first_run.py                      # pip's cache as it is
    python tools/first_run.py --empty-pip-cache    # as on a fresh machine: every wheel downloaded again
    python tools/first_run.py --command llm        # README's llm command instead (compiles llama.cpp)

Prints one line per step with its wall time, and exits 1 if a step fails or the server is not ready in time.
"""
import argparse, os, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
from readme_command import readme_command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def ready(url:str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r: return r.status == 200
    except (urllib.error.URLError, OSError): return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--command', default='serve', help="README's marked command to run (serve or llm)")
    ap.add_argument('--python', default=sys.executable, help='the Python to make the venv with (default: this one)')
    ap.add_argument('--venv', default=None, help='where to create the venv (default: a new temporary folder)')
    ap.add_argument('--empty-pip-cache', action='store_true')
    ap.add_argument('--ready-timeout', type=float, default=300)
    a = ap.parse_args()
    steps = [s.strip() for s in readme_command(a.command).split('&&')]
    installs, serve = [s for s in steps if s != 'triton-mini'], 'triton-mini' in steps
    tmp = Path(tempfile.mkdtemp(prefix='first-run-'))
    venv = Path(a.venv) if a.venv else tmp / 'venv'
    shutil.rmtree(venv, ignore_errors=True)
    env = {**os.environ, 'PATH': f"{venv / 'bin'}:{os.environ['PATH']}", 'VIRTUAL_ENV': str(venv)}
    env.pop('PYTHONPATH', None)
    if a.empty_pip_cache: env['PIP_CACHE_DIR'] = str(tmp / 'pip-cache')
    print(f"first run: README's {a.command} command, in a fresh venv {venv}"
          f" ({'empty pip cache' if a.empty_pip_cache else 'pip cache as it is'})", flush=True)
    t0 = time.monotonic()
    subprocess.run([a.python, '-m', 'venv', str(venv)], check=True)
    times = {'venv': time.monotonic() - t0}
    for step in installs:
        t = time.monotonic()
        print(f'first run: $ {step}', flush=True)
        if subprocess.run(['bash', '-c', step], cwd=ROOT, env=env).returncode != 0:
            sys.exit(f'first run: `{step}` failed')
        times[step] = time.monotonic() - t
    if serve:
        http = free_port()
        ports = [f'--http-port={http}', f'--grpc-port={free_port()}', f'--metrics-port={free_port()}']
        print(f"first run: $ triton-mini {' '.join(ports)}", flush=True)
        t = time.monotonic()
        proc = subprocess.Popen([str(venv / 'bin' / 'triton-mini'), *ports], cwd=tmp, env=env)
        try:
            while not ready(f'http://127.0.0.1:{http}/v2/health/ready'):
                if proc.poll() is not None: sys.exit(f'first run: triton-mini exited with {proc.returncode} before it was ready')
                if time.monotonic() - t > a.ready_timeout: sys.exit('first run: triton-mini not ready in time')
                time.sleep(0.2)
            times['triton-mini until /v2/health/ready is 200'] = time.monotonic() - t
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
        if code != 0: sys.exit(f'first run: triton-mini exited with {code} after SIGTERM')
    total = sum(times.values())
    for what, s in times.items(): print(f'first run: {s:7.1f} s  {what}')
    print(f'first run: {total:7.1f} s  in all, from no venv to a serving triton-mini')
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__': main()
