"""Issue 19's "done when", end to end: the access-control story a cluster's users live through,
told with the real kubectl (and the ``kubernetes`` package) against a server started with
``--authorization-mode RBAC``, users made with ``kubewire user add``.

- alice, bound to ``view`` in team-a (``kubewire user add alice --role view --namespace
  team-a``): ``kubectl auth can-i`` answers (and exits) as kube does, ``--list`` prints kube's
  table with the rules kube's bootstrap policy gives ``view`` (the expectations below are
  copied from kube's ``bootstrappolicy/testdata/cluster-roles.yaml``, not from kubewire), kube's
  403 texts elsewhere, watches only in team-a;
- bob (``edit``) cannot write bindings at all, and allowed to, cannot grant ``admin`` (kube's
  escalation text) while he can grant ``edit``; carol (``admin``) grants ``admin`` and ``edit``
  but not ``cluster-admin``;
- ``kubectl create sa robot; kubectl create token robot``: the token is
  ``system:serviceaccount:team-a:robot`` with what kube gives every service account (discovery,
  the reviews, issuer discovery), a RoleBinding lets it list pods, and once the
  ServiceAccount is deleted the token is 401;
- ``system:masters`` may do everything; requests without credentials reach only the public
  paths (``/healthz``, ``/livez``, ``/readyz``, ``/version``) and bad credentials are 401 on
  every path, as kube's authenticator fails them before it would fall back to anonymous;
- a chart's namespaced objects apply, re-apply unchanged and delete as a namespace ``admin``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import kubernetes
import pytest
import yaml

from tests.integration import kubectl as cli
from tests.integration.harness import ServerThread
from tests.integration.test_access import https

pytestmark = cli.needs_kubectl
GROUP = "rbac.authorization.k8s.io"
READ = ["get", "list", "watch"]

# kube v1.32 bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/
# cluster-roles.yaml): system:aggregate-to-view's rules, which make up view's
VIEW_RULES: list[tuple[str, list[str]]] = [
    ("", ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
          "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
          "services", "services/status"]),
    ("", ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
          "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    ("", ["namespaces"]),
    ("discovery.k8s.io", ["endpointslices"]),
    ("apps", ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
              "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
              "replicasets/status", "statefulsets", "statefulsets/scale",
              "statefulsets/status"]),
    ("autoscaling", ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    ("batch", ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    ("extensions", ["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                    "deployments/status", "ingresses", "ingresses/status", "networkpolicies",
                    "replicasets", "replicasets/scale", "replicasets/status",
                    "replicationcontrollers/scale"]),
    ("policy", ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    ("networking.k8s.io", ["ingresses", "ingresses/status", "networkpolicies"]),
]
# system:basic-user (bound to system:authenticated)
BASIC_USER = [("selfsubjectreviews.authentication.k8s.io", "[create]"),
              ("selfsubjectaccessreviews.authorization.k8s.io", "[create]"),
              ("selfsubjectrulesreviews.authorization.k8s.io", "[create]")]
# system:discovery (system:authenticated) and system:public-info-viewer (system:authenticated
# and system:unauthenticated): one row per URL and rule, so the shared ones twice
DISCOVERY = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
             "/openapi/*", "/readyz", "/version", "/version/"]
PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
# system:service-account-issuer-discovery (system:serviceaccounts)
ISSUER_DISCOVERY = ["/.well-known/openid-configuration", "/openid/v1/jwks"]


def kubectl_name(group: str, resource: str) -> str:
    """How ``kubectl auth can-i --list`` names a resource: ``pods``, ``deployments.apps/scale``."""
    plural, _, sub = resource.partition("/")
    name = f"{plural}.{group}" if group else plural
    return f"{name}/{sub}" if sub else name


def table(text: str) -> list[tuple[str, str, str, str]]:
    """``auth can-i --list``'s rows, cut where its header's columns start."""
    lines = text.splitlines()
    header = lines[0]
    assert header.split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    starts = [0, header.index("Non-Resource URLs"), header.index("Resource Names"),
              header.index("Verbs")]
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)],
                                                   strict=True)]
        rows.append((cells[0], cells[1], cells[2], cells[3]))
    return rows


def expected_rows(resources: list[tuple[str, str]], urls: list[str]
                  ) -> list[tuple[str, str, str, str]]:
    rows = [(name, "[]", "[]", verbs) for name, verbs in resources]
    rows += [("", f"[{url}]", "[]", "[get]") for url in urls]
    return sorted(rows)


def user_add(server: ServerThread, name: str, role: str, namespace: str,
             token: bool = False) -> Path:
    """``kubewire user add NAME --role ROLE --namespace NS`` against the running server: the
    kubeconfig it prints, in a file."""
    args = [sys.executable, "-m", "kubewire.cli", "user", "add", name, "--role", role,
            "--namespace", namespace, "--data-dir", str(server.config.data_dir)]
    done = subprocess.run([*args, *(["--token"] if token else [])], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"kubewire: RoleBinding kubewire:user:{name}:{role} in {namespace} "
                           f"binds {name} to ClusterRole {role}\n")
    path = server.config.data_dir.parent / f"{name}.kubeconfig"
    path.write_text(done.stdout)
    return path


def token_kubeconfig(server: ServerThread, name: str, token: str) -> Path:
    """A kubeconfig holding only a bearer token (what a pod's client would have)."""
    config = {"apiVersion": "v1", "kind": "Config",
              "clusters": [{"name": "c", "cluster": {
                  "server": server.url,
                  "certificate-authority": str(server.config.data_dir / "pki/ca.crt")}}],
              "users": [{"name": name, "user": {"token": token}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": name}}],
              "current-context": "c"}
    path = server.config.data_dir.parent / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def refused(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    """kubectl fails (exit 1): what it said, stripped."""
    done = cli.run(kubeconfig, *args, stdin=stdin)
    assert done.returncode == 1, (args, done.stdout, done.stderr)
    return done.stderr.strip()


@pytest.fixture
def story(make_server: Callable[..., ServerThread]) -> ServerThread:
    server = make_server(insecure_http=False, authorization_mode="RBAC")
    cli.ok(server, "create", "namespace", "team-a")
    cli.ok(server, "create", "namespace", "team-b")
    cli.ok(server, "run", "web", "-n", "team-a", "--image", "nginx")
    return server


def test_view_user_asks_can_i(story: ServerThread) -> None:
    alice = user_add(story, "alice", "view", "team-a")  # a client certificate
    context = yaml.safe_load(alice.read_text())["contexts"][0]["context"]
    assert context["namespace"] == "team-a"
    cases: list[tuple[list[str], str]] = [
        (["list", "pods"], "yes"), (["get", "pods"], "yes"), (["watch", "pods"], "yes"),
        (["get", "pods/web"], "yes"),  # resource/name
        (["create", "pods"], "no"), (["delete", "pods"], "no"), (["update", "pods"], "no"),
        (["list", "secrets"], "no"), (["get", "secrets/token"], "no"),
        (["get", "pods", "--subresource", "log"], "yes"),
        (["get", "pods", "--subresource", "status"], "yes"),
        (["create", "pods", "--subresource", "exec"], "no"),
        (["get", "pods", "--subresource", "exec"], "no"),
        (["list", "deployments.apps"], "yes"), (["get", "deployments.apps/scale"], "yes"),
        (["patch", "deployments.apps", "--subresource", "scale"], "no"),
        (["list", "pods", "-A"], "no"), (["watch", "pods", "--all-namespaces"], "no"),
        (["list", "pods", "-n", "team-b"], "no"),
        (["create", "rolebindings.rbac.authorization.k8s.io"], "no"),
        (["get", "/healthz"], "yes"), (["get", "/api"], "yes"), (["get", "/metrics"], "no"),
    ]
    for args, answer in cases:
        done = cli.run(alice, "auth", "can-i", *args)
        assert (done.stdout.strip(), done.returncode) == (answer, 0 if answer == "yes" else 1), (
            args, done.stdout, done.stderr)
        assert done.stderr == "", (args, done.stderr)
    quiet = cli.run(alice, "auth", "can-i", "list", "secrets", "-q")
    assert (quiet.stdout, quiet.returncode) == ("", 1)
    # a cluster-scoped kind asked about in a namespace: kubectl's warning, the server's answer
    done = cli.run(alice, "auth", "can-i", "list", "nodes")
    assert (done.stdout, done.returncode) == ("no\n", 1)
    assert done.stderr.startswith("Warning: resource 'nodes' is not namespace scoped")


def test_view_user_lists_what_kubes_view_role_gives(story: ServerThread) -> None:
    alice = user_add(story, "alice", "view", "team-a", token=True)
    view = [(kubectl_name(group, r), "[get list watch]") for group, rs in VIEW_RULES
            for r in rs]
    urls = DISCOVERY + PUBLIC_INFO
    in_a = table(cli.ok(alice, "auth", "can-i", "--list", "-n", "team-a"))
    assert sorted(in_a) == expected_rows(BASIC_USER + view, urls)
    assert in_a[:3] == [(name, "[]", "[]", verbs) for name, verbs in BASIC_USER]
    in_b = table(cli.ok(alice, "auth", "can-i", "--list", "-n", "team-b"))
    assert sorted(in_b) == expected_rows(BASIC_USER, urls)


def test_view_user_gets_kubes_403_elsewhere_and_watches_only_its_namespace(
        story: ServerThread) -> None:
    alice = user_add(story, "alice", "view", "team-a", token=True)
    assert cli.ok(alice, "get", "pods", "-o", "name").split() == ["pod/web"]

    def says(verb: str, resource: str, where: str, group: str = "", name: str = "") -> str:
        what = f'{resource}{"." + group if group else ""}'
        what += f' "{name}"' if name else ""
        return (f'Error from server (Forbidden): {what} is forbidden: User "alice" cannot '
                f'{verb} resource "{resource}" in API group "{group}" {where}')

    team_b = 'in the namespace "team-b"'
    assert refused(alice, "get", "pods", "-n", "team-b") == says("list", "pods", team_b)
    assert refused(alice, "get", "pods", "-A") == says("list", "pods", "at the cluster scope")
    assert refused(alice, "get", "secrets") == says("list", "secrets",
                                                     'in the namespace "team-a"')
    assert refused(alice, "delete", "pod", "web") == says("delete", "pods",
                                                          'in the namespace "team-a"',
                                                          name="web")
    assert refused(alice, "create", "deployment", "d", "--image", "x") == (
        "error: failed to create deployment: " + says(
            "create", "deployments", 'in the namespace "team-a"', group="apps")
        .removeprefix("Error from server (Forbidden): "))
    # kubectl get -w -A lists first: refused at once
    assert refused(alice, "get", "pods", "-w", "-A") == says("list", "pods",
                                                             "at the cluster scope")
    assert refused(alice, "get", "--raw", "/api/v1/pods?watch=true") == (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot watch resource '
        '"pods" in API group "" at the cluster scope')
    # the kubernetes package's watch: served in team-a, refused across namespaces
    api = kubernetes.config.new_client_from_config(str(alice))
    try:
        core = kubernetes.client.CoreV1Api(api)
        events = list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "team-a",
                                                      timeout_seconds=1))
        assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "web")]
        with pytest.raises(kubernetes.client.ApiException) as err:
            list(kubernetes.watch.Watch().stream(core.list_pod_for_all_namespaces,
                                                 timeout_seconds=1))
        assert err.value.status == 403
        assert json.loads(err.value.body)["message"] == (
            'pods is forbidden: User "alice" cannot watch resource "pods" in API group "" at '
            "the cluster scope")
    finally:
        api.close()


def test_edit_cannot_grant_admin_and_admin_cannot_grant_cluster_admin(
        story: ServerThread) -> None:
    bob = user_add(story, "bob", "edit", "team-a", token=True)
    # edit holds no RBAC permissions: kube's authorizer refuses before any escalation check
    assert refused(bob, "create", "rolebinding", "g", "--clusterrole", "edit",
                   "--user", "dave") == (
        "error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io is "
        'forbidden: User "bob" cannot create resource "rolebindings" in API group '
        '"rbac.authorization.k8s.io" in the namespace "team-a"')
    cli.ok(story, "create", "role", "binding-writer", "-n", "team-a", "--verb", "create",
           "--resource", "rolebindings.rbac.authorization.k8s.io")
    cli.ok(story, "create", "rolebinding", "bob-writes", "-n", "team-a", "--role",
           "binding-writer", "--user", "bob")
    # allowed to write bindings, bob cannot grant admin: he does not hold all its rules
    said = refused(bob, "create", "rolebinding", "g-admin", "--clusterrole", "admin",
                   "--user", "dave")
    # kube lists what admin holds beyond edit (system:aggregate-to-admin), less what he has
    assert said == (
        'error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io "g-admin" '
        'is forbidden: user "bob" (groups=["system:authenticated"]) is attempting to grant '
        "RBAC permissions not currently held:\n"
        '{APIGroups:["authorization.k8s.io"], Resources:["localsubjectaccessreviews"], '
        'Verbs:["create"]}\n'
        '{APIGroups:["rbac.authorization.k8s.io"], Resources:["rolebindings"], '
        'Verbs:["delete" "deletecollection" "get" "list" "patch" "update" "watch"]}\n'
        '{APIGroups:["rbac.authorization.k8s.io"], Resources:["roles"], '
        'Verbs:["create" "delete" "deletecollection" "get" "list" "patch" "update" "watch"]}')
    # edit he holds, every rule of it: granted
    out = cli.ok(bob, "create", "rolebinding", "g-edit", "--clusterrole", "edit", "--user",
                 "dave")
    assert out == "rolebinding.rbac.authorization.k8s.io/g-edit created\n"

    carol = user_add(story, "carol", "admin", "team-a", token=True)
    for role in ("admin", "edit", "view"):
        out = cli.ok(carol, "create", "rolebinding", f"c-{role}", "--clusterrole", role,
                     "--user", "dave")
        assert out == f"rolebinding.rbac.authorization.k8s.io/c-{role} created\n"
    assert refused(carol, "create", "rolebinding", "c-ca", "--clusterrole", "cluster-admin",
                   "--user", "dave") == (
        'error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io "c-ca" is '
        'forbidden: user "carol" (groups=["system:authenticated"]) is attempting to grant RBAC '
        'permissions not currently held:\n{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n'
        '{NonResourceURLs:["*"], Verbs:["*"]}')
    # nor in another namespace, where she holds nothing
    assert refused(carol, "create", "rolebinding", "c-b", "-n", "team-b", "--clusterrole",
                   "view", "--user", "dave") == (
        "error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io is "
        'forbidden: User "carol" cannot create resource "rolebindings" in API group '
        '"rbac.authorization.k8s.io" in the namespace "team-b"')


def test_service_account_token_story(story: ServerThread) -> None:
    cli.ok(story, "create", "serviceaccount", "robot", "-n", "team-a")
    token = cli.ok(story, "create", "token", "robot", "-n", "team-a").strip()
    robot = token_kubeconfig(story, "robot", token)
    whoami = cli.ok(robot, "auth", "whoami", "-o", "json")
    user = json.loads(whoami)["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:team-a:robot"
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:team-a",
                              "system:authenticated"]
    uid = json.loads(cli.ok(story, "get", "sa", "robot", "-n", "team-a", "-o", "json")
                     )["metadata"]["uid"]
    assert user["uid"] == uid
    assert [x.split("=")[0] for x in user["extra"]["authentication.kubernetes.io/credential-id"]
            ] == ["JTI"]
    # what kube gives every service account: the reviews, discovery, issuer discovery
    rows = table(cli.ok(robot, "auth", "can-i", "--list", "-n", "team-a"))
    assert sorted(rows) == expected_rows(BASIC_USER, DISCOVERY + PUBLIC_INFO + ISSUER_DISCOVERY)
    said = refused(robot, "get", "pods", "-n", "team-a")
    assert said == ('Error from server (Forbidden): pods is forbidden: User '
                    '"system:serviceaccount:team-a:robot" cannot list resource "pods" in API '
                    'group "" in the namespace "team-a"')
    assert json.loads(cli.ok(robot, "get", "--raw", "/.well-known/openid-configuration")
                      )["jwks_uri"].endswith("/openid/v1/jwks")
    # a RoleBinding to the service account: it lists pods
    cli.ok(story, "create", "rolebinding", "robot-view", "-n", "team-a", "--clusterrole",
           "view", "--serviceaccount", "team-a:robot")
    assert cli.ok(robot, "get", "pods", "-n", "team-a", "-o", "name").split() == ["pod/web"]
    assert cli.run(robot, "auth", "can-i", "list", "pods", "-n", "team-a").stdout == "yes\n"
    # the ServiceAccount deleted, its token is refused
    cli.ok(story, "delete", "serviceaccount", "robot", "-n", "team-a")
    assert refused(robot, "get", "pods", "-n", "team-a") == (
        "error: You must be logged in to the server (Unauthorized)")
    # a new robot of the same name is another account (another uid): the old token stays dead
    cli.ok(story, "create", "serviceaccount", "robot", "-n", "team-a")
    assert refused(robot, "auth", "whoami") == (
        "error: You must be logged in to the server (Unauthorized)")


def test_masters_do_everything_and_anonymous_reaches_only_public_paths(
        story: ServerThread) -> None:
    admin = story.kubeconfig
    for args in (["*", "*", "-A"], ["create", "clusterroles"], ["get", "/metrics"],
                 ["impersonate", "users"], ["escalate", "roles"], ["bind", "clusterroles"]):
        assert cli.run(admin, "auth", "can-i", *args).stdout == "yes\n", args
    rows = table(cli.ok(admin, "auth", "can-i", "--list"))
    assert rows[:2] == [("*.*", "[]", "[]", "[*]"), ("", "[*]", "[]", "[*]")]
    groups = json.loads(cli.ok(admin, "auth", "whoami", "-o", "json")
                        )["status"]["userInfo"]["groups"]
    assert groups == ["system:masters", "system:authenticated"]
    # no credentials: the public paths are served, the rest is 401
    unauthorized = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    for path in ("/healthz", "/livez", "/readyz", "/version", "/version/"):
        assert https(story, "GET", path).status == 200, path
    for path in ("/api", "/apis", "/openapi/v2", "/metrics", "/api/v1/namespaces/team-a/pods",
                 "/.well-known/openid-configuration", "/openid/v1/jwks"):
        reply = https(story, "GET", path)
        assert (reply.status, json.loads(reply.body)) == (401, unauthorized), path
    # bad credentials are 401 on every path, the public ones too (kube's authenticator fails
    # them before it would fall back to anonymous)
    for path in ("/healthz", "/version", "/readyz?verbose", "/api"):
        reply = https(story, "GET", path, token="not-a-token")
        assert (reply.status, json.loads(reply.body)) == (401, unauthorized), path
    garbage = https(story, "POST", "/version", token="not-a-token", body={})
    assert garbage.status == 401
    # kubectl says it as kube's clients do
    bad = token_kubeconfig(story, "nobody", "not-a-token")
    assert refused(bad, "version", "-o", "json").endswith(
        "error: You must be logged in to the server (the server has asked for the client to "
        "provide credentials)")


NAMESPACED_CHART = [
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "demo"}},
    {"apiVersion": f"{GROUP}/v1", "kind": "Role", "metadata": {"name": "demo"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                "verbs": ["get", "list", "watch", "create", "update", "patch"]},
               {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"],
                "verbs": ["delete"]}]},
    {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": "demo"},
     "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "demo"},
     "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "team-a"}]},
    {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": "demo-view"},
     "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
     "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "team-a"}]},
]
NAMES = ["serviceaccount/demo", "role.rbac.authorization.k8s.io/demo",
         "rolebinding.rbac.authorization.k8s.io/demo",
         "rolebinding.rbac.authorization.k8s.io/demo-view"]


def test_chart_applies_as_a_namespace_admin(story: ServerThread) -> None:
    carol = user_add(story, "carol", "admin", "team-a", token=True)
    manifests = yaml.safe_dump_all(NAMESPACED_CHART, sort_keys=False)
    out = cli.ok(carol, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} created" for n in NAMES]
    # (split: jsonpath's ``..`` walks Go maps, so the List's empty version moves about)
    versions = cli.ok(carol, "get", "-f", "-", "-o", "jsonpath={..resourceVersion}",
                      stdin=manifests).split()
    out = cli.ok(carol, "apply", "-f", "-", stdin=manifests)
    assert out.splitlines() == [f"{n} unchanged" for n in NAMES]
    assert cli.ok(carol, "get", "-f", "-", "-o", "jsonpath={..resourceVersion}",
                  stdin=manifests).split() == versions
    assert len(versions) == len(NAMES)
    diff = cli.run(carol, "diff", "-f", "-", stdin=manifests)
    assert (diff.returncode, diff.stdout) == (0, ""), diff.stderr
    # the chart's service account may now do what its Role says
    token = cli.ok(carol, "create", "token", "demo").strip()
    demo = token_kubeconfig(story, "demo", token)
    cli.ok(demo, "create", "configmap", "lock", "-n", "team-a")
    cli.ok(demo, "delete", "configmap", "lock", "-n", "team-a")
    assert cli.run(demo, "auth", "can-i", "delete", "configmaps/other", "-n", "team-a"
                   ).stdout == "no\n"
    out = cli.ok(carol, "delete", "-f", "-", stdin=manifests)
    assert out.splitlines() == ['{} "{}" deleted'.format(*n.split("/")) for n in NAMES]
    gone = cli.run(carol, "get", "-f", "-", stdin=manifests)
    assert gone.returncode == 1 and gone.stderr.count("NotFound") == len(NAMES)
    # a Role with rules she does not hold, and the cluster-scoped half of a chart: refused
    nodes = {"apiVersion": f"{GROUP}/v1", "kind": "Role", "metadata": {"name": "nodes"},
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
    said = refused(carol, "apply", "-f", "-", stdin=yaml.safe_dump(nodes))
    assert re.fullmatch(
        r'Error from server \(Forbidden\): error when creating "STDIN": roles.rbac.authorization'
        r'.k8s.io "nodes" is forbidden: user "carol" \(groups=\["system:authenticated"\]\) is '
        r"attempting to grant RBAC permissions not currently held:\n"
        r'\{APIGroups:\[""\], Resources:\["nodes"\], Verbs:\["get"\]\}', said), said
    cluster_role = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
                    "metadata": {"name": "demo"}, "rules": []}
    said = refused(carol, "apply", "-f", "-", stdin=yaml.safe_dump(cluster_role))
    assert said.endswith(
        'clusterroles.rbac.authorization.k8s.io "demo" is forbidden: User "carol" cannot get '
        'resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster '
        "scope"), said



def test_one_object_by_name_with_a_field_selector(story: ServerThread) -> None:
    """kube's RequestInfoFactory: a list or watch whose field selector requires
    ``metadata.name=X`` is authorized as asking for X, so a Role with ``resourceNames`` lets
    ``kubectl get pod -w`` and a one-object informer work, and nothing else."""
    cli.ok(story, "run", "other", "-n", "team-a", "--image", "nginx")
    cli.ok(story, "create", "role", "web-only", "-n", "team-a", "--verb", "get,list,watch",
           "--resource", "pods", "--resource-name", "web")
    erin = user_add(story, "erin", "view", "team-b", token=True)
    cli.ok(story, "create", "rolebinding", "erin-web", "-n", "team-a", "--role", "web-only",
           "--user", "erin")
    names = cli.ok(erin, "get", "pods", "-n", "team-a", "--field-selector",
                   "metadata.name=web", "-o", "name")
    assert names.split() == ["pod/web"]
    assert refused(erin, "get", "pods", "-n", "team-a") == (
        'Error from server (Forbidden): pods is forbidden: User "erin" cannot list resource '
        '"pods" in API group "" in the namespace "team-a"')
    # another name: refused, and kube's text names it
    assert refused(erin, "get", "pods", "-n", "team-a", "--field-selector",
                   "metadata.name=other") == (
        'Error from server (Forbidden): pods "other" is forbidden: User "erin" cannot list '
        'resource "pods" in API group "" in the namespace "team-a"')
    # a selector that is not only the name still names it; one that does not parse does not
    assert cli.ok(erin, "get", "--raw", "/api/v1/namespaces/team-a/pods?fieldSelector="
                  "metadata.name%3Dweb,status.phase%21%3DRunning").startswith('{"kind":"PodList"')
    assert refused(erin, "get", "--raw", "/api/v1/namespaces/team-a/pods?fieldSelector="
                   "metadata.name%3D..") == (
        'Error from server (Forbidden): pods is forbidden: User "erin" cannot list resource '
        '"pods" in API group "" in the namespace "team-a"')
    # the kubernetes package's watch of that one pod
    api = kubernetes.config.new_client_from_config(str(erin))
    try:
        core = kubernetes.client.CoreV1Api(api)
        events = list(kubernetes.watch.Watch().stream(
            core.list_namespaced_pod, "team-a", field_selector="metadata.name=web",
            timeout_seconds=1))
        assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "web")]
    finally:
        api.close()


def test_anonymous_auth_makes_requests_without_credentials_system_anonymous(
        make_server: Callable[..., ServerThread]) -> None:
    """``--anonymous-auth`` (kube's default): no credentials is ``system:anonymous`` in
    ``system:unauthenticated`` everywhere, authorized as any user (under RBAC: kube's 403s,
    what the groups' bindings grant allowed); bad credentials are still 401."""
    server = make_server(insecure_http=False, authorization_mode="RBAC", anonymous_auth=True)
    cli.ok(server, "create", "namespace", "team-a")

    def refusal(message: str, details: dict[str, str]) -> tuple[int, dict[str, object]]:
        return 403, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": message, "reason": "Forbidden", "details": details,
                     "code": 403}

    def answer(path: str, method: str = "GET", body: object = None,
               token: str | None = None) -> tuple[int, object]:
        reply = https(server, method, path, body=body, token=token)
        kind = reply.headers.get("content-type", "")
        return reply.status, json.loads(reply.body) if "json" in kind else reply.body

    assert answer("/api") == refusal('forbidden: User "system:anonymous" cannot get path "/api"',
                                     {})
    assert answer("/api/v1/namespaces/team-a/pods") == refusal(
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group '
        '"" in the namespace "team-a"', {"kind": "pods"})
    assert answer("/apis/authentication.k8s.io/v1/selfsubjectreviews", "POST", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}) == refusal(
        'selfsubjectreviews.authentication.k8s.io is forbidden: User "system:anonymous" cannot '
        'create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the '
        "cluster scope", {"group": "authentication.k8s.io", "kind": "selfsubjectreviews"})
    assert answer("/version")[0] == 200 and answer("/healthz") == (200, b"ok")
    # publishing issuer discovery to everyone, as kube's documentation shows
    cli.ok(server, "create", "clusterrolebinding", "oidc-reviewer", "--clusterrole",
           "system:service-account-issuer-discovery", "--group", "system:unauthenticated")
    code, document = answer("/.well-known/openid-configuration")
    assert code == 200 and isinstance(document, dict) and document["issuer"]
    assert answer("/openid/v1/jwks")[0] == 200
    # bad credentials: 401, never anonymous
    assert answer("/api", token="not-a-token")[0] == 401
    assert answer("/version", token="not-a-token")[0] == 401


def test_paths_no_resource_serves_are_authorized_as_kube_parses_them(
        story: ServerThread) -> None:
    """kube authorizes a request before it looks for the resource: a path under
    ``/api/VERSION/`` or ``/apis/GROUP/VERSION/`` is a resource request whether or not the
    resource exists, so who may not gets 403 (kube's text) and who may gets the 404."""
    alice = user_add(story, "alice", "view", "team-a", token=True)
    cases = [
        ("/api/v1/namespaces/team-a/foos", 'foos is forbidden: User "alice" cannot list '
         'resource "foos" in API group "" in the namespace "team-a"'),
        ("/apis/example.com/v1/widgets?watch=1", 'widgets.example.com is forbidden: User '
         '"alice" cannot watch resource "widgets" in API group "example.com" at the cluster '
         "scope"),
        ("/apis/example.com/v1/namespaces/team-a/widgets/w", 'widgets.example.com "w" is '
         'forbidden: User "alice" cannot get resource "widgets" in API group "example.com" in '
         'the namespace "team-a"'),
        ("/api/v1/namespaces/team-a/pods/web/bogus", 'pods "web" is forbidden: User "alice" '
         'cannot get resource "pods/bogus" in API group "" in the namespace "team-a"'),
        ("/api/v1/watch/namespaces/team-b/foos", 'foos is forbidden: User "alice" cannot '
         'watch resource "foos" in API group "" in the namespace "team-b"'),
    ]
    for path, message in cases:
        assert refused(alice, "get", "--raw", path) == (
            f"Error from server (Forbidden): {message}"), path
        gone = cli.run(story.kubeconfig, "get", "--raw", path)
        assert gone.stderr.strip() == ("Error from server (NotFound): the server could not "
                                       "find the requested resource"), path
    # fewer parts are non-resource paths: discovery's, allowed to everyone, or 404
    for path in ("/apis/nope", "/api/v2", "/apis/nope/v1"):
        assert refused(alice, "get", "--raw", path) == (
            "Error from server (NotFound): the server could not find the requested resource")
    assert json.loads(cli.ok(alice, "get", "--raw", "/apis/apps/v1"))["groupVersion"] == (
        "apps/v1")
    assert refused(alice, "get", "--raw", "/livez/ping") == (
        'Error from server (Forbidden): forbidden: User "alice" cannot get path "/livez/ping"')
