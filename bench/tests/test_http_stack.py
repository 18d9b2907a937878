"""The HTTP stack benchmark's counting of connections and its medians (bench.http_stack)."""

from __future__ import annotations

import os
import socket

from bench.http_stack import FIGURES, connected_ports, medians, socket_ports

TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:8EB3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1
   1: 0100007F:C350 0100007F:8E9B 01 00000000:00000000 00:00000000 00000000     0        0 222 1
   2: 0100007F:C351 0100007F:8E9B 01 00000000:00000000 00:00000000 00000000     0        0 333 1
   3: 0100007F:C352 0100007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 444 1
"""


def test_socket_ports_keeps_the_process_sockets_connected_to_the_port() -> None:
    # 0x8E9B = 36507; 0xC350 = 50000. 111 listens, 333 is another process's, 444 goes elsewhere.
    assert socket_ports(TABLE, {"111", "222", "444"}, 36507) == {50000}
    assert socket_ports(TABLE, {"222", "333"}, 36507) == {50000, 50001}
    assert socket_ports(TABLE, set(), 36507) == set()


def test_connected_ports_sees_this_process_connections_to_a_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with (
            socket.create_connection(("127.0.0.1", port)) as first,
            socket.create_connection(("127.0.0.1", port)) as second,
        ):
            ports = {first.getsockname()[1], second.getsockname()[1]}
            assert connected_ports(os.getpid(), port) == ports
        assert connected_ports(os.getpid(), port) == set()


def test_connected_ports_of_a_process_that_is_gone_is_empty() -> None:
    assert connected_ports(2**22 + 1, 443) == set()


def test_medians_per_stack_and_figure() -> None:
    trials = [
        {"stack": stack, **{f: value + index for index, f in enumerate(FIGURES)}}
        for stack, values in (("a", (1.0, 5.0, 3.0)), ("b", (10.0, 20.0)))
        for value in values
    ]
    assert medians(trials, ("a", "b")) == {
        "a": {f: 3.0 + index for index, f in enumerate(FIGURES)},
        "b": {f: 15.0 + index for index, f in enumerate(FIGURES)},
    }
