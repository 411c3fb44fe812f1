"""The keys made alone for reads over many queues are the keys QueueKeys names."""

from __future__ import annotations

from gateway.store import keys
from gateway.store.keys import FINISHED_STATES, QueueKeys
from sdk.wire import TaskState


def test_state_index_and_queue_hash_are_the_queue_keys() -> None:
    for queue in ("mail", "tenant:42", "a{b}"):
        k = QueueKeys.of(queue)
        assert keys.queue_hash(queue) == k.policy
        assert keys.state_index(queue, TaskState.SCHEDULED) == k.scheduled
        assert keys.state_index(queue, TaskState.WAITING) == k.waiting
        assert keys.state_index(queue, TaskState.QUEUED) == k.ready
        assert keys.state_index(queue, TaskState.RUNNING) == k.running
        for state in FINISHED_STATES:
            assert keys.state_index(queue, state) == k.finished(state)
