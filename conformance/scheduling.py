"""How a conformance run is spread over pytest-xdist workers (`plumbline --jobs N`).

The run first judges, one at a time on one worker while the others wait, the properties whose
judgement depends on the target being otherwise idle (`@prop(alone=True)`: pings during a long
silence, a 33 MB body); then every other property on whichever worker is free. Properties that
share state within one process go to one worker, in catalogue order: the BATCH properties share
one finished batch and one bounded wait (conformance/generating/batches.py).

Before anything is sent, the controller asks what every property builds on, once and alone:
the determinism probe, what two overlapping streams show (conformance/concurrency.py) and the
optional features the selected properties require (`prepare`); the workers read that from a
file instead of asking again, so the verdicts are the same whatever the number of workers. A
target that cuts or serialises concurrent work is judged one property at a time: every
property then runs in the first phase, in catalogue order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from conformance.catalogue import REGISTRY, Property

__all__ = ["SHARED_STATE", "PhasedScheduling", "property_of_nodeid"]

# Areas whose properties share state inside one process, and why.
SHARED_STATE = {
    "BATCH": "the run's shared batch (made once per process) and its one bounded wait",
}


def property_of_nodeid(nodeid: str) -> Property | None:
    """`properties/test_messages.py::test_msg_001_message_shape` -> MSG-001."""
    name = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
    return next((p for p in REGISTRY.values() if p.test_name == name), None)


class PhasedScheduling:
    """An xdist scheduler (the `Scheduling` protocol of xdist.scheduler): the properties that
    run alone first, on one worker, then units (a property, or an area that shares state) to
    whichever worker has fewer than two pending."""

    def __init__(self, config: Any, log: Any, prepare: Callable[[list[Property]], bool]) -> None:
        from xdist.workermanage import parse_tx_spec_config

        self.numnodes = len(parse_tx_spec_config(config))
        self.config = config
        self.log = log
        self.prepare = prepare
        self.node2collection: dict[Any, list[str]] = {}
        self.node2pending: dict[Any, list[int]] = {}
        self.collection: list[str] | None = None
        self.alone: list[int] = []  # not sent yet
        self.alone_left: set[int] = set()  # not finished yet
        self.units: deque[list[int]] = deque()

    # ---- the protocol's state

    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.alone or self.units:
            return False
        return all(len(pending) < 2 for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.alone or self.units or any(self.node2pending.values()))

    def add_node(self, node: Any) -> None:
        self.node2pending[node] = []

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.node2collection[node] = list(collection)

    # ---- events

    def schedule(self) -> None:
        if self.collection is None:
            collections = list(self.node2collection.values())
            if any(c != collections[0] for c in collections[1:]):
                self.log("the workers collected different properties: nothing is run")
                for node in self.nodes:
                    node.shutdown()
                return
            self.collection = collections[0]
            self._plan(self.collection)
        self._assign()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self.alone_left.discard(item_index)
        self._assign()

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self.units.appendleft([self.collection.index(item)])
        self._assign()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError  # only work stealing asks for this

    def remove_node(self, node: Any) -> str | None:
        """A worker gone (crashed, or done): what it held goes back; the item it was running
        is reported as the crash."""
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed = pending.pop(0)
        self.alone_left.discard(crashed)
        if pending:
            self.units.appendleft(pending)
        self._assign()
        return self.collection[crashed]

    # ---- the plan

    def _plan(self, collection: list[str]) -> None:
        props = [property_of_nodeid(nodeid) for nodeid in collection]
        serial = self.prepare([p for p in props if p is not None])
        groups: dict[str, list[int]] = {}
        for index, prop in enumerate(props):
            if serial or (prop is not None and prop.alone):
                self.alone.append(index)
            elif prop is not None and prop.area in SHARED_STATE:
                if prop.area not in groups:
                    groups[prop.area] = []
                    self.units.append(groups[prop.area])  # the group's place: its first property
                groups[prop.area].append(index)
            else:
                self.units.append([index])
        self.alone_left = set(self.alone)

    def _assign(self) -> None:
        if not self.nodes or self.collection is None:
            return
        if self.alone:
            # All of them to the first worker, in order, with the next unit behind them so that
            # the last one runs (a worker runs an item once it knows the next); nothing to the
            # others until they have all finished.
            first = self.nodes[0]
            self._send(first, self.alone)
            self.alone = []
            if self.units:
                self._send(first, self.units.popleft())
        if self.alone_left:
            if not self.units:  # nothing else to run: let the first worker finish them, then stop
                for node in self.nodes:
                    if not node.shutting_down:
                        node.shutdown()
            return
        for node in self.nodes:
            if node.shutting_down:
                continue
            while len(self.node2pending[node]) < 2 and self.units:
                self._send(node, self.units.popleft())
            if not self.units:
                node.shutdown()

    def _send(self, node: Any, indices: list[int]) -> None:
        self.node2pending[node].extend(indices)
        node.send_runtest_some(indices)
