"""Edit notebooks as plain text, commit them as executed .ipynb.

    python tools/nb.py edit 05_scheduler      # nbs/05_scheduler.ipynb -> scratch/05_scheduler.py (jupytext percent)
    python tools/nb.py build 05_scheduler     # scratch/05_scheduler.py -> nbs/05_scheduler.ipynb, executed,
                                              #   cleaned (nbdev_clean) and exported (nbdev_export)
    python tools/nb.py run 05_scheduler       # re-execute nbs/05_scheduler.ipynb in place, clean, export

The .ipynb in nbs/ is the source that is committed; scratch/ is ignored by git.
"""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / 'scratch'

def sh(*args): subprocess.run(args, check=True, cwd=ROOT)

def nb_path(name): return ROOT / 'nbs' / f'{name}.ipynb'

def edit(name):
    SCRATCH.mkdir(exist_ok=True)
    sh('jupytext', '--to', 'py:percent', str(nb_path(name)), '-o', str(SCRATCH / f'{name}.py'))

def run(name):
    nb = nb_path(name)
    sh('jupyter', 'nbconvert', '--to', 'notebook', '--execute', '--inplace',
       '--ExecutePreprocessor.timeout=900', str(nb))
    sh('nbdev_clean', '--fname', str(nb))
    sh('nbdev_export', '--path', str(nb))

def build(name):
    # --update keeps the ids of cells that did not change, so a rebuild does not rewrite the whole .ipynb
    update = ['--update'] if nb_path(name).exists() else []
    sh('jupytext', '--to', 'ipynb', *update, str(SCRATCH / f'{name}.py'), '-o', str(nb_path(name)))
    run(name)

if __name__ == '__main__':
    cmd, name = sys.argv[1], Path(sys.argv[2]).stem
    {'edit': edit, 'build': build, 'run': run}[cmd](name)
