#!/usr/bin/env python3
"""Start the real NVIDIA Triton Inference Server 2.51 (CPU, Python backend): the oracle the tests compare against.

    python tools/real_triton.py --model-repository=DIR [any tritonserver flag ...]
    python tools/real_triton.py --help        # tritonserver's own flag list
    python tools/real_triton.py --install     # only build the cached environment, then exit

Nothing here is Triton's code: the server binary and its Python backend come from PyPI's `nvidia-pytriton` wheel
(0.7.0 ships tritonserver 2.51), installed on first use into a cached virtual environment,
`$TRITON_ORACLE_HOME` (default `~/.cache/triton-oracle`). Later calls start at once. Ports default to
8000/8001/8002 like tritonserver's; pass --http-port/--grpc-port/--metrics-port to change them. Python models run
in that environment's interpreter (3.11 where the machine has it), which has numpy; install more into
`$TRITON_ORACLE_HOME/venv` if a model needs it.

The tests take this launcher unless `$TRITON_ORACLE` names another one (tests/triton_servers.py); where the wheel
cannot be installed (no PyPI, an unsupported platform) they skip with the reason this script prints.
"""
import fcntl, os, shutil, subprocess, sys
from pathlib import Path

WHEEL = 'nvidia-pytriton==0.7.0'
HOME = Path(os.environ.get('TRITON_ORACLE_HOME') or Path.home() / '.cache' / 'triton-oracle')


def interpreter() -> str:
    "The Python the environment is built with: $TRITON_ORACLE_PYTHON, else python3.11 (the wheel's stubs cover it), else this one."
    return os.environ.get('TRITON_ORACLE_PYTHON') or shutil.which('python3.11') or sys.executable


def venv_python() -> Path: return HOME / 'venv' / 'bin' / 'python'


def install():
    "Build the environment once; `.ready` marks a finished install, so an interrupted one is redone."
    if venv_python().exists() and (HOME / '.ready').exists(): return
    shutil.rmtree(HOME / 'venv', ignore_errors=True)
    subprocess.run([interpreter(), '-m', 'venv', str(HOME / 'venv')], check=True, stdout=sys.stderr)
    subprocess.run([str(venv_python()), '-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-deps',
                    WHEEL, 'numpy<2'], check=True, stdout=sys.stderr)
    (HOME / '.ready').touch()


def venv_paths() -> tuple[Path, str]:
    "The environment's site-packages and its Python version (`3.11`), which picks the backend stub."
    out = subprocess.run([str(venv_python()), '-c', 'import sys, sysconfig; '
                          'print(sysconfig.get_paths()["purelib"]); print(f"{sys.version_info[0]}.{sys.version_info[1]}")'],
                         check=True, capture_output=True, text=True).stdout.split()
    return Path(out[0]), out[1]


def backends(site: Path, pyver: str) -> Path:
    "The Python backend with the stub built for the environment's Python, as tritonserver's --backend-directory wants it."
    root, dest = site / 'pytriton' / 'tritonserver', HOME / f'backends-{pyver}'
    if not (dest / 'python' / 'triton_python_backend_stub').exists():
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(root / 'backends' / 'python', dest / 'python')
        shutil.copy2(root / 'python_backend_stubs' / pyver / 'triton_python_backend_stub', dest / 'python')
    return dest


def prepare() -> tuple[list[str], dict]:
    "Install if needed (one process at a time: several servers often start together), then the command and environment."
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install()
        site, pyver = venv_paths()
        dest = backends(site, pyver)
    env = dict(os.environ)
    libs = str(site / 'nvidia_pytriton.libs')
    env['LD_LIBRARY_PATH'] = libs + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
    env['PATH'] = f"{HOME / 'venv' / 'bin'}:{env.get('PATH', '')}"
    caches = site / 'pytriton' / 'tritonserver' / 'caches'   # libtritoncache_local.so: --cache-config local,size=N works
    return [str(site / 'pytriton' / 'tritonserver' / 'bin' / 'tritonserver'), f'--backend-directory={dest}',
            f'--cache-directory={caches}'], env


def main(argv: list[str]):
    try: cmd, env = prepare()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f'real-triton: cannot install {WHEEL} into {HOME}: {e}')
    if argv == ['--install']: return
    os.execve(cmd[0], [*cmd, *argv], env)


if __name__ == '__main__': main(sys.argv[1:])
