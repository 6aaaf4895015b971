"""Packaging: the wheel and sdist build, and the wheel works installed on its own.

`python -m build` makes a wheel and an sdist of this tree; the wheel is installed into a fresh
virtualenv (`python -m venv`), and from there `windowstore --version`, the SDK's import and a real
server answering a query are checked. The fresh environment takes the dependencies (NumPy, Arrow,
gRPC, ...) from this one through a .pth file, so nothing is downloaded, but windowstore itself only
from the wheel: the test checks that it is imported from the fresh environment, not this tree.
"""
from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.slow


def test_cli_version_is_the_package_metadata_version():
    r = subprocess.run([sys.executable, "-m", "windowstore.server.cli", "--version"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"windowstore {VERSION}"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return out


def test_wheel_and_sdist_hold_the_package_and_the_generated_protobuf_modules(dist):
    wheels, sdists = list(dist.glob("windowstore-*.whl")), list(dist.glob("windowstore-*.tar.gz"))
    assert [w.name for w in wheels] == [f"windowstore-{VERSION}-py3-none-any.whl"]
    assert [s.name for s in sdists] == [f"windowstore-{VERSION}.tar.gz"]
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    for module in ("windowstore/v1/windowstore_pb2.py", "windowstore/v1/windowstore_pb2_grpc.py",
                   "windowstore/clients/client.py", "windowstore/clients/spark/source.py", "windowstore/server/cli.py",
                   "windowstore/store/parser.py", "windowstore/store/planner/plan.py", "windowstore/txn/scheduler.py"):
        assert module in names, f"{module} missing from the wheel"
    assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)
    entry_points = zipfile.ZipFile(wheels[0]).read(f"windowstore-{VERSION}.dist-info/entry_points.txt").decode()
    assert "windowstore = windowstore.server.cli:main" in entry_points
    members = tarfile.open(sdists[0]).getnames()
    assert f"windowstore-{VERSION}/proto/windowstore/v1/windowstore_pb2.py" in members
    assert f"windowstore-{VERSION}/README.md" in members


SMOKE = textwrap.dedent("""
    import sys
    import windowstore.clients, windowstore.v1.windowstore_pb2 as pb
    from windowstore.clients import Client

    assert windowstore.clients.__file__.startswith(sys.prefix), windowstore.clients.__file__
    assert pb.__file__.startswith(sys.prefix), pb.__file__
    with Client(sys.argv[1], timeout=30) as ws:
        ws.create_stream("smoke", schema={"ts": "int64", "k": "string", "v": "int64"}, subwindows=4,
                         subwindow_ms=1000, clock="manual")
        ws.append("smoke", {"ts": [1, 2, 3], "k": ["a", "b", "a"], "v": [1, 2, 4]})
        ws.slide("smoke")
        print(ws.query("SELECT k, SUM(v) FROM smoke GROUP BY k ORDER BY k").rows)
""")


def test_the_wheel_installed_in_a_fresh_virtualenv_serves_a_query(dist, tmp_path):
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    py, cli = env / "bin" / "python", env / "bin" / "windowstore"
    fresh_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     capture_output=True, text=True, check=True).stdout.strip())
    # The dependencies come from this environment (after the fresh one's own site-packages, so the
    # wheel's windowstore is the one found); this tree's editable install is not a dependency.
    (fresh_site / "windowstore-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(dist.glob("windowstore-*.whl"))
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr

    r = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, f"windowstore {VERSION}"), r.stderr

    server = subprocess.Popen([str(cli), "serve", "--in-memory", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = server.stdout.readline()
        m = re.search(r"serving on (\S+)", line)
        assert m, f"server did not start: {line!r} {server.stderr.read() if server.poll() is not None else ''}"
        assert m.group(1).startswith("127.0.0.1:")
        r = subprocess.run([str(py), "-c", SMOKE, m.group(1)], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip() == "[('a', 5), ('b', 2)]"
    finally:
        server.terminate()
        server.communicate(timeout=60)
