"""What an isolated backend keeps from a script: the network, the host's environment and files,
the hidden answers, the Docker socket, root; and /dev/shm is as small as /tmp."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_weirdml.sandbox import Limits, Sandbox
from pytest_weirdml.sandbox.contract._fixtures import QUICK, SECRET_ANSWERS, assert_usable, run

__all__ = [
    "host_listener",
    "test_docker_socket_is_unreachable",
    "test_hidden_answers_are_unreachable",
    "test_host_environment_is_not_passed",
    "test_network_is_unreachable",
    "test_runs_as_unprivileged_user",
    "test_shared_memory_is_size_capped",
]


@pytest.fixture
def host_listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's 127.0.0.1 that records whoever connects."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = server.accept()
            except OSError:
                continue
            seen.append(f"{addr[0]}:{addr[1]}")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join(2)
    server.close()


def test_network_is_unreachable(isolated: Sandbox, data_dir: Path, host_listener: tuple[int, list[str]]) -> None:
    port, seen = host_listener
    code = f"""\
    import socket
    targets = [("127.0.0.1", {port}), ("172.17.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=2).close()
            print("REACHED", host, port)
        except OSError as exc:
            print("blocked", host, port, exc)
    try:
        print("RESOLVED", socket.getaddrinfo("pypi.org", 443))
    except OSError as exc:
        print("no dns", exc)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert "REACHED" not in result.output and "RESOLVED" not in result.output
    assert result.output.count("blocked") == 4
    assert seen == []
    assert_usable(isolated, data_dir)


def test_host_environment_is_not_passed(isolated: Sandbox, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-planted-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    code = """\
    import glob, os
    print(dict(os.environ))
    for path in glob.glob("/proc/*/environ"):
        try:
            print(path, open(path, "rb").read().decode(errors="replace"))
        except OSError as exc:
            print(path, "unreadable", exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    assert "API_KEY" not in result.output


def test_hidden_answers_are_unreachable(isolated: Sandbox, task_dir: Path, data_dir: Path) -> None:
    hidden = task_dir / "hidden" / "answers.txt"
    code = f"""\
    import os
    candidates = [
        "{hidden}",
        "data/../hidden/answers.txt",
        "../hidden/answers.txt",
        os.path.join(os.path.dirname(os.path.realpath("data")), "hidden", "answers.txt"),
        os.path.join(os.path.dirname(os.path.realpath("data/x.txt")), "..", "hidden", "answers.txt"),
    ]
    # A shallow search of the whole visible tree: the installed packages are deep and irrelevant.
    for dirpath, dirnames, filenames in os.walk("/"):
        depth = dirpath.count("/")
        dirnames[:] = [d for d in dirnames if depth < 6 and d not in ("proc", "sys", "usr", "dev", "lib")]
        if "answers.txt" in filenames:
            candidates.append(os.path.join(dirpath, "answers.txt"))
    for path in candidates:
        try:
            print("READ", path, open(path).read())
        except OSError as exc:
            print("denied", path, exc.strerror)
    """
    result = run(isolated, data_dir, code, Limits(time_s=30, memory_bytes=1 << 30))
    assert result.exit_code == 0, result.output
    assert SECRET_ANSWERS not in result.output
    assert "READ" not in result.output


def test_docker_socket_is_unreachable(isolated: Sandbox, data_dir: Path) -> None:
    code = """\
    import socket
    for path in ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")
            print("REACHED", path, s.recv(200))
        except OSError as exc:
            print("blocked", path, exc.strerror)
    for port in (2375, 2376):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1)
            print("REACHED tcp", port)
        except OSError as exc:
            print("blocked tcp", port, exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert "REACHED" not in result.output


def test_runs_as_unprivileged_user(isolated: Sandbox, data_dir: Path) -> None:
    code = """\
    import os
    print("uid", os.getuid())
    try:
        open("/etc/weirdml-root-write", "w")
        print("WROTE /etc")
    except OSError as exc:
        print("no write", exc.strerror)
    """
    result = run(isolated, data_dir, code)
    assert "uid 0" not in result.output and "WROTE" not in result.output, result.output


def test_shared_memory_is_size_capped(isolated: Sandbox, data_dir: Path) -> None:
    code = "import os\nfs = os.statvfs('/dev/shm')\nprint('SHM', fs.f_blocks * fs.f_frsize)\n"
    result = run(isolated, data_dir, code)
    assert result.exit_code == 0, result.output
    assert 0 < int(result.output.split("SHM")[1].split()[0]) <= QUICK.tmp_bytes
