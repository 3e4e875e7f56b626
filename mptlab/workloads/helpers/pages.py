"""Web page sets of the Ferlin thesis, made into files a web server can serve.

Table 3.2 of the thesis gives, per site, the number of objects and the total
page size; the BLEST paper (Table I) uses wikipedia, amazon and
huffingtonpost, the FEC chapter (Table II) google, youtube and espn.  The
object sizes themselves are not published, so they are generated:

- object sizes are drawn from a lognormal distribution (sigma 1.3, chosen:
  web object sizes are heavy-tailed, many small objects and a few large
  ones), from a seed derived from the page name, then scaled so that they sum
  exactly to the page total;
- object 0 is the HTML document; it links every other object (stylesheets
  in ``<link>``, scripts in ``<script>``, images in ``<img>``), so that a
  client fetches the HTML first and then the objects it references, like a
  browser (``nghttp -a`` parses it; the HTTP/1.1 client reads the links);
- of the other objects about 10 % are CSS, 25 % JavaScript and the rest
  images (chosen); their content is random bytes (incompressible; no server
  compresses).

The same inputs give the same bytes on every machine (``random.Random``
with a fixed seed).
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

KIB = 1024

SIGMA = 1.3  # lognormal shape of object sizes (chosen)
MIN_OBJECT = 128  # bytes
GENERATOR = "lognormal-1.3-v1"  # part of the content cache key

_EXT = {"css": "css", "js": "js", "img": "png"}
_LINK = re.compile(rb'(?:href|src)="(/o/[^"]+)"')


def objects(name: str) -> list[dict]:
    """The page's objects in document order: ``[{path, kind, size}]``, the
    HTML first; sizes sum to the page total."""
    # the page sets are the language's (mptlab.spec.workloads, Table 3.2); only the
    # host makes pages, so the guest, which reads links(), never imports the models
    from ...spec.workloads import PAGE_SETS

    if name not in PAGE_SETS:
        raise ValueError(f"unknown page set {name!r}; allowed: {', '.join(PAGE_SETS)}")
    count, total_kib, _ = PAGE_SETS[name]
    total = total_kib * KIB
    rng = random.Random(f"mptlab-page-{name}")
    weights = [rng.lognormvariate(0.0, SIGMA) for _ in range(count)]
    kinds = ["html"]
    for _ in range(count - 1):
        u = rng.random()
        kinds.append("css" if u < 0.10 else "js" if u < 0.35 else "img")
    # the HTML holds one link per object: make sure it is large enough
    paths = ["/index.html"] + [f"/o/{i}.{_EXT[k]}" for i, k in enumerate(kinds[1:], start=1)]
    html_min = len(_html_skeleton(list(zip(paths[1:], kinds[1:], strict=True))))
    sizes = _scale(weights, total, MIN_OBJECT)
    if sizes[0] < html_min:  # take the bytes from the largest object
        j = max(range(1, count), key=lambda i: sizes[i]) if count > 1 else 0
        sizes[j] -= html_min - sizes[0]
        sizes[0] = html_min
    return [{"path": p, "kind": k, "size": s} for p, k, s in zip(paths, kinds, sizes, strict=True)]


def _scale(weights: list[float], total: int, minimum: int) -> list[int]:
    """Integers proportional to ``weights`` summing exactly to ``total``,
    each at least ``minimum``."""
    n = len(weights)
    spare = total - n * minimum
    if spare < 0:
        raise ValueError(f"{n} objects of at least {minimum} B do not fit in {total} B")
    s = sum(weights)
    raw = [w / s * spare for w in weights]
    sizes = [minimum + math.floor(x) for x in raw]
    rest = total - sum(sizes)
    # largest remainders get the leftover bytes
    for i in sorted(range(n), key=lambda i: raw[i] - math.floor(raw[i]), reverse=True)[:rest]:
        sizes[i] += 1
    return sizes


def _html_skeleton(links: list[tuple[str, str]]) -> bytes:
    head = ['<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>mptlab page</title>\n']
    body = ["</head><body>\n"]
    for path, kind in links:
        if kind == "css":
            head.append(f'<link rel="stylesheet" href="{path}">\n')
        elif kind == "js":
            head.append(f'<script src="{path}"></script>\n')
        else:
            body.append(f'<img src="{path}">\n')
    return ("".join(head) + "".join(body) + "<!--  --></body></html>\n").encode()


def html(objs: list[dict]) -> bytes:
    """The HTML document of ``objects()``, padded to its size with a comment."""
    skeleton = _html_skeleton([(o["path"], o["kind"]) for o in objs[1:]])
    pad = objs[0]["size"] - len(skeleton)
    if pad < 0:
        raise ValueError("HTML object smaller than its links")
    filler = (b"mptlab " * (pad // 7 + 1))[:pad]
    return skeleton.replace(b"<!--  -->", b"<!-- " + filler + b" -->", 1)


def links(document: bytes) -> list[str]:
    """The object paths an HTML document of this module links, in order."""
    return [m.decode() for m in _LINK.findall(document)]


def write(name: str, root: Path) -> list[dict]:
    """Write the page's files under ``root`` (``root/index.html``,
    ``root/o/...``); returns ``objects(name)``."""
    objs = objects(name)
    (root / "o").mkdir(parents=True, exist_ok=True)
    (root / "index.html").write_bytes(html(objs))
    rng = random.Random(f"mptlab-page-content-{name}")
    for o in objs[1:]:
        (root / o["path"].lstrip("/")).write_bytes(rng.randbytes(o["size"]))
    return objs
