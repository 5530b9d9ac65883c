"""The churn plan: seeded and repeatable, honours the bound and the mix, paces by the rate."""

from __future__ import annotations

import pytest

from kubewire.cluster.churn import KINDS, OPS, ChurnOptions, ChurnPlan, Op, parse_weights


def _run(plan: ChurnPlan, n: int, fail_every: int = 0) -> list[Op]:
    ops = []
    for i in range(n):
        op = plan.next()
        if op is None:
            continue
        ops.append(op)
        plan.settle(op, ok=not (fail_every and i % fail_every == 0))
    return ops


def test_same_seed_same_plan_and_another_seed_differs() -> None:
    a = _run(ChurnPlan(ChurnOptions(seed=7)), 200)
    b = _run(ChurnPlan(ChurnOptions(seed=7)), 200)
    c = _run(ChurnPlan(ChurnOptions(seed=8)), 200)
    assert a == b
    assert a != c


def test_bound_holds_with_creates_in_flight() -> None:
    plan = ChurnPlan(ChurnOptions(max_objects=5, op_weights={"create": 1.0}))
    pending = [plan.next() for _ in range(5)]
    assert all(op is not None and op.op == "create" for op in pending)
    assert plan.next() is None  # five held (in flight), nothing else is allowed
    for op in pending:
        assert op is not None
        plan.settle(op, ok=True)
    assert plan.held() == 5 and plan.next() is None


def test_mix_covers_every_op_and_kind_and_stays_bounded() -> None:
    plan = ChurnPlan(ChurnOptions(max_objects=20, namespaces=("a", "b"), seed=1))
    ops = _run(plan, 2000, fail_every=13)
    assert plan.held() <= 20
    seen = {(o.op, o.kind) for o in ops}
    assert {k for _, k in seen} == set(KINDS)
    assert {o for o, _ in seen} == set(OPS)
    assert all(k == "Deployment" for o, k in seen if o == "scale")
    assert {o.namespace for o in ops} == {"a", "b"}
    rollouts = [o for o in ops if o.op == "update" and o.kind == "Deployment"]
    assert rollouts and "image" in str(rollouts[0].body)


def test_a_failed_create_is_not_held_and_gone_objects_are_forgotten() -> None:
    plan = ChurnPlan(ChurnOptions(op_weights={"create": 1.0, "update": 1.0}, seed=3))
    op = plan.next()
    assert op is not None and op.op == "create"
    plan.settle(op, ok=False)
    assert plan.held() == 0
    op = plan.next()
    assert op is not None and op.op == "create"
    plan.settle(op, ok=True)
    plan2 = ChurnPlan(ChurnOptions(op_weights={"update": 1.0}, seed=3))
    plan2.live["ConfigMap"].append(("default", "x"))
    upd = plan2.next()
    assert upd is not None and upd.op == "update"
    assert plan2.next() is None  # the one object is busy until its answer
    plan2.settle(upd, ok=False, gone=True)
    assert plan2.held() == 0


def test_pace_and_end() -> None:
    plan = ChurnPlan(ChurnOptions(rate=4, duration=2.0, max_ops=3))
    assert plan.due(0) == 0 and plan.due(8) == 2.0
    assert plan.done(2.0) and not plan.done(1.0)
    _run(plan, 3)
    assert plan.done(0.0)


def test_parse_weights() -> None:
    assert parse_weights("Create=3, delete=1", OPS) == {
        "create": 3.0, "scale": 0.0, "update": 0.0, "delete": 1.0}
    assert parse_weights("pod=1", KINDS)["Pod"] == 1.0
    for bad in ("frob=1", "create", "create=x", "create=0", "create=-1", "create=nan"):
        with pytest.raises(ValueError):
            parse_weights(bad, OPS)
