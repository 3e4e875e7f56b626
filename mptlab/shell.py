"""``mptlab shell NAME|FILE [--variant V]``: an experiment's topology, up, with a prompt.

The guest is set up as a run of the variant (``mptlab.Network``: modules,
network, netem seeds, kernel knobs), no workload runs, and each line typed
is one of Mininet's CLI habits::

    mptlab> client ping -c 2 server       # a command in a node's namespace; node
                                          # names become their (first) address
    mptlab> server ss -tni                # ... any program of the host, as root
    mptlab> server mptcpize run iperf3 -s &          # "&": in the background
    mptlab> client mptcpize run iperf3 -c server -t 30
    mptlab> nodes | net | links | dump | pingall | sh CMD | py EXPR
    mptlab> scheduler blest               # net.mptcp.scheduler in client and server
    mptlab> workload                      # the experiment's own workload, once
    mptlab> exit                          # (or Ctrl-D): the guest powers off, is reaped

Ctrl-C stops the running command (SIGINT to its process group; twice:
SIGKILL), at the prompt it clears the line.  The run dir (``results/shell/``
by default) keeps the console, the guest's logs and the background output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from . import api, home
from .campaign.boot import ConfinementError
from .campaign.control import GuestError
from .campaign.kernel import KernelNotBuilt
from .rundir import CLOCKS

PROMPT = "mptlab> "
HISTORY_ENV = "MPTLAB_SHELL_HISTORY"  # the history file (default: <cache>/shell-history)
BUILTINS = (
    "help",
    "nodes",
    "net",
    "links",
    "dump",
    "pingall",
    "sh",
    "py",
    "scheduler",
    "load",
    "workload",
    "exit",
    "quit",
)
HELP = """\
<node> <command...>   run a command in the node's namespace (sh -c; as root), e.g.
                        client ping -c 2 server     server ss -tni     client nstat
                        client tc -s qdisc          r1c ip route
                      a word that is a node's name becomes its first address;
                      a line ending in & runs in the background (output: the run dir)
                      Ctrl-C stops the command
nodes                 the nodes: hosts, routers, switches
net | links           the links: net as Mininet's, links with each direction's shape
dump                  every node with its interfaces and addresses
pingall               every host pings every other host's first address once
sh <command...>       a command in the guest's initial namespace (no node's)
py <expression>       Python with `net` (mptlab.Network) and the nodes by name
scheduler [NAME]      show, or set, net.mptcp.scheduler in the client and the server
load FILE.ko [k=v..]  load a kernel module (a scheduler of your own) with parameters
workload              run the experiment's workload once and show its metrics
                      (by hand: server mptcpize run iperf3 -s &
                                client mptcpize run iperf3 -c server -t 10)
exit | quit | Ctrl-D  tear the topology down: the guest powers off, nothing is left
"""


# ------------------------------------------------------------------ parsing
@dataclass(frozen=True)
class Line:
    """One typed line: ``kind`` empty, builtin (``word`` the command), node
    (``word`` the node) or unknown (``word`` what was typed first)."""

    kind: Literal["empty", "builtin", "node", "unknown"]
    word: str = ""
    rest: str = ""
    background: bool = False


_TRAILING_AMP = re.compile(r"(?<![&|>])&\s*$")


def strip_comment(text: str) -> str:
    """``text`` without a trailing shell comment (a ``#`` that starts a word,
    outside quotes): a line pasted from the README with its comment."""
    quote, escaped = "", False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text


def parse(line: str, nodes: Iterable[str]) -> Line:
    """Split a typed line as Mininet's CLI does: a builtin, or ``<node> <command>``
    (builtins win over nodes of the same name).  A node command ending in a
    lone ``&`` (not ``&&``, not ``>&``) runs in the background."""
    text = line.strip()
    if not text or text.startswith("#"):
        return Line("empty")
    parts = text.split(None, 1)
    word, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    if word in BUILTINS:
        return Line("builtin", word, rest)
    if word in set(nodes):
        bare = strip_comment(rest)
        if _TRAILING_AMP.search(bare):
            return Line("node", word, _TRAILING_AMP.sub("", bare).rstrip(), True)
        return Line("node", word, rest)
    return Line("unknown", word, rest)


def substitute(text: str, addresses: dict[str, str]) -> str:
    """Replace every whitespace-delimited word that is a node's name by its
    address (``client ping server`` -> ``ping 10.0.3.2``), as Mininet's CLI
    does; a name inside a longer word (``./server``, ``server:80``, quoted)
    stays."""
    if not addresses:
        return text
    names = "|".join(re.escape(n) for n in sorted(addresses, key=len, reverse=True))
    return re.sub(rf"(?<!\S)({names})(?!\S)", lambda m: addresses[m.group(1)], text)


def module_params(words: list[str]) -> dict[str, str]:
    """``name=value`` words of ``load``; ValueError naming a word that is not one."""
    params = {}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not name.isidentifier():
            raise ValueError(f"module parameter {word!r}: write name=value")
        params[name] = value
    return params


def banner(net: api.Network) -> str:
    info = net.info
    kinds: dict[str, list[str]] = {}
    for node in net.nodes.values():
        kinds.setdefault(node.kind, []).append(node.name)
    others = [v for v in net.variants if v != net.variant]
    lines = [
        f"*** {net.experiment.name}, variant {net.variant}"
        + (f" (others: {', '.join(others)}; --variant V)" if others else ""),
        "*** "
        + "; ".join(f"{kind}s: {' '.join(names)}" for kind, names in kinds.items())
        + f"; client {info['client']}, server {info['server']}",
        f"*** scheduler {info['scheduler'] or 'default'}, congestion control "
        f"{info['congestion_control']}; schedulers loaded: {' '.join(info['schedulers'])}",
        f"*** no workload runs: `workload` runs the experiment's ({info['workload']}) once",
    ]
    if info["clock"] == "virtual":
        lines.append(
            "*** clock: virtual (UML time-travel): the guest is held while it waits for you "
            "(no host CPU; guest time stands still), so guest time passes only while a "
            "command runs, and a command takes less wall time than guest time (ping's 1 s "
            "intervals fly by).  A transfer started with & moves while later commands run: "
            "`client sleep 5` lets 5 s pass.  `--clock real` runs on the host's clock."
        )
    else:
        lines.append("*** clock: real (the host's): guest time is wall time")
    lines += [f"*** run dir: {net.run_dir}", "*** type `help`; `exit` or Ctrl-D to leave"]
    return "\n".join(lines)


# ------------------------------------------------------------------ the shell
class Shell:
    def __init__(self, net: api.Network, out: IO[str] | None = None):
        self.net = net
        self.out = out or sys.stdout
        self.addresses = {
            name: ip for name, node in net.nodes.items() if (ip := node.IP()) is not None
        }
        self._ends_with_newline = True

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _echo(self, _stream: str, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._ends_with_newline = text.endswith("\n")

    def run(self, node: str | None, cmd: str) -> int | None:
        """Run and stream a command; its exit status (None: interrupted)."""
        self._ends_with_newline = True
        try:
            done = self.net._run(node, cmd, merge=True, on_output=self._echo)
        except KeyboardInterrupt:
            self.say("" if self._ends_with_newline else "\n")
            return None
        if not self._ends_with_newline:
            self.say()
        return done.returncode

    # -------------------------------------------------------------- commands
    def onecmd(self, text: str) -> bool:
        """Do one line; False when the shell should end."""
        line = parse(text, self.net.nodes)
        if line.kind == "empty":
            return True
        if line.kind == "unknown":
            self.say(
                f"*** unknown node or command: {line.word} (nodes: {' '.join(self.net.nodes)}; "
                f"a command runs in a node: `{self.net.info['client']} {text.strip()}`; "
                "`sh ...` for the guest's initial namespace; `help`)"
            )
            return True
        if line.kind == "node":
            self.node_command(line)
            return True
        if line.word in ("exit", "quit"):
            return False
        getattr(self, f"do_{line.word}")(line.rest)
        return True

    def node_command(self, line: Line) -> None:
        cmd = substitute(line.rest, self.addresses)
        if not cmd:
            self.say(f"*** usage: {line.word} <command...>")
            return
        if line.background:
            log = self.net._background(line.word, cmd)
            self.say(f"*** {line.word}: started in the background; output in {log}")
            return
        rc = self.run(line.word, cmd)
        if rc:
            self.say(f"*** exit status {rc}")

    def do_help(self, _rest: str) -> None:
        self.out.write(HELP)

    def do_nodes(self, _rest: str) -> None:
        self.say("available nodes are:")
        self.say(" ".join(self.net.nodes))

    def do_net(self, _rest: str) -> None:
        peers: dict[str, list[str]] = {name: [] for name in self.net.nodes}
        for ln in self.net.links:
            peers[ln["a"]].append(f"{ln['a_dev']}:{ln['b_dev']}")
            peers[ln["b"]].append(f"{ln['b_dev']}:{ln['a_dev']}")
        for name, ends in peers.items():
            self.say(f"{name} {' '.join(ends)}")

    def do_links(self, _rest: str) -> None:
        for ln in self.net.links:
            a, b = ln["a_dev"], ln["b_dev"]
            if ln["a_to_b"] == ln["b_to_a"] == "unshaped":
                self.say(f"{a:>12} <-> {b:<12} unshaped")
            else:
                self.say(f"{a:>12} <-> {b:<12} -> {ln['a_to_b']}  <- {ln['b_to_a']}")

    def do_dump(self, _rest: str) -> None:
        for node in self.net.nodes.values():
            self.say(repr(node))

    def do_pingall(self, _rest: str) -> None:
        hosts = [n for n in self.net.hosts if n.IP()]
        sent = received = 0
        for a in hosts:
            seen = []
            for b in hosts:
                if a is b:
                    continue
                done = self.net._run(a.name, ["ping", "-c1", "-W1", str(b.IP())], merge=True)
                sent += 1
                received += done.returncode == 0
                seen.append(b.name if done.returncode == 0 else "X")
            self.say(f"{a.name} -> {' '.join(seen)}")
        lost = 100 * (sent - received) // max(1, sent)
        self.say(f"*** Results: {lost}% dropped ({received}/{sent} received)")

    def do_sh(self, rest: str) -> None:
        if not rest:
            self.say("*** usage: sh <command...>")
            return
        rc = self.run(None, substitute(rest, self.addresses))
        if rc:
            self.say(f"*** exit status {rc}")

    def do_py(self, rest: str) -> None:
        scope: dict[str, Any] = {"net": self.net, "mptlab": api}
        scope.update({n: node for n, node in self.net.nodes.items() if n.isidentifier()})
        try:
            try:
                value = eval(rest, scope)  # noqa: S307 - the user's own Python, as Mininet's `py`
            except SyntaxError:
                exec(rest, scope)  # noqa: S102
                return
            if value is not None:
                self.say(repr(value))
        except Exception as exc:  # noqa: BLE001 - shown, the shell goes on
            self.say(f"*** {type(exc).__name__}: {exc}")

    def do_scheduler(self, rest: str) -> None:
        info = self.net.info
        if rest.strip():
            try:
                self.net.set_scheduler(rest.strip())
            except GuestError as exc:
                self.say(f"*** {exc}")
                return
            self.say(
                f"*** net.mptcp.scheduler = {rest.strip()} in {info['client']} and "
                f"{info['server']} (connections made from now on)"
            )
            return
        for node in (info["client"], info["server"]):
            current = self.net[node].cmd("sysctl -n net.mptcp.scheduler").strip()
            self.say(f"{node}: {current}")
        self.say(f"available: {' '.join(self.net.schedulers())}")

    def do_load(self, rest: str) -> None:
        words = shlex.split(rest)
        if not words:
            self.say("*** usage: load FILE.ko [name=value ...]")
            return
        try:
            schedulers = self.net.load(words[0], **module_params(words[1:]))
        except (ValueError, GuestError) as exc:
            self.say(f"*** {exc}")
            return
        self.say(f"*** loaded {words[0]}; schedulers: {' '.join(schedulers)}")

    def do_workload(self, _rest: str) -> None:
        spec = self.net.spec.config["workload"]
        self.say(f"*** running the workload once: {json.dumps(spec, sort_keys=True)}")
        try:
            metrics = self.net.workload()
        except GuestError as exc:
            self.say(f"*** {exc}")
            return
        except KeyboardInterrupt:
            self.say("*** interrupted")
            return
        for key in sorted(metrics):
            value = metrics[key]
            shown = f"{value:.6g}" if isinstance(value, float) else json.dumps(value, default=str)
            self.say(f"{key:32} {shown[:200]}")

    # -------------------------------------------------------------- the loop
    def loop(self, read=input) -> None:
        while True:
            try:
                text = read(PROMPT)
            except EOFError:
                self.say()
                return
            except KeyboardInterrupt:
                self.say("^C")
                continue
            try:
                if not self.onecmd(text):
                    return
            except GuestError as exc:
                self.say(f"*** {exc}")
                if not self.net._guest or not self.net._guest.alive():
                    return


def _readline(net: api.Network) -> None:
    """History (kept in the cache dir across sessions) and completion of
    commands and node names, where Python has readline."""
    try:
        import readline
    except ImportError:  # pragma: no cover - no readline: input() still works
        return
    import atexit

    history = Path(os.environ.get(HISTORY_ENV) or home.cache_dir() / "shell-history")
    with contextlib.suppress(OSError):
        history.parent.mkdir(parents=True, exist_ok=True)
        readline.read_history_file(history)
    readline.set_history_length(1000)
    atexit.register(_save_history, readline, history)
    words = [*BUILTINS, *net.nodes]

    def complete(text: str, state: int) -> str | None:
        options = [w for w in words if w.startswith(text)]
        return options[state] if state < len(options) else None

    readline.set_completer(complete)
    readline.parse_and_bind("tab: complete")


def _save_history(readline: Any, history: Path) -> None:
    with contextlib.suppress(OSError):
        readline.write_history_file(history)


def _experiment(target: str, file: str | None) -> api.Experiment:
    if file:
        return api.Experiment.from_yaml(file, target)
    return api.Experiment.from_yaml(target)


def _terminate(signum: int, _frame: Any) -> None:
    # SIGTERM / SIGHUP (the terminal closed): leave through the finally
    # blocks, which stop the guest, rather than die and leave it to PDEATHSIG
    raise SystemExit(128 + signum)


def cmd_shell(args: argparse.Namespace) -> int:
    exp = _experiment(args.target, args.file)
    net = api.Network(exp, variant=args.variant, clock=args.clock, quick=args.quick, out=args.out)
    previous = {sig: signal.signal(sig, _terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        print(
            f"*** booting a guest for {exp.name} ({net.variant}, clock {net.clock}), "
            "building the topology ...",
            flush=True,
        )
        try:
            net.start()
        except (KernelNotBuilt, ConfinementError, GuestError) as exc:
            print(f"mptlab: {exc}", file=sys.stderr)
            return 2
        try:
            print(banner(net), flush=True)
            _readline(net)
            Shell(net).loop()
        finally:
            print("*** stopping the guest", flush=True)
            net.stop()
            print(f"*** done; run dir {net.run_dir}", flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "shell",
        help="an experiment's topology, up, with a Mininet-like prompt (no workload)",
        description="Boot the experiment's topology as a run of the variant would be set "
        "up (modules, network, kernel knobs), run no workload, and give a prompt: "
        "`client ping -c 2 server`, `server ss -tni`, `help`; `exit` tears it down.",
    )
    p.add_argument("target", help="experiment name, or a campaign FILE holding one experiment")
    p.add_argument("--variant", help="the variant (as `mptlab show` names it; default: the first)")
    p.add_argument("--file", help="campaign file holding NAME (default: experiments.yaml)")
    p.add_argument(
        "--clock",
        choices=CLOCKS,
        help="the guest's clock (default: the experiment's); under virtual time guest time "
        "runs on while the guest waits for your next command",
    )
    p.add_argument("--quick", action="store_true", help="the short workload for `workload`")
    p.add_argument("--out", help="where the run dir goes (default: ./results/shell)")
    p.set_defaults(func=cmd_shell)
