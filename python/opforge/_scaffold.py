"""``opforge new NAME``: a small working project of one's own ops.

The project's files are the templates in ``templates/new/`` (an op file with
one elementwise op and its gradient, a pytest file that checks it in every
installed framework against NumPy, a README), with ``${name}`` replaced.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path
from string import Template
from typing import Optional

__all__ = ["new_project"]

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates" / "new"

#: template file -> file name in the project (``{name}`` is the project's name)
FILES = {"ops.c": "{name}.c", "test_ops.py": "test_{name}.py", "README.md": "README.md"}


def check_name(name: str) -> None:
    """ValueError unless ``name`` can name a table, a C file and a Python test."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ValueError(
            f"opforge new: {name!r} cannot name an op table: use lower_snake_case letters, digits and '_', "
            "starting with a letter"
        )
    if name == "opforge":
        raise ValueError("opforge new: 'opforge' is the table name of opforge's own ops; choose another name")


def new_project(name: str, directory: Optional[Path] = None) -> list[Path]:
    """Writes the project ``name`` into ``directory`` (default: ./name), which
    must not exist or be empty; returns the files written."""
    check_name(name)
    target = Path(directory) if directory is not None else Path(name)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"opforge new: {target} already exists and is not an empty directory")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for template, file_name in FILES.items():
        text = Template((TEMPLATE_DIR / template).read_text()).substitute(name=name)
        path = target / file_name.format(name=name)
        path.write_text(text)
        written.append(path)
    return written
