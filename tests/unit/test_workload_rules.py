"""Pure decisions of the StatefulSet and DaemonSet controllers: kube's revision hashing (FNV-1
over Go JSON, SafeEncodeString), history pruning, ordinal identity, node eligibility with the
DaemonSet tolerations, rolling-update budgets and status."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers import adoption, history, pod_state
from kubewire.cluster.controllers import daemonset_rules as ds_rules
from kubewire.cluster.controllers import statefulset_rules as sts_rules

Obj = dict[str, Any]


def test_fnv_variants_match_known_vectors() -> None:
    assert history.fnv32(b"a") == 0x050C5D7E  # FNV-1, Go's fnv.New32
    assert history.fnv32a(b"a") == 0xE40C292C  # FNV-1a, Go's fnv.New32a
    assert history.fnv32(b"foobar") == 0x31F0B262
    assert history.fnv32a(b"Hello world") == 1498229191
    # the collision count continues the same hash
    assert history.fnv32(b"1", history.fnv32(b"foo")) == history.fnv32(b"foo1")


def test_safe_encode_and_go_json() -> None:
    assert history.safe_encode("abc") == "vwx"
    assert history.safe_encode("0123456789") == "456789bcdf"
    assert history.go_json({"b": 1, "a": ["<&>"], "c": None}) == \
        b'{"a":["\\u003c\\u0026\\u003e"],"b":1,"c":null}'
    assert history.go_json({"s": "é"}) == '{"s":"é"}'.encode()


def test_revision_bytes_are_json_marshal_of_getpatchs_map() -> None:
    """getPatch unmarshals the encoded owner into ``map[string]interface{}`` (every number a
    float64) and ``json.Marshal``s it: floatEncoder writes integral floats without a fraction
    and 2**53 + 1 rounded; appendString escapes U+2028 and invalid UTF-8 (\\ufffd)."""
    assert history.go_json({"n": [3.0, 2 ** 53 + 1, 1e21, 1e-7], "s": "\u2028\udc80"}) == (
        b'{"n":[3,9007199254740992,1e+21,1e-7],"s":"\\u2028\\ufffd"}')


def test_a_revisions_data_keeps_the_marshalled_key_order() -> None:
    """kube keeps getPatch's bytes as the RawExtension and serves them as they are: the
    data's keys come sorted (``$patch`` first), whatever order the template had."""
    sts: Obj = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]},
                                      "metadata": {"labels": {"app": "web"}}}}}
    data = history.new_revision(sts, history.template_patch(sts), 1, None, {})["data"]
    template = data["spec"]["template"]
    assert list(template) == ["$patch", "metadata", "spec"]
    assert list(template["metadata"]) == ["creationTimestamp", "labels"]
    assert list(template["spec"]["containers"][0]) == ["image", "name"]


def test_revision_patch_and_hash() -> None:
    sts: Obj = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                             "annotations": {"a": "b"}},
                "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    data = history.template_patch(sts)
    assert history.go_json(data) == (
        b'{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,'
        b'"labels":{"app":"web"}},"spec":{"containers":[{"image":"x","name":"c"}]}}}}')
    expected = history.safe_encode(str(history.fnv32(history.go_json(data) + b"0")))
    assert history.revision_hash(data, 0) == expected
    assert history.revision_hash(data, 1) != expected
    rev = history.new_revision(sts, data, 3, 0, {"app": "web"})
    assert rev["metadata"]["name"] == f"web-{expected}"
    assert rev["metadata"]["labels"] == {"app": "web", "controller-revision-hash": expected}
    assert rev["metadata"]["annotations"] == {"a": "b"}
    assert rev["revision"] == 3
    assert rev["metadata"]["ownerReferences"][0]["controller"] is True
    assert history.equal_revision(rev, history.template_patch(sts))
    assert history.revision_name("x" * 300, "h") == "x" * 223 + "-h"


def test_history_pruning_keeps_live_and_newest() -> None:
    revs = [{"metadata": {"name": f"r{i}"}, "revision": i} for i in range(1, 6)]
    pruned = history.revisions_to_prune(revs, {"r1", "r5"}, 2)
    assert [history.revision_number(r) for r in pruned] == [2]
    assert history.revisions_to_prune(revs, set(), 10) == []
    assert history.next_revision(revs) == 6 and history.next_revision([]) == 1


def statefulset(**spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"replicas": 3, "serviceName": "svc",
                     "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "c", "image": "x"}],
                         "volumes": [{"name": "www", "emptyDir": {}}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "www",
                                                            "labels": {"t": "1"}}}],
                     **spec}}


def test_statefulset_identity_and_claims() -> None:
    sts = statefulset(ordinals={"start": 5})
    pod = sts_rules.new_pod(sts, 6, "web-abc", sts["spec"]["template"])
    assert pod["metadata"]["name"] == "web-6"
    assert pod["metadata"]["labels"] == {
        "app": "web", "statefulset.kubernetes.io/pod-name": "web-6",
        "apps.kubernetes.io/pod-index": "6", "controller-revision-hash": "web-abc"}
    assert pod["spec"]["hostname"] == "web-6" and pod["spec"]["subdomain"] == "svc"
    assert pod["spec"]["volumes"] == [{"name": "www",
                                       "persistentVolumeClaim": {"claimName": "www-web-6"}}]
    claim = sts_rules.new_claims(sts, 6)[0]
    assert claim["metadata"]["name"] == "www-web-6"
    assert claim["metadata"]["labels"] == {"t": "1", "app": "web"}
    assert sts_rules.ordinal_of("web", pod) == 6
    assert sts_rules.ordinal_of("web", {"metadata": {"name": "web-06"}}) is None
    assert sts_rules.ordinal_of("web", {"metadata": {"name": "webx-1"}}) is None


def test_statefulset_partition_and_status() -> None:
    sts = statefulset(updateStrategy={"type": "RollingUpdate",
                                      "rollingUpdate": {"partition": 2}})
    assert sts_rules.revision_for(sts, 1, "cur", "upd") == "cur"
    assert sts_rules.revision_for(sts, 2, "cur", "upd") == "upd"
    assert sts_rules.revision_for(statefulset(updateStrategy={"type": "OnDelete"}), 0,
                                  "cur", "upd") == "upd"

    def pod(rev: str, ready: bool = True) -> Obj:
        return {"metadata": {"labels": {"controller-revision-hash": rev}},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": str(ready)}]}}

    st = sts_rules.status(sts, [pod("cur"), pod("cur"), pod("upd", False)], ("cur", "upd"), 0,
                          0.0)
    assert (st["replicas"], st["readyReplicas"], st["currentReplicas"],
            st["updatedReplicas"]) == (3, 2, 2, 1)
    st = sts_rules.status(statefulset(), [pod("upd"), pod("upd"), pod("upd")], ("cur", "upd"),
                          0, 0.0)
    assert st["currentRevision"] == "upd" and st["currentReplicas"] == 3
    assert st["observedGeneration"] == 2 and st["collisionCount"] == 0


def daemonset(**pod_spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "ns", "uid": "u", "generation": 4},
            "spec": {"template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c"}], **pod_spec}}}}


def node(name: str, labels: dict[str, str] | None = None, *taints: Obj) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": list(taints)}}


def test_daemonset_eligibility() -> None:
    ds = daemonset()
    assert ds_rules.should_run(ds, node("n")) == (True, True)
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unschedulable",
                "node.kubernetes.io/memory-pressure"):
        for effect in ("NoSchedule", "NoExecute"):
            tolerated = (key, effect) in ds_rules.DAEMON_TOLERATIONS
            expected = (True, True) if tolerated else (False, effect == "NoSchedule")
            assert ds_rules.should_run(ds, node("n", None, {"key": key, "effect": effect})) \
                == expected, (key, effect)
    network = {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
    assert ds_rules.should_run(ds, node("n", None, network)) == (False, True)
    assert ds_rules.should_run(daemonset(hostNetwork=True), node("n", None, network)) == \
        (True, True)
    assert ds_rules.should_run(ds, node("n", None, {"key": "x", "effect": "PreferNoSchedule"})) \
        == (True, True)
    tolerating = daemonset(tolerations=[{"key": "x", "operator": "Equal", "value": "1"}])
    assert ds_rules.should_run(tolerating, node("n", None, {"key": "x", "value": "1",
                                                             "effect": "NoExecute"})) == \
        (True, True)
    assert ds_rules.should_run(tolerating, node("n", None, {"key": "x", "value": "2",
                                                             "effect": "NoExecute"})) == \
        (False, False)
    selecting = daemonset(nodeSelector={"r": "e"})
    assert ds_rules.should_run(selecting, node("n", {"r": "e"}))[0]
    assert ds_rules.should_run(selecting, node("n", {"r": "c"})) == (False, False)
    affine = daemonset(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]}]}}})
    assert ds_rules.should_run(affine, node("n", {"cpu": "8"}))[0]
    assert not ds_rules.should_run(affine, node("n", {"cpu": "2"}))[0]
    assert ds_rules.should_run(affine, node("m", {"cpu": "2"}))[0]
    assert ds_rules.should_run(daemonset(nodeName="m"), node("n")) == (False, False)


def test_daemonset_pod_and_budgets() -> None:
    ds = daemonset(affinity={"podAffinity": {}}, tolerations=[
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 5}])
    pod = ds_rules.new_pod(ds, "n1", "h")
    assert pod["metadata"]["labels"] == {"a": "b", "controller-revision-hash": "h",
                                         "pod-template-generation": "4"}
    assert pod["spec"]["affinity"]["podAffinity"] == {}
    assert ds_rules.target_node(pod) == "n1"
    not_ready = [t for t in pod["spec"]["tolerations"]
                 if t["key"] == "node.kubernetes.io/not-ready"]
    assert not_ready == [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                          "effect": "NoExecute"}]
    assert len(pod["spec"]["tolerations"]) == 6
    assert ds_rules.surge_and_unavailable(daemonset(), 10) == (0, 1)
    rolling = {"updateStrategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}}
    assert ds_rules.surge_and_unavailable({"spec": rolling}, 10) == (3, 0)


def test_daemonset_roll_plans() -> None:
    ds = daemonset()

    def pod(hash_: str, ready: bool = True) -> Obj:
        return {"metadata": {"name": f"p-{hash_}", "labels": {"controller-revision-hash": hash_}},
                "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}

    plan = ds_rules.roll(ds, {"a": [pod("old")], "b": [pod("old")], "c": [pod("old", False)]},
                         "new", 0.0)
    # c's old pod is unavailable: replaced at once, and it uses up the one unavailable slot
    assert [p["metadata"]["name"] for p in plan.delete] == ["p-old"]
    assert plan.delete[0]["status"]["conditions"][0]["status"] == "False"
    plan = ds_rules.roll(ds, {"a": [pod("old")], "b": [pod("new")]}, "new", 0.0)
    assert len(plan.delete) == 1 and plan.create_on == []
    surge = {**ds, "spec": {**ds["spec"], "updateStrategy": {"rollingUpdate": {
        "maxSurge": 1, "maxUnavailable": 0}}}}
    plan = ds_rules.roll(surge, {"a": [pod("old")], "b": [pod("old")]}, "new", 0.0)
    assert plan.create_on == ["a"] and plan.delete == []
    plan = ds_rules.roll(surge, {"a": [pod("old"), pod("new")], "b": [pod("old")]}, "new", 0.0)
    assert [p["metadata"]["name"] for p in plan.delete] == ["p-old"] and plan.create_on == ["b"]
    plan = ds_rules.roll(surge, {"a": [pod("old"), pod("new", False)], "b": [pod("old")]},
                         "new", 0.0)
    assert plan.delete == [] and plan.create_on == []


def test_daemonset_status_counts() -> None:
    ds = daemonset(nodeSelector={"r": "e"})
    ready = {"metadata": {"name": "p", "labels": {"pod-template-generation": "4"}},
             "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    st = ds_rules.status(ds, [node("a", {"r": "e"}), node("b", {"r": "e"}), node("c")],
                         {"a": [ready], "c": [ready]}, "h", 0.0)
    assert st == {"currentNumberScheduled": 1, "numberMisscheduled": 1,
                  "desiredNumberScheduled": 2, "numberReady": 1, "observedGeneration": 4,
                  "updatedNumberScheduled": 1, "numberAvailable": 1, "numberUnavailable": 1}


def test_adoption_decisions() -> None:
    owner = {"metadata": {"uid": "me"}, "spec": {"selector": {"matchLabels": {"app": "a"}}}}

    def pod(name: str, labels: dict[str, str], controller: str | None = None,
            deleting: bool = False) -> Obj:
        meta: Obj = {"name": name, "labels": labels}
        if controller:
            meta["ownerReferences"] = [{"uid": controller, "controller": True}]
        if deleting:
            meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        return {"metadata": meta}

    decided = adoption.claims(owner, [
        pod("mine", {"app": "a"}, "me"), pod("strayed", {"app": "b"}, "me"),
        pod("orphan", {"app": "a"}), pod("dying", {"app": "a"}, deleting=True),
        pod("theirs", {"app": "a"}, "other"), pod("unrelated", {"app": "b"})])
    assert [p["metadata"]["name"] for p in decided.owned] == ["mine"]
    assert [p["metadata"]["name"] for p in decided.release] == ["strayed"]
    assert [p["metadata"]["name"] for p in decided.adopt] == ["orphan"]
    empty = {"metadata": {"uid": "me"}, "spec": {"selector": {}}}
    assert adoption.claims(empty, [pod("orphan", {"app": "a"})]).adopt == []
    assert adoption.selects(owner, pod("x", {"app": "a"}))
    assert not adoption.selects(empty, pod("x", {"app": "a"}))


def test_availability_counts_min_ready_seconds_from_the_ready_transition() -> None:
    pod = {"status": {"conditions": [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    at = 1704067200.0  # 2024-01-01T00:00:00Z
    assert pod_state.wait_until_available(pod, 0, at) == 0.0
    assert pod_state.wait_until_available(pod, 5, at + 2) == 3.0
    assert pod_state.available(pod, 5, at + 5)
    assert not pod_state.available(pod, 5, at + 4)
    assert pod_state.wait_until_available({"status": {}}, 5, at) is None
    ds = {"metadata": {"generation": 1}, "spec": {"minReadySeconds": 5}}
    assert not ds_rules.availability(ds, at + 1)(pod)
    assert ds_rules.availability(ds, at + 6)(pod)


def test_failed_pod_backoff_doubles() -> None:
    backoff = ds_rules.FailedPodBackoff()
    assert backoff.in_backoff("k", 100.0) == 0.0
    backoff.next("k", 100.0)
    assert backoff.in_backoff("k", 100.5) == 0.5
    assert backoff.in_backoff("k", 101.0) == 0.0
    backoff.next("k", 101.0)
    assert backoff.in_backoff("k", 102.0) == 1.0  # 2 s now
    backoff.next("k", 5000.0)  # long quiet: starts over
    assert backoff.in_backoff("k", 5000.0) == 1.0


def test_claim_owner_refs_follow_the_retention_policy() -> None:
    pod = {"metadata": {"name": "web-1", "uid": "p1"}}
    set_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1"}
    pod_ref = {"apiVersion": "v1", "kind": "Pod", "name": "web-1", "uid": "p1"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "o"}

    def refs(deleted: str, scaled: str, have: list[Obj], condemned: bool) -> list[Obj] | None:
        sts = statefulset(persistentVolumeClaimRetentionPolicy={"whenDeleted": deleted,
                                                                "whenScaled": scaled})
        return sts_rules.claim_owner_refs(sts, {"metadata": {"ownerReferences": have}}, pod,
                                          condemned)

    assert refs("Retain", "Retain", [], False) is None
    assert refs("Delete", "Retain", [], False) == [set_ref]
    assert refs("Delete", "Retain", [set_ref], False) is None
    assert refs("Retain", "Retain", [other, set_ref], False) == [other]
    assert refs("Retain", "Delete", [set_ref], True) == [pod_ref]
    assert refs("Delete", "Delete", [set_ref], True) == [pod_ref]
    assert refs("Delete", "Retain", [set_ref], True) is None
    assert refs("Delete", "Delete", [pod_ref], False) == [set_ref]


def test_node_heartbeats_are_ignored() -> None:
    def with_status(ready: str, beat: str, rv: str, labels: dict[str, str] | None = None) -> Obj:
        return {"metadata": {"name": "n", "resourceVersion": rv, "labels": labels or {}},
                "status": {"conditions": [{"type": "Ready", "status": ready,
                                           "lastHeartbeatTime": beat,
                                           "lastTransitionTime": "t0"}]}}

    assert ds_rules.node_update_ignorable(with_status("True", "b1", "1"),
                                          with_status("True", "b2", "2"))
    assert not ds_rules.node_update_ignorable(with_status("True", "b1", "1"),
                                              with_status("False", "b2", "2"))
    assert not ds_rules.node_update_ignorable(with_status("True", "b1", "1"),
                                              with_status("True", "b1", "2", {"a": "b"}))
