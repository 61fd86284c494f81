"""Print one of README.md's two commands, so CI runs exactly what a user copies.

README marks each command's fenced block with an HTML comment on the line before the fence:
`<!-- command: serve -->` and `<!-- command: test -->`. Usage: python tools/readme_command.py test
"""
import re, sys
from pathlib import Path

def readme_command(which, readme=Path(__file__).resolve().parents[1] / 'README.md'):
    "Return the shell command in README.md's block marked `<!-- command: which -->`."
    m = re.search(rf'<!-- command: {which} -->\s*```(?:sh|bash)\n(.*?)```', readme.read_text(), re.S)
    if not m: sys.exit(f'README.md has no block marked <!-- command: {which} -->')
    return m.group(1).strip()

if __name__ == '__main__': print(readme_command(sys.argv[1]))
