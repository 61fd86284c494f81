"""Issue 43, "one truth": every relative link in a notebook's prose leads to a file that exists (a notebook, a
bench result, a test, an image). The site renders these links (tools/build_docs.py: other notebooks become pages,
repository files are rendered under files/), so a link to nothing is a dead link on the site too."""
import json, re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def relative_links():
    "(notebook, link target) for every markdown link that is not a URL or an anchor on the same page."
    for nb in sorted(NBS.glob('*.ipynb')):
        for cell in json.loads(nb.read_text())['cells']:
            if cell['cell_type'] != 'markdown': continue
            for target in LINK.findall(''.join(cell['source'])):
                parts = urlsplit(target)
                if parts.scheme or parts.netloc or not parts.path: continue
                yield nb.name, unquote(parts.path)


def test_there_are_links_to_check():
    assert sum(1 for _ in relative_links()) > 100


@pytest.mark.parametrize('nb', sorted(p.name for p in NBS.glob('*.ipynb')))
def test_relative_links_lead_to_files(nb):
    dead = sorted({target for name, target in relative_links() if name == nb and not (NBS / target).exists()})
    assert not dead, f'{nb} links to files that do not exist: {dead}'
