"""Write one benchmark's section into docs/benchmarks.md (replacing its old one)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Measured on the project's build machines (2 cores, 24 GiB, Debian 12).  Each
section says the command that produced it; rerun it to refresh the numbers.
Numbers are wall-clock and vary by a few percent between runs.
"""


def machine() -> str:
    return f"{platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}"


def write_section(key: str, title: str, command: str, body: str, doc: Path = DOC) -> None:
    """Replace (or append) the section ``key`` of docs/benchmarks.md (or ``doc``)."""
    text = doc.read_text() if doc.exists() else HEADER
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- bench:{key} -->\n## {title}\n\n"
        f"Command: `{command}`  \nRun: {stamp} on {machine()}\n\n{body.strip()}\n"
        f"<!-- /bench:{key} -->\n"
    )
    pattern = re.compile(
        rf"<!-- bench:{re.escape(key)} -->.*?<!-- /bench:{re.escape(key)} -->\n", re.S
    )
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text)
