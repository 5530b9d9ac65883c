"""The pytest plugin, run on small test modules (``pytester``, in a subprocess) that use only
its documented fixtures and marker, with real clients."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
# The child sessions load their plugins by name, none by entry point: the same whether or not
# the installed kubewire declares its pytest11 entry point yet (loaded both ways, pytest would
# register the module twice), and without hypothesis's plugin, which imports hypothesis at the
# summary, where CPython 3.11.7 can fail rewriting it (tests/conftest.py).
PLUGIN = ("-p", "kubewire.testing.pytest_plugin", "-p", "pytest_asyncio.plugin", "-p",
          "anyio.pytest_plugin", "-p", "xdist.plugin", "-p", "no:cacheprovider")

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

SYNC_TESTS = '''
import os
import kubernetes
import pytest

URLS = []

def test_kubernetes_finds_the_server_through_kubeconfig(kubewire_kubeconfig, kubewire_namespace,
                                                       kubewire_server):
    assert os.environ["KUBECONFIG"] == str(kubewire_kubeconfig)
    kubernetes.config.load_kube_config()
    api = kubernetes.client.CoreV1Api()
    api.create_namespaced_config_map(kubewire_namespace, {"metadata": {"name": "cm"}})
    created = kubewire_server.requests(verb="create", resource="configmaps")
    assert [(e.namespace, e.code) for e in created] == [(kubewire_namespace, 201)]
    URLS.append((kubewire_server.url, kubewire_namespace))

@pytest.mark.kubewire(crds=["crd.yaml"])
def test_the_marker_installs_crds(kubewire_server, kubewire_namespace):
    kubewire_server.apply_sync({"apiVersion": "example.com/v1", "kind": "Gadget",
                                "metadata": {"name": "g", "namespace": kubewire_namespace}})
    # the record starts empty for each test: the first test's create is gone
    assert kubewire_server.requests(verb="create") == []
    assert kubewire_server.requests(verb="patch", resource="gadgets")[0].code == 201
    URLS.append((kubewire_server.url, kubewire_namespace))

def test_one_server_fresh_namespaces(kubewire_server):
    (url1, ns1), (url2, ns2) = URLS
    assert url1 == url2 == kubewire_server.url
    assert ns1 != ns2
    gone = kubewire_server.wait_for_sync("namespaces", ns1, deleted=True, timeout=20)
    assert gone is None

def test_lightkube_finds_the_server_through_kubeconfig(kubewire_kubeconfig, kubewire_namespace):
    import lightkube
    from lightkube.resources.core_v1 import Namespace
    client = lightkube.Client()
    assert client.get(Namespace, kubewire_namespace).metadata.name == kubewire_namespace
    client.close()

def test_kr8s_finds_the_server_through_kubeconfig(kubewire_kubeconfig, kubewire_namespace):
    import kr8s
    found = kr8s.get("namespaces", kubewire_namespace)
    assert [ns.name for ns in found] == [kubewire_namespace]

def test_no_server_without_its_fixtures():
    assert "KUBECONFIG" not in os.environ
'''


@pytest.fixture(autouse=True)
def _no_plugin_autoload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, *args, timeout=180)


def test_sync_tests_share_one_server_with_fresh_namespaces(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", crd=CRD)
    pytester.makepyfile(test_sync=SYNC_TESTS)
    result = run(pytester, "-v")
    result.assert_outcomes(passed=6)


ASYNC_TESTS = '''
import pytest
import kubernetes_asyncio
from kubewire.client import Api
from kubewire.models import ConfigMap, ObjectMeta

async def test_kubewire_client_from_pytest_asyncio(kubewire_client, kubewire_namespace,
                                                   kubewire_server):
    maps = Api(ConfigMap, client=kubewire_client, namespace=kubewire_namespace)
    await maps.create(ConfigMap(metadata=ObjectMeta(name="a"), data={"k": "v"}))
    got = await kubewire_server.wait_for("configmaps", "a", namespace=kubewire_namespace,
                                         condition=lambda o: o["data"] == {"k": "v"})
    assert got["metadata"]["name"] == "a"

async def test_kubernetes_asyncio_reads_kubeconfig(kubewire_kubeconfig, kubewire_namespace):
    await kubernetes_asyncio.config.load_kube_config()
    async with kubernetes_asyncio.client.ApiClient() as api:
        ns = await kubernetes_asyncio.client.CoreV1Api(api).read_namespace(kubewire_namespace)
    assert ns.metadata.name == kubewire_namespace

@pytest.mark.anyio
async def test_anyio(kubewire_client, kubewire_server):
    from kubewire.models import Namespace
    names = [n.metadata.name for n in await Api(Namespace, client=kubewire_client).list()]
    assert "default" in names

@pytest.fixture
def anyio_backend():
    return "asyncio"
'''


def test_async_tests_with_pytest_asyncio_and_anyio(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_async=ASYNC_TESTS)
    # -W error: a connection left open (the client not closed on its loop) fails the run
    result = run(pytester, "-o", "asyncio_mode=auto", "-o",
                 "asyncio_default_fixture_loop_scope=function", "-W", "error")
    result.assert_outcomes(passed=3)


SCOPE_TESTS = '''
import json, os
from pathlib import Path

def record(server):
    with Path(os.environ["KW_OUT"]).open("a") as out:
        out.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER", ""), server.url]) + "\\n")

def test_a(kubewire_server): record(kubewire_server)
def test_b(kubewire_server): record(kubewire_server)
def test_c(kubewire_server): record(kubewire_server)
def test_d(kubewire_server): record(kubewire_server)
'''


def urls(path: Path) -> list[tuple[str, str]]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]  # type: ignore[misc]


def test_the_scope_is_configurable(pytester: pytest.Pytester,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = pytester.path / "out.jsonl"
    monkeypatch.setenv("KW_OUT", str(out))
    pytester.makepyfile(test_scope=SCOPE_TESTS)
    run(pytester, "--kubewire-scope", "function").assert_outcomes(passed=4)
    assert len({url for _, url in urls(out)}) == 4
    out.unlink()
    pytester.makeini("[pytest]\nkubewire_scope = module\n")
    run(pytester).assert_outcomes(passed=4)
    assert len({url for _, url in urls(out)}) == 1


KOPF_OPERATOR = '''
import kopf

@kopf.on.create("example.com", "v1", "gadgets")
def made(spec, patch, **_):
    patch.status["seen"] = spec.get("size")
'''

KOPF_TESTS = '''
import pytest
from kopf.testing import KopfRunner

def gadget(name, namespace, size):
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "spec": {"size": size},
            "metadata": {"name": name, "namespace": namespace}}

def seen(size):
    return lambda obj: (obj.get("status") or {}).get("seen") == size

@pytest.mark.kubewire(crds=["crd.yaml"])
def test_kopf_runner_finds_the_server(kubewire_kubeconfig, kubewire_namespace, kubewire_server):
    args = ["run", "--standalone", "-n", kubewire_namespace, "gadget_operator.py"]
    with KopfRunner(args, timeout=60) as runner:
        kubewire_server.apply_sync(gadget("one", kubewire_namespace, 1))
        kubewire_server.wait_for_sync("gadgets.example.com", "one", namespace=kubewire_namespace,
                                      condition=seen(1), timeout=30)
        assert kubewire_server.faults.drop_watches(resource="gadgets") >= 1
        kubewire_server.apply_sync(gadget("two", kubewire_namespace, 2))
        kubewire_server.wait_for_sync("gadgets.example.com", "two", namespace=kubewire_namespace,
                                      condition=seen(2), timeout=30)
    assert runner.exception is None, runner.output
    assert len(kubewire_server.requests(verb="watch", resource="gadgets")) >= 2
    patched = kubewire_server.requests(verb="patch", resource="gadgets", code=200)
    assert {e.name for e in patched} >= {"one", "two"}
    assert kubewire_server.requests(verb="delete", resource="gadgets") == []
'''


def test_kopf_runner_with_the_plugin(pytester: pytest.Pytester) -> None:
    """kopf's own test runner, unchanged, finds the server by KUBECONFIG; the operator keeps
    working after its watch is dropped, and the record shows what it did."""
    pytester.makefile(".yaml", crd=CRD)
    pytester.makepyfile(gadget_operator=KOPF_OPERATOR, test_kopf=KOPF_TESTS)
    run(pytester).assert_outcomes(passed=1)


RESET_TESTS = '''
import httpx

def test_first(kubewire_server):
    kubewire_server.apply_sync({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "left", "namespace": "default"}})
    kubewire_server.faults.inject_error(503, resource="namespaces")

def test_second(kubewire_server):
    url = kubewire_server.url + "/api/v1/namespaces/default/configmaps/left"
    assert httpx.get(url).status_code == EXPECTED
    assert httpx.get(kubewire_server.url + "/api/v1/namespaces").status_code == (
        200 if EXPECTED == 404 else 503)
    assert [e.name for e in kubewire_server.requests(resource="configmaps")] == ["left"]
'''


@pytest.mark.parametrize(("reset", "expected"), [("true", 404), ("false", 200)])
def test_each_test_starts_from_a_reset_server(pytester: pytest.Pytester, reset: str,
                                              expected: int) -> None:
    pytester.makeini(f"[pytest]\nkubewire_reset = {reset}\n")
    pytester.makepyfile(test_reset=RESET_TESTS.replace("EXPECTED", str(expected)))
    run(pytester).assert_outcomes(passed=2)


def test_the_plugin_is_the_pytest11_entry_point() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["pytest11"]["kubewire"]
    assert entry == "kubewire.testing.pytest_plugin"
    assert "pytest-xdist" in " ".join(project["project"]["optional-dependencies"]["test"])


def test_one_server_per_xdist_worker(pytester: pytest.Pytester,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    out = pytester.path / "out.jsonl"
    monkeypatch.setenv("KW_OUT", str(out))
    pytester.makepyfile(test_scope=SCOPE_TESTS)
    run(pytester, "-n", "2").assert_outcomes(passed=4)
    by_worker: dict[str, set[str]] = {}
    for worker, url in urls(out):
        by_worker.setdefault(worker, set()).add(url)
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert all(len(found) == 1 for found in by_worker.values())
    assert by_worker["gw0"] != by_worker["gw1"]
