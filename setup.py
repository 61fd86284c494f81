"""Packaging for triton_mini, driven by settings.ini (nbdev 2 layout).

Besides the exported package this installs two things a Triton user needs:
* `triton_python_backend_utils`, a top-level module, so `import triton_python_backend_utils as pb_utils`
  in an unchanged model.py works after `pip install` (it re-exports `triton_mini.pb_utils`), and
  `c_python_backend_utils`, the name of the stub's pybind module behind it, which a few models import directly;
* the bundled example model repository (`model_repository/` in the source tree), shipped inside the
  wheel as `triton_mini/examples/` so `triton-mini` with no flags has something to serve.
"""
from configparser import ConfigParser
from pathlib import Path
import shutil
import setuptools
from setuptools.command.build_py import build_py

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable']
lic = licenses[cfg['license'].lower()]

def reqs(key): return cfg.get(key, '').split()

class BuildWithExamples(build_py):
    "Copy model_repository/ into the wheel as triton_mini/examples (editable installs read it in place)."
    def run(self):
        super().run()
        if not getattr(self, 'editable_mode', False):
            shutil.copytree('model_repository', Path(self.build_lib) / 'triton_mini' / 'examples', dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=Path('README.md').read_text(encoding='utf-8'),
    long_description_content_type='text/markdown',
    author=cfg['author'], author_email=cfg['author_email'],
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title(),
                 'Programming Language :: Python :: 3.11'],
    url=cfg['git_url'],
    keywords=cfg['keywords'],
    python_requires='>=' + cfg['min_python'],
    packages=setuptools.find_packages(include=['triton_mini', 'triton_mini.*']),
    cmdclass={'build_py': BuildWithExamples},
    py_modules=['triton_python_backend_utils', 'c_python_backend_utils'],
    include_package_data=True,
    install_requires=reqs('requirements'),
    extras_require={'dev': reqs('dev_requirements'), 'fil': reqs('fil_requirements'), 'llm': reqs('llm_requirements'), 'openvino': reqs('openvino_requirements'), 'pytorch': reqs('pytorch_requirements'), 'ray': reqs('ray_requirements')},
    zip_safe=False,
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
)
