"""explain folds quotas as the controller does (issue 33.6): the same last valid definition of
a refused quota, the same copy of a duplicated name, one statement for a refused quota.

Driven on the in-memory API of test_quota_conditions: the controller writes its status there,
and explain (ClusterView.from_objects, what `koordqueue explain` builds from its listings)
and a restarted controller read the same objects. Before issue 33.6 explain said QueueNotFound
for a quota the controller still admitted against, and a restarted controller dropped it too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.simulation.explain import ClusterView, Reason, explain
from tests.unit.kube.test_quota_conditions import T1, T2, Plane, quota


def view_of(plane: Plane) -> ClusterView:
    """What `koordqueue explain` folds: the objects as listed from the API server."""
    api = plane.api
    return ClusterView.from_objects(
        api.list_objects(ELASTIC_QUOTA), api.list_objects(QUEUE, "koord-queue"),
        api.list_objects(QUEUE_UNIT), now=1e12,
    )


def unit(plane: Plane, name: str, quota_name: str, cpu: str) -> str:
    obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
           "metadata": {"name": name, "namespace": "ns", "labels": {QUOTA_NAME_LABEL: quota_name},
                        "creationTimestamp": T1},
           "spec": {"resource": {"cpu": cpu}}}
    stored = plane.api.create(QUEUE_UNIT, obj, "ns")
    plane.c.on_unit("ADDED", stored)
    plane.c.admission_round()
    return str(stored["metadata"]["uid"])


def test_a_refused_edit_is_explained_against_the_last_valid_max_as_the_controller_admits() -> None:
    p = Plane()
    p.put(quota("a", cpu="4"))
    unit(p, "first", "a", "3")
    bad = quota("a", cpu="4")
    bad["spec"]["min"] = {"cpu": "9"}  # min above max: refused, the webhook being down
    p.put(bad)
    assert p.stored("a")["status"]["lastValid"] == {"labels": {}, "spec": {"max": {"cpu": "4"}}}
    obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
           "metadata": {"name": "second", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "a"},
                        "creationTimestamp": T2},
           "spec": {"resource": {"cpu": "2"}}}
    stored = p.api.create(QUEUE_UNIT, obj, "ns")
    p.c.on_unit("ADDED", stored)
    round_ = p.c.admission_round()  # the running controller decides the second unit
    assert [type(o).__name__ for o in round_.outcomes if o.unit.name == "second"] == ["Reject"]

    ex = explain(view_of(p), "ns/second")
    assert ex is not None and ex.reason is Reason.QUOTA_EXCEEDED  # was QueueNotFound
    assert ex.chain[0].checks[0].limit == Resources.of(cpu="4").get_nanos("cpu")
    assert any("last valid definition stays in force" in n for n in ex.notes)
    assert ex.quota_refused and ex.quota_refused[0]["kept"] is True

    restarted = Plane(p.api)  # a new leader reads the same objects, status included
    restarted.resync()
    assert restarted.c.engine.tree.limit("a") == Resources.of(cpu="4")
    assert restarted.condition("a", "Valid")["message"].endswith("stays in force")

    p.put(quota("a", cpu="6"))  # fixed: the status keeps nothing any more (a merge patch's
    assert p.stored("a")["status"]["lastValid"] is None  # null, which the API server drops)


def test_the_copy_in_force_of_a_duplicated_name_is_the_controllers() -> None:
    p = Plane()
    p.put(quota("shared", "team-b", cpu="1", created=T2))
    p.put(quota("shared", "team-a", cpu="8", created=T1))  # older: in force
    assert p.c.engine.tree.get("shared").namespace == "team-a"  # type: ignore[union-attr]
    unit(p, "u", "shared", "4")
    ex = explain(view_of(p), "ns/u")
    assert ex is not None and ex.quota_namespace == "team-a"
    assert ex.reason is Reason.ADMITTED
    assert any("team-a (in force: the oldest) and team-b (ignored" in n for n in ex.notes)


def test_a_refused_quota_without_an_earlier_definition_is_said_once() -> None:
    p = Plane()
    bad = quota("solo", cpu="2")
    bad["spec"]["min"] = {"memory": "1Gi"}  # min without max
    p.put(bad)
    unit(p, "u", "solo", "1")
    ex = explain(view_of(p), "ns/u")
    assert ex is not None and ex.reason is Reason.QUEUE_NOT_FOUND
    assert ex.summary.startswith("ElasticQuota default/solo exists, but the controller refuses")
    assert "no ElasticQuota" not in ex.summary
    assert not any("exists but is invalid" in n for n in ex.notes)


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["default", "other"]),
        st.sampled_from(["1", "4", "-1", "zz"]),
        st.sampled_from([None, "a", "b", "c"]),
        st.sampled_from([None, "2", "9"]),
        st.sampled_from([T1, T2]),
    ),
    min_size=1, max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EDITS)
@example(  # a refused cycle edit (b -> a while a -> b): a fresh fold accepted it and looped
    [("a", "default", "1", None, None, T1), ("a", "default", "1", "b", None, T1),
     ("b", "default", "1", None, None, T1), ("b", "default", "1", "a", None, T1)]
)
@example(  # the same with b listed before a, which a fresh fold meets first
    [("b", "default", "1", None, None, T1), ("a", "default", "1", "b", None, T1),
     ("b", "default", "1", "a", None, T1)]
)
@example(  # a -> c closes no cycle once a is back at the root: the running controller kept
    # c's refused edit until c was edited again, while a fresh fold took it
    [("a", "default", "1", None, None, T1), ("a", "default", "1", "c", None, T1),
     ("c", "default", "1", None, None, T1), ("c", "default", "1", "a", None, T1),
     ("a", "default", "1", None, None, T1)]
)
@example(  # a younger copy of c in another namespace, met first by a fresh fold, hid the
    # cycle c's refused edit closes (a -> c -> a): the fresh fold took it
    [("a", "default", "1", None, None, T1), ("a", "default", "1", "c", None, T1),
     ("c", "default", "1", None, None, T1), ("c", "default", "1", "a", None, T1),
     ("c", "other", "1", None, None, T1)]
)
@example(  # c refused for its own fields keeps c -> b, which makes b's edit (b -> c) a cycle;
    # a fresh fold that met b before c took it
    [("a", "default", "1", None, None, T1), ("b", "other", "1", None, None, T1),
     ("c", "other", "1", "b", None, T1), ("b", "other", "1", "c", None, T1),
     ("c", "other", "1", None, "2", T1)]
)
def test_explain_and_a_restarted_controller_fold_what_the_running_one_admits_from(
    edits: list[tuple[str, str, str, str | None, str | None, str]],
) -> None:
    """Any sequence of edits, valid or refused (bad quantities, min above max, a cycle
    through a parent edit), duplicated names: the definition in force of every name (its
    namespace, max and parent) is the same for the running controller, explain and a new
    leader."""
    p = Plane()
    created: dict[tuple[str, str], str] = {}
    for name, namespace, cpu, parent, min_cpu, when in edits:
        obj = quota(name, namespace, cpu=cpu, parent=parent if parent != name else None,
                    created=created.setdefault((namespace, name), when))
        if min_cpu is not None:
            obj["spec"]["min"] = {"cpu": min_cpu}
        p.put(obj)

    def in_force(tree: Any) -> dict[str, Any]:
        return {q.name: (q.namespace, q.max, q.parent) for q in tree}

    running = in_force(p.c.engine.tree)
    assert in_force(view_of(p).engine.tree) == running
    restarted = Plane(p.api)
    restarted.resync()
    assert in_force(restarted.c.engine.tree) == running
