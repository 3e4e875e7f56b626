"""A DASH player emulator: downloads segments, simulates the playout buffer.

Written for mptlab from the published descriptions of the adaptation
algorithms (not from AStream's code):

- ``basic``: throughput-based; the estimate is the moving average of the
  last ``window`` segment download rates, and the player picks the highest
  bitrate strictly below it ("one level below the measured bandwidth", as
  the Ferlin thesis describes AStream's basic adaptation);
- ``sara``: Segment-Aware Rate Adaptation (Juluri, Tamarapalli, Medhi,
  IEEE ICC 2015 workshops): a weighted harmonic mean of past download rates
  (weights: segment sizes) and the *known size of the next segment* at each
  bitrate (from the MPD) decide, by buffer phase: below ``I`` (fast start)
  the lowest bitrate; up to ``B_alpha`` one step up at a time if the next
  segment at the next bitrate downloads in time (additive increase); up to
  ``B_beta`` the highest bitrate whose next segment downloads in time
  (aggressive switching); above, the same, after delaying the request until
  the buffer is back at ``B_beta`` (delayed download);
- ``bba``: buffer-based BBA-0 (Huang et al., SIGCOMM 2014): a linear map
  from buffer level to bitrate between a ``reservoir`` (lowest bitrate) and
  ``reservoir + cushion`` (highest), with the rate changed only when the
  map crosses the neighbouring bitrates.

The player requests the MPD, then for each segment: chooses a
representation, waits while the buffer is full (``max_buffer``), downloads
the representation's initialisation segment the first time it is used,
downloads the media segment and adds it to the buffer.  Playback starts (and
resumes after a stall) when ``startup`` seconds are buffered; the buffer
drains in real time while playing.  The clock and the download function are
injected, so the same code runs over the emulated network (wall clock,
HTTP) and in unit tests (virtual clock, modelled link).
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field

DASH = "{urn:mpeg:dash:schema:mpd:2011}"
MPTLAB = "{urn:mptlab:dash:2024}"


# -------------------------------------------------------------- manifest
@dataclass
class Representation:
    id: str
    bandwidth: int  # bit/s (nominal)
    init: str
    media: str  # template with $Number$
    sizes: list[int]  # bytes per segment
    init_size: int = 0

    def segment_url(self, number: int) -> str:
        return self.media.replace("$RepresentationID$", self.id).replace("$Number$", str(number))

    def init_url(self) -> str:
        return self.init.replace("$RepresentationID$", self.id)


@dataclass
class Manifest:
    segment_s: float
    reps: list[Representation]  # ascending bandwidth
    start_number: int = 1

    @property
    def segments(self) -> int:
        return len(self.reps[0].sizes)


def parse_mpd(text: str | bytes) -> Manifest:
    """A manifest from an MPD with ``SegmentTemplate`` and mptlab segment sizes."""
    root = ET.fromstring(text)
    reps = []
    segment_s = 0.0
    start = 1
    for rep in root.iter(f"{DASH}Representation"):
        tmpl = rep.find(f"{DASH}SegmentTemplate")
        sizes_el = rep.find(f"{MPTLAB}SegmentSizes")
        if tmpl is None or sizes_el is None:
            raise ValueError(
                "the MPD needs a SegmentTemplate and mptlab:SegmentSizes per Representation"
            )
        segment_s = int(_attr(tmpl, "duration")) / int(tmpl.get("timescale", "1"))
        start = int(tmpl.get("startNumber", "1"))
        reps.append(
            Representation(
                id=_attr(rep, "id"),
                bandwidth=int(_attr(rep, "bandwidth")),
                init=_attr(tmpl, "initialization"),
                media=_attr(tmpl, "media"),
                sizes=[int(x) for x in (sizes_el.text or "").split()],
                init_size=int(sizes_el.get("init", "0")),
            )
        )
    if not reps:
        raise ValueError("the MPD has no Representation")
    reps.sort(key=lambda r: r.bandwidth)
    return Manifest(segment_s=segment_s, reps=reps, start_number=start)


def _attr(element, name: str) -> str:
    value = element.get(name)
    if value is None:
        raise ValueError(f"the MPD's {element.tag.split('}')[-1]} has no {name}")
    return value


# ----------------------------------------------------------- algorithms
@dataclass
class History:
    """What an algorithm may look at."""

    throughputs: list[float] = field(default_factory=list)  # bit/s per downloaded segment
    sizes: list[int] = field(default_factory=list)  # bytes per downloaded segment
    seconds: list[float] = field(default_factory=list)  # download time per segment


class Basic:
    """Moving average of the last ``window`` download rates; the highest
    bitrate strictly below it (the lowest when none is)."""

    name = "basic"

    def __init__(self, window: int = 3):
        self.window = window

    def choose(
        self, m: Manifest, n: int, buffer_s: float, current: int | None, h: History
    ) -> tuple[int, float]:
        if not h.throughputs:
            return 0, 0.0
        recent = h.throughputs[-self.window :]
        estimate = sum(recent) / len(recent)
        below = [i for i, r in enumerate(m.reps) if r.bandwidth < estimate]
        return (below[-1] if below else 0), 0.0


class Sara:
    """SARA: buffer phases with thresholds ``i_s < alpha_s < beta_s`` (s)."""

    name = "sara"

    def __init__(
        self, i_s: float = 8.0, alpha_s: float = 16.0, beta_s: float = 24.0, window: int = 5
    ):
        if not 0 < i_s < alpha_s < beta_s:
            raise ValueError("SARA thresholds must satisfy 0 < I < B_alpha < B_beta")
        self.i, self.alpha, self.beta, self.window = i_s, alpha_s, beta_s, window

    def estimate(self, h: History) -> float | None:
        """Weighted harmonic mean of the download rates, weights = segment
        sizes: total bytes over total download time."""
        if not h.sizes:
            return None
        sizes, secs = h.sizes[-self.window :], h.seconds[-self.window :]
        return sum(sizes) * 8 / max(1e-9, sum(secs))

    def choose(
        self, m: Manifest, n: int, buffer_s: float, current: int | None, h: History
    ) -> tuple[int, float]:
        est = self.estimate(h)
        cur = current or 0
        if est is None or buffer_s <= self.i:
            return 0, 0.0  # fast start: lowest bitrate until I is buffered

        def fits(k: int, budget: float) -> bool:
            return m.reps[k].sizes[n] * 8 / est <= budget

        if buffer_s <= self.alpha:
            if not fits(cur, buffer_s - self.i):  # switch down to what downloads in time
                lower = [k for k in range(cur) if fits(k, buffer_s - self.i)]
                return (lower[-1] if lower else 0), 0.0
            if cur + 1 < len(m.reps) and fits(cur + 1, buffer_s - self.i):
                return cur + 1, 0.0  # additive increase
            return cur, 0.0
        ok = [k for k in range(len(m.reps)) if fits(k, buffer_s - self.i)]
        best = ok[-1] if ok else 0
        if buffer_s <= self.beta:
            return best, 0.0  # aggressive switching
        return best, buffer_s - self.beta  # delayed download


class Bba:
    """BBA-0 with ``reservoir`` and ``cushion`` (s)."""

    name = "bba"

    def __init__(self, reservoir_s: float = 8.0, cushion_s: float = 16.0):
        if reservoir_s < 0 or cushion_s <= 0:
            raise ValueError("BBA needs reservoir >= 0 and cushion > 0")
        self.reservoir, self.cushion = reservoir_s, cushion_s

    def choose(
        self, m: Manifest, n: int, buffer_s: float, current: int | None, h: History
    ) -> tuple[int, float]:
        rates = [r.bandwidth for r in m.reps]
        top = len(rates) - 1
        if current is None or buffer_s <= self.reservoir:
            return 0, 0.0
        if buffer_s >= self.reservoir + self.cushion:
            return top, 0.0
        f = rates[0] + (rates[-1] - rates[0]) * (buffer_s - self.reservoir) / self.cushion
        up = rates[min(top, current + 1)]
        down = rates[max(0, current - 1)]
        if f >= up:
            return max(k for k, r in enumerate(rates) if r < f or k == 0), 0.0
        if f <= down:
            return min(k for k, r in enumerate(rates) if r > f or k == top), 0.0
        return current, 0.0


def algorithm(name: str, **kw):
    table = {"basic": Basic, "sara": Sara, "bba": Bba}
    if name not in table:
        raise ValueError(f"unknown adaptation {name!r}; allowed: {', '.join(table)}")
    return table[name](**kw)


# ---------------------------------------------------------------- player
class WallClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


@dataclass
class SegmentRecord:
    number: int
    rep: int
    bitrate: int  # nominal bit/s
    size: int
    request: float  # s since session start
    end: float
    buffer_before: float  # s of video buffered when requested
    throughput: float  # bit/s


@dataclass
class Session:
    segment_s: float
    ladder: list[int]
    segments: list[SegmentRecord] = field(default_factory=list)
    startup_delay: float | None = None
    stalls: list[tuple[float, float]] = field(
        default_factory=list
    )  # (start, duration) since session start
    duration: float = 0.0  # until the last frame played (simulated after the last download)

    def metrics(self) -> dict:
        seg = self.segments
        rates = [s.bitrate for s in seg]
        switches = sum(1 for a, b in zip(rates, rates[1:], strict=False) if a != b)
        top = max(self.ladder)
        return {
            "avg_bitrate_mbps": sum(rates) / len(rates) / 1e6 if rates else None,
            "avg_media_rate_mbps": (
                sum(s.size for s in seg) * 8 / (len(seg) * self.segment_s) / 1e6
            )
            if seg
            else None,
            "switches": switches,
            "switch_size_mbps": (
                sum(abs(b - a) for a, b in zip(rates, rates[1:], strict=False)) / switches / 1e6
                if switches
                else 0.0
            ),
            "stalls": len(self.stalls),
            "stall_s": sum(d for _, d in self.stalls),
            "startup_delay_s": self.startup_delay,
            "segments": len(seg),
            "top_bitrate_share": sum(r == top for r in rates) / len(rates) if rates else None,
            "last_bitrate_mbps": rates[-1] / 1e6 if rates else None,
            "download_mbps": (
                sum(s.size for s in seg) * 8 / sum(s.end - s.request for s in seg) / 1e6
                if seg
                else None
            ),
            "session_s": self.duration,
            "bitrates_mbps": [r / 1e6 for r in rates],
            "throughputs_mbps": [round(s.throughput / 1e6, 4) for s in seg],
            "buffer_s": [round(s.buffer_before, 3) for s in seg],
        }


class Player:
    """``fetch(url, keep) -> (size, body or None)`` downloads (blocking; the
    body only when ``keep``); times come from ``clock``."""

    def __init__(
        self,
        fetch: Callable[[str, bool], tuple[int, bytes | None]],
        algo,
        clock=None,
        max_buffer_s: float = 30.0,
        startup_s: float = 4.0,
        log: Callable[[str], None] | None = None,
    ):
        if startup_s <= 0 or max_buffer_s < startup_s:
            raise ValueError("need 0 < startup <= max_buffer")
        self.fetch = fetch
        self.algo = algo
        self.clock = clock or WallClock()
        self.max_buffer = max_buffer_s
        self.startup = startup_s
        self.log = log or (lambda _m: None)
        # playout state
        self._buffer = 0.0
        self._at = 0.0
        self._playing = False
        self._stall_start: float | None = None

    def _advance(self, t: float, session: Session) -> None:
        """Play from ``self._at`` to ``t`` (session seconds)."""
        if self._playing:
            elapsed = t - self._at
            if elapsed >= self._buffer:
                self._stall_start = self._at + self._buffer
                self._buffer = 0.0
                self._playing = False
            else:
                self._buffer -= elapsed
        self._at = t

    def _added(self, t: float, seconds: float, session: Session) -> None:
        self._buffer += seconds
        if not self._playing and self._buffer >= self.startup - 1e-9:
            self._playing = True
            if session.startup_delay is None:
                session.startup_delay = t
            elif self._stall_start is not None:
                session.stalls.append((self._stall_start, t - self._stall_start))
            self._stall_start = None

    def play(self, mpd_url: str, segments: int | None = None) -> Session:
        t0 = self.clock.now()
        manifest = parse_mpd(self.fetch(mpd_url, True)[1] or b"")
        base = mpd_url.rsplit("/", 1)[0] + "/"
        n_total = min(segments or manifest.segments, manifest.segments)
        session = Session(segment_s=manifest.segment_s, ladder=[r.bandwidth for r in manifest.reps])
        history = History()
        current: int | None = None
        have_init: set[int] = set()
        for i in range(n_total):
            now = self.clock.now() - t0
            self._advance(now, session)
            choice, delay = self.algo.choose(manifest, i, self._buffer, current, history)
            wait = max(
                delay, self._buffer + manifest.segment_s - self.max_buffer if self._playing else 0.0
            )
            if wait > 0:
                self.clock.sleep(wait)
                now = self.clock.now() - t0
                self._advance(now, session)
            rep = manifest.reps[choice]
            if choice not in have_init:
                self.fetch(base + rep.init_url(), False)
                have_init.add(choice)
            request = self.clock.now() - t0
            self._advance(request, session)
            buffered = self._buffer
            size, _ = self.fetch(base + rep.segment_url(manifest.start_number + i), False)
            end = self.clock.now() - t0
            self._advance(end, session)
            seconds = max(1e-9, end - request)
            rate = size * 8 / seconds
            history.throughputs.append(rate)
            history.sizes.append(size)
            history.seconds.append(seconds)
            session.segments.append(
                SegmentRecord(i + 1, choice, rep.bandwidth, size, request, end, buffered, rate)
            )
            self._added(end, manifest.segment_s, session)
            current = choice
            self.log(
                f"dash: seg {i + 1}/{n_total} rep {choice} ({rep.bandwidth / 1e6:.3f} Mbit/s) "
                f"{size} B in {seconds:.3f} s, buffer {self._buffer:.2f} s"
            )
        end = self.clock.now() - t0
        self._advance(end, session)
        if not self._playing:  # everything is downloaded: what is buffered plays now
            if session.startup_delay is None:
                session.startup_delay = end
            elif self._stall_start is not None:
                session.stalls.append((self._stall_start, end - self._stall_start))
            self._playing = True
        session.duration = end + self._buffer
        return session
