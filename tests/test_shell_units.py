"""mptlab shell without a guest: parsing, node-name substitution, the CLI's
arguments, the control server's framing and shapes in words, and the
Network's choice of variant and run dir (tests/test_shell_kernel.py boots it)."""

from __future__ import annotations

import io
import os

import pytest

from mptlab import api, shell
from mptlab.campaign import boot
from mptlab.guest import control
from mptlab.spec.shapes import GilbertElliott, Queue, Shape
from mptlab.spec.yamlsrc import SpecError

NODES = ["client", "server", "r1c", "bgc1"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", shell.Line("empty")),
        ("   ", shell.Line("empty")),
        ("# a comment", shell.Line("empty")),
        ("nodes", shell.Line("builtin", "nodes")),
        ("  help  ", shell.Line("builtin", "help")),
        ("sh ip netns", shell.Line("builtin", "sh", "ip netns")),
        ("client ping -c 2 server", shell.Line("node", "client", "ping -c 2 server")),
        ("server   ss -tni", shell.Line("node", "server", "ss -tni")),
        ("client", shell.Line("node", "client", "")),
        ("server iperf3 -s &", shell.Line("node", "server", "iperf3 -s", background=True)),
        ("server iperf3 -s&  ", shell.Line("node", "server", "iperf3 -s", background=True)),
        (
            'server iperf3 -s &   # "&": in the background',
            shell.Line("node", "server", "iperf3 -s", background=True),
        ),
        ("client echo '#' # x", shell.Line("node", "client", "echo '#' # x")),
        ("client true && echo ok", shell.Line("node", "client", "true && echo ok")),
        ("client ls >&2", shell.Line("node", "client", "ls >&2")),
        ("client echo a&&", shell.Line("node", "client", "echo a&&")),
        ("tc -s qdisc", shell.Line("unknown", "tc", "-s qdisc")),
        ("Client ping server", shell.Line("unknown", "Client", "ping server")),
    ],
)
def test_a_line_is_a_builtin_a_node_command_or_unknown(text, expected):
    assert shell.parse(text, NODES) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ping x # a comment", "ping x"),
        ("echo '#' # x", "echo '#'"),
        (r'echo "a # b" "c\\" # d', r'echo "a # b" "c\\"'),
        ("echo a#b", "echo a#b"),
        ("echo \\# a", "echo \\# a"),
        ("# all of it", ""),
    ],
)
def test_a_trailing_comment_is_cut_outside_quotes(text, expected):
    assert shell.strip_comment(text) == expected


def test_builtins_win_over_a_node_of_the_same_name():
    assert shell.parse("net", ["net", "client"]).kind == "builtin"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ping -c 2 server", "ping -c 2 10.0.3.2"),
        ("ping server server", "ping 10.0.3.2 10.0.3.2"),
        ("iperf3 -c server -t 5", "iperf3 -c 10.0.3.2 -t 5"),
        # a name inside a longer word, or another name that starts like one, stays
        (
            "cat ./server server:80 'server' servers r1",
            "cat ./server server:80 'server' servers r1",
        ),
        ("ip route get r1c", "ip route get 10.0.1.2"),
        ("traceroute\tserver", "traceroute\t10.0.3.2"),
        ("no names here", "no names here"),
    ],
)
def test_node_names_become_addresses_as_whole_words(text, expected):
    addresses = {"client": "10.0.1.1", "server": "10.0.3.2", "r1c": "10.0.1.2"}
    assert shell.substitute(text, addresses) == expected


def test_module_parameters_are_name_value_words():
    assert shell.module_params(["a=1", "beta_x=0.5", "s="]) == {"a": "1", "beta_x": "0.5", "s": ""}
    with pytest.raises(ValueError, match="'oops'.*name=value"):
        shell.module_params(["a=1", "oops"])
    with pytest.raises(ValueError, match="'1a=2'"):
        shell.module_params(["1a=2"])


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        (None, "unshaped"),
        (Shape(), "no delay, no limit"),
        (Shape(rate=25, delay=12.5, queue=Queue(packets=100)), "25mbit 12.5ms q 100p droptail"),
        (
            Shape(rate=8.6, delay=65, loss=1, jitter=2, queue=Queue(bdp=1.5), qdisc="codel"),
            "8.6mbit 65ms jitter 2ms loss 1% q 1.5bdp codel",
        ),
        (Shape(delay=5, gilbert_elliott=GilbertElliott(p=1, r=10)), "5ms loss gilbert-elliott"),
    ],
)
def test_a_shape_in_words(shape, words):
    assert control.describe_shape(shape) == words


def test_the_console_channel_goes_on_the_kernel_command_line(tmp_path):
    class FakeKernel:
        dir = modules_dir = tmp_path
        linux = tmp_path / "linux"

    args = boot.command_line(
        FakeKernel(),  # type: ignore[arg-type]
        tmp_path,
        "/x",
        umid="u",
        uml_dir=tmp_path,
        channel=(7, 9),
    )
    assert "con1=fd:7,fd:9" in args
    # after con=null, which would otherwise silence it
    assert args.index("con1=fd:7,fd:9") > args.index("con=null")
    plain = boot.command_line(FakeKernel(), tmp_path, "/x", umid="u", uml_dir=tmp_path)  # type: ignore[arg-type]
    assert not any(a.startswith("con1=") for a in plain)


def test_the_guest_channel_frames_json_lines_and_passes_other_text(tmp_path):
    """The server's Channel over a pty (a tty as the guest's /dev/tty1 is):
    raw mode, so a line goes through unchanged both ways."""
    import pty

    host, guest = pty.openpty()
    try:
        chan = control.Channel(os.ttyname(guest))
        os.write(host, b'{"id": 1, "op": "run"}\r\nnot json\n{"id": 2,')
        assert chan.read() == [{"id": 1, "op": "run"}, "not json"]
        os.write(host, b' "op": "stop"}\n')
        assert chan.read() == [{"id": 2, "op": "stop"}]
        chan.send({"id": 1, "out": "h\u00e9\n\tx"})
        got = os.read(host, 4096)
        assert got == b'{"id": 1, "out": "h\\u00e9\\n\\tx"}\n'  # no CR added: raw
        os.close(chan.fd)
    finally:
        os.close(host)
        os.close(guest)


@pytest.fixture(scope="module")
def exp():
    return api.Experiment.from_yaml("blest-3g-wlan")


def test_a_network_names_its_variant_and_a_fresh_run_dir(exp, tmp_path):
    net = api.Network(exp, out=tmp_path)
    assert net.variant == exp.variants()[0][0]
    assert net.spec.variant == net.variant and net.spec.repetition == 0
    assert net.run_dir.parent == tmp_path and not net.run_dir.exists()
    assert net.clock == "virtual"
    other = api.Network(exp, variant="scheduler=blest", clock="real", out=tmp_path)
    assert other.spec.config["kernel"]["scheduler"] == "blest"
    assert other.clock == "real" and other.spec.config["clock"] == "real"
    assert "scheduler=blest" in other.run_dir.name
    with pytest.raises(SpecError, match="no variant 'nope'; variants: scheduler=minrtt_pr"):
        api.Network(exp, variant="nope")
    with pytest.raises(SpecError, match="clock 'wall'"):
        api.Network(exp, clock="wall")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no node 'client'; nodes: none: the network is not"):
        net["client"]


def test_a_network_not_started_refuses_commands(exp, tmp_path):
    net = api.Network(exp, out=tmp_path)
    with pytest.raises(api.GuestError, match="not started"):
        net.sh("true")
    net.stop()  # harmless


def test_the_shell_answers_builtins_from_the_hello_without_a_guest(exp, tmp_path):
    net = api.Network(exp, out=tmp_path)
    net.info = {
        "client": "client",
        "server": "server",
        "nodes": {
            "client": {"kind": "host", "interfaces": [["client-eth0", "10.0.1.1/24"]]},
            "r1c": {"kind": "router", "interfaces": [["r1c-eth0", "10.0.1.2/24"]]},
            "sw": {"kind": "switch", "interfaces": [["sw-eth0", ""]]},
        },
        "links": [
            {
                "a": "client",
                "a_dev": "client-eth0",
                "b": "r1c",
                "b_dev": "r1c-eth0",
                "a_to_b": "unshaped",
                "b_to_a": "unshaped",
            }
        ],
    }
    net.nodes = {n: api.Node(net, n, d) for n, d in net.info["nodes"].items()}
    out = io.StringIO()
    sh = shell.Shell(net, out)
    assert sh.addresses == {"client": "10.0.1.1", "r1c": "10.0.1.2"}
    for line in ("nodes", "net", "links", "dump", "tc -s qdisc", "client", "py client.IP()"):
        assert sh.onecmd(line)
    assert not sh.onecmd("exit") and not sh.onecmd("  quit ")
    text = out.getvalue()
    assert "client r1c sw" in text
    assert "client client-eth0:r1c-eth0" in text and "r1c r1c-eth0:client-eth0" in text
    assert "client-eth0 <-> r1c-eth0" in text and "unshaped" in text
    assert "<Host client: client-eth0:10.0.1.1>" in text and "<Switch sw: sw-eth0>" in text
    assert "unknown node or command: tc" in text and "`client tc -s qdisc`" in text
    assert "usage: client <command...>" in text
    assert "'10.0.1.1'" in text


def test_shell_is_a_subcommand_with_its_options(capsys):
    from mptlab import cli

    args = cli.parser().parse_args(
        ["shell", "x", "--variant", "v", "--clock", "real", "--quick", "--out", "o", "--file", "f"]
    )
    assert args.func is shell.cmd_shell
    assert (args.target, args.variant, args.clock, args.quick, args.out, args.file) == (
        "x",
        "v",
        "real",
        True,
        "o",
        "f",
    )
    assert cli.main(["shell", "blest-3g-wlan", "--variant", "nope"]) == 2
    assert "no variant 'nope'" in capsys.readouterr().err
