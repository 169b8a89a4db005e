"""The wheel carries what `hpcstage run` and `hpcstage demo` deploy locally: template.yaml, the state
machines, the Lambda handlers and the example inputs, as package data under hpcstage/_project/.

A checkout (and an editable install) uses the files where they are; only a built wheel needs the copy.
pyproject.toml holds everything else; this file only adds that step to build_py.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROJECT_FILES = ["template.yaml", "statemachines/*.asl.json", "functions/*/app.py", "events/*.json"]


class BuildWithProject(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "hpcstage" / "_project"
        for pattern in PROJECT_FILES:
            for src in sorted(ROOT.glob(pattern)):
                dest = target / src.relative_to(ROOT)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(src.read_bytes())


setup(cmdclass={"build_py": BuildWithProject})
