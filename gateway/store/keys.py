"""Every Redis key Jobgate uses. This docstring is the key layout.

Every key of one queue carries the hash tag ``{<queue>}``, so each multi-key change of a queue
is one Lua script on one Redis Cluster slot. Task records live in per-queue hashes (field = task
id) rather than one key per task: a script that pops a task id can then reach its record through
``KEYS`` alone, and never has to build a key name (that breaks on Cluster).

Per queue ``q`` (all ``jg:{q}:…``):

====================  =====  ======================================================================
key                   type   content
====================  =====  ======================================================================
``queue``             HASH   ``policy`` (QueuePolicy JSON), ``created_ms``, ``rl_tokens`` and
                             ``rl_at`` (the rate limit's bucket), ``due`` (the earliest due time
                             this queue has put in the global index ``jg:due``; see
                             ``gateway.store.tasks.due``), ``notify_secret``
                             (signs completion callbacks; made at first use), and after a
                             rotation ``notify_previous`` and ``notify_previous_until`` (ms:
                             the previous secret signs beside it until then)
``seq``               STR    counter giving FIFO order among tasks of equal priority and run_at
``meta``              HASH   task id → task record JSON (state, attempt, lease, times; see
                             ``lua/prelude.lua``: fields at their default are left out); with
                             the ``compact_records`` setting, a queued record with nothing but
                             its name, run_at and sequence number is the text
                             ``<sn> <run_at> <name>`` instead (``plain_record``)
``payload``           HASH   task id → payload JSON (written once; none for a ``null`` payload)
``result``            HASH   task id → result JSON (written once, on success)
``checkpoint``        HASH   task id → last checkpoint JSON
``steps``             HASH   task id → JSON list of its durable steps ``[{name, result, attempt,
                             recorded_ms}]`` in the order recorded (``lua/step.lua``; a wait's
                             step, recorded when it ends, has ``wait`` too:
                             ``lua/wait_helpers.lua`` ``wait_mark``); deleted
                             with the record, in the script that deletes it (sweep, clean,
                             queue deletion), as are its payload, result, checkpoint, attempts,
                             log list (sweep, clean), ``dedup``, ``singleton`` and ``notify``
                             entries (``forget_task``)
``attempts``          HASH   ``<id>:<k>`` → JSON of the k-th finished attempt (k from 1, never
                             overwritten)
``ready``             ZSET   scores 0, ordered by member ``<capability>/<place><id>``: the place is
                             rank (1000 - priority), run_at ms and seq in 17 base-64 digits,
                             ``?`` to ``~`` (``lua/ready.lua``), so one capability's prefix gives
                             priority, then run_at, then FIFO. Members an older gateway wrote
                             (rank, run_at, seq as 3 + 11 + 12 hex digits; ``sq`` in the record,
                             ``sn`` now) sort first until ``lua/reshape.lua`` rewrites them.
                             Also the *held* tasks of concurrency keys at their limit, under
                             ``~<key length as 4 hex><key><place><id>``, which the claim never
                             reads (``lua/key_limits.lua``)
``key_counts``        HASH   concurrency key → its tasks in the ready set proper or running (the
                             policy's ``key_concurrency``; a key at 0 has no field)
``scheduled``         ZSET   id → due ms (delayed tasks and retries waiting for their backoff)
``running``           ZSET   id → lease expiry ms
``done:<state>``      ZSET   id → finished ms, for succeeded, failed, dead and cancelled
``endpoints``         HASH   endpoint id → endpoint JSON (url, concurrency, secrets, enabled)
``catalog``           HASH   endpoint id → JSON ``{"at": ms, "tasks": [{name, schema, ...}]}``: the
                             tasks the endpoint reported it serves (the task catalog)
``inflight``          HASH   endpoint id → pushes in flight
``health``            HASH   endpoint id → small JSON of its circuit breaker and recent latency and
                             error share (``lua/health.lua``), fed by the end of each attempt
``waiting``           ZSET   id → enqueued ms, for tasks waiting on dependencies
``dependents``        HASH   task id or ``group:<name>`` → JSON list of ``[queue, id]`` waiting
``groups``            HASH   group name → JSON ``{n: members, ok: succeeded, bad: failure}``
``outbox``            LIST   JSON notices ``[queue, id, dependency, ok, reason]`` for waiting tasks
                             of other queues, and ends of job runs ``{run: job id, id, state,
                             ...}`` for their jobs' keys (``gateway.store.run_ends``); both
                             delivered by the recoverer
``links``             ZSET   ``"<id> <queue> <dependency>"`` → ms: dependencies in other queues not
                             yet registered there (registered right after enqueue; retried)
``dedup``             HASH   dedup key → id of the first task
``dedup_exp``         ZSET   dedup key → ms when its window ends (swept)
``singleton``         HASH   singleton key → id of the task holding it while not yet running
``capabilities``      SET    capabilities tasks of the queue have required
``stalls``            ZSET   id → ms when a running task counts as stalled without a heartbeat
``log:<id>``          LIST   log lines of one task (the last ``log_lines_kept``; expires after the
                             queue's retention); the record's ``logd`` counts lines dropped
``notify``            ZSET   id → ms when its completion callback notice is due (a new notice, a
                             retry, or the end of a delivery's lease); see ``store/notices.py``
``rates``             HASH   ``n:<task name>`` or ``k:<key>`` → ``"<tokens>:<ms>"``: the token
                             buckets of the per-name and per-key rate limits (claim.lua); a
                             bucket is kept only until it would be full again
``rates_full``        ZSET   bucket field of ``rates`` → ms when it is full again: the claim
                             drops a few full ones each time it writes, and both keys expire
                             when the last bucket is full, so idle keys and queues leave nothing
``debounce:<n> <k>``  STR    ``"<id> <first ms>"``: the pending task holding debounce key ``k`` of
                             task name ``n``, and when its burst began (for ``max_wait``);
                             expires at the task's run_at (``lua/enqueue.lua``, debounce)
``throttle:<n> <k>``  STR    ``"<window start ms> <count> <last id>"``: the latest window of
                             throttle key ``k`` of task name ``n`` holding enqueues let through;
                             expires when that window ends (``lua/enqueue.lua``, throttle)
``redrive``           STR    held (``SET NX PX``) by the gateway making the queue's redrive pass,
                             for the policy's ``every``: one pass per cadence among all gateways
``waits``             HASH   ``<event name>\x1f<canonical match JSON>`` → JSON list of entries
                             ``w<id>`` (a task waiting for such an event, its record's ``wt``)
                             and ``c<id>`` (a task with such a ``cancel_on``, its record's
                             ``co``): the tasks an event of that name and those fields touches
                             (``lua/wait_helpers.lua``; ``gateway.services.waits``)
``wait_shapes``       HASH   event name → JSON object: each shape of the matches waiting on it
                             (the canonical JSON of the match's sorted field names) → its
                             entries in ``waits``, so an event's candidate fields are computed
                             from its data, not searched for
``calls``             ZSET   task id → the lease expiry (ms) of its durable HTTP call (its
                             record's ``wt`` with ``k = 'call'``): the gateway making it renews
                             it; an expired one is made again by the recoverer
                             (``lua/call.lua``, ``lua/claim_calls.lua``; ``gateway.dispatch.calls``)
====================  =====  ======================================================================

Global keys (one command each, outside any script):

- ``jg:queues`` (SET): names of registered queues.
- ``jg:due`` (ZSET): queue name → the earliest time something of the queue is due (a scheduled
  task, a lease expiry, a stall deadline, an undelivered notice, a dependency to link again, a
  dedup window or finished task to sweep). The recoverer reads it with one command; written by
  plain commands and single-key scripts (``lower_due.lua``, ``settle_due.lua``) only.
- ``jg:ix:<bucket>`` (HASH): the id index, task id → its queue, so ``/v1/tasks/{id}`` needs no
  queue name. ``<bucket>`` is the id's low 12 bits (4,096 buckets, :func:`task_index`; the
  gateway's ids count up there, so they spread evenly), so a bucket stays a listpack (about
  40 bytes an entry) up to about 2,000,000 tasks (Redis's default
  ``hash-max-listpack-entries`` of 512 a bucket), short enough to write cheaply up to about
  500,000, and the buckets spread over a cluster's slots. Written in
  the enqueue's round trip (a command of its own: it lies outside the queue's slot); the
  sweep, ``clean`` and queue deletion drop a task's field right after its task, in a second
  step. A gateway that dies between the two leaves a field without a task: the index repair
  (:mod:`gateway.store.index`, hourly) drops a field whose task it finds gone in two passes in
  a row, remembering the first pass's finds in ``jg:ix:suspects`` (HASH, id → queue); one
  gateway a pass, by ``jg:ix:turn`` (STR, ``SET NX PX``).
- ``jg:idx:<id>`` (STR): the id index as earlier versions wrote it (a key per task, expiring
  ``INDEX_TTL_MS`` after the task's ``run_at``). Still read when a bucket has no field for an
  id, and deleted with its task, until the last one has gone (see :func:`legacy_task_index`).
- ``jg:waits:<event name>`` (SET): the queues whose ``waits`` index may hold entries for that
  event name (a wait, a ``cancel_on``). Added before the script that indexes them, and again
  after a wait's; a member whose queue holds none any more costs an event one HGET and is
  otherwise harmless (never removed: see ``gateway.services.waits``).
- ``jg:notify`` (ZSET): queue → ms when its earliest completion callback notice is due, so the
  delivery loop finds queues with work in one command. Written right after the script that
  recorded a notice, and rebuilt from every queue's ``notify`` by a slow rescan.
- ``jg:idem:<sha256>`` (STR): one Idempotency-Key of one API key, method and path (the hash is
  of those four): its request in progress (expires after a minute), then the answer to replay
  (expires after ``idempotency_ttl``). See ``gateway.store.idempotency``.

Per job ``j`` (all ``jg:{job:<j>}:…``, one hash tag per job; see ``gateway.store.jobs``):

====================  =====  ======================================================================
key                   type   content
====================  =====  ======================================================================
``job``               HASH   ``def`` (definition JSON), ``next`` (next fire ms), ``held`` (fire ms
                             of a firing held behind a running run), ``last`` (newest run id),
                             ``count`` (runs made), ``skipped``, ``due`` (when the firing loop
                             must look at the job: next, held re-check or the oldest pending
                             run's resume). Written by older versions: ``pending``
                             (``"<run id> <ms>"``), moved into ``pending`` below by the next
                             script that touches the job
``pending``           ZSET   run id → ms it was begun: runs whose firing (or run now) is claimed
                             and whose task is not known to be enqueued yet; each is resumed
                             (enqueued from its record) until its task exists
``runs``              ZSET   run id → created ms
``run``               HASH   run id → run record JSON (job, title, note, by, queue, args, fire
                             time; ``status`` and ``message`` when its task could not be made,
                             or as older versions kept the end), and ``<run id>:end`` → how its
                             task ended (``gateway.store.run_ends``)
====================  =====  ======================================================================

Global job keys (one command each, outside any script):

- ``jg:jobs`` (ZSET): job id → created ms, the listing order.
- ``jg:jobs:due`` (ZSET): job id → when the firing loop must look at it (the job's ``due``). A
  hint: the job hash is the truth, and the hint is kept never later than it
  (``gateway.store.jobs.JobStore.hint``).

Events and triggers (global keys, one command each; see ``gateway.store.events``):

- ``jg:ev:<id>`` (STR): an event's record, JSON ``{name, data, ms, state, touched}``: ``ms``
  when it was accepted, ``state`` ``pending`` until every consumer (triggers, waits,
  ``cancel_on``) has acted on it, then ``done`` with ``touched`` (what it did to which tasks).
  Written with ``SET NX``: the first gateway to write an id owns its ``ms``.
- ``jg:events`` (ZSET): event id → accepted ms: the listing, and the retention sweep's order.
- ``jg:events:n:<name>`` (ZSET): event id → accepted ms, the events of one name (the listing by
  name, and the recent events a wait looks back on).
- ``jg:events:pending`` (ZSET): event id → ms when the recoverer may finish it: written before
  the record, with a lease ahead of now; removed once the record is ``done``. The recoverer
  claims due entries (``lua/claim_events.lua`` moves their score a lease ahead) and finishes
  them; an entry whose record does not exist (its gateway stopped before writing it) is
  dropped.
- ``jg:triggers`` (HASH): trigger id → its definition JSON.

Admin UI sessions and sign-in (see ``gateway.store.sessions``):

- ``jg:sessions:<fingerprint>`` (ZSET): the open sessions of one API key, session id → expiry ms
  (Redis time). ``<fingerprint>`` is the HMAC fingerprint the session cookie carries, never
  the key. A session is valid only while its id is here: signing out removes it, ending every
  session of a key deletes the whole set. It expires with its newest session.
- ``jg:{signin}:nonce:<sha256>`` (STR): a sign-in form's nonce (by its hash) that an attempt
  has spent: a form can be sent once. Kept as long as the form's cookie lives.
- ``jg:{signin}:addr:<address>`` (HASH): sign-in attempts of one client address (an IPv6
  address by its /64): ``n`` counted, ``until`` (ms) no attempt is taken before. Forgotten a
  window after its last attempt, deleted by a sign-in that succeeds. Both ``{signin}`` keys
  share a hash tag, so one script changes them (``lua/sign_in_attempt.lua``).

Pub/sub channels: ``jg:wake`` (message: a queue name that has new ready work, then, from the
enqueue script, a space and how many tasks became ready),
``jg:done:<id>`` (published when a task reaches a final state) and ``jg:due:wake`` (message: a
due time in ms that just became the earliest of ``jg:due``, so sleeping recoverers wake),
``jg:notify:wake`` and ``jg:jobs:wake`` (a due time in ms of a completion callback or a job
just noted in ``jg:notify`` or ``jg:jobs:due``: wakes the delivery and firing loops).
"""

from __future__ import annotations

from dataclasses import dataclass

# A queue's keys are made in gateway/store/queue_keys.py (the first table above); named here too.
from gateway.store.queue_keys import FINISHED_STATES as FINISHED_STATES
from gateway.store.queue_keys import QueueKeys as QueueKeys
from gateway.store.queue_keys import queue_hash as queue_hash
from gateway.store.queue_keys import queue_of as queue_of
from gateway.store.queue_keys import state_index as state_index

QUEUES = "jg:queues"
DUE = "jg:due"
NOTIFY_INDEX = "jg:notify"
WAKE_CHANNEL = "jg:wake"
DUE_CHANNEL = "jg:due:wake"
NOTICE_CHANNEL = "jg:notify:wake"
JOBS_CHANNEL = "jg:jobs:wake"
CHANGED_CHANNEL = "jg:changed"  # a queue's policy or endpoints changed (its name)
DONE_CHANNEL_PREFIX = "jg:done:"


JOBS = "jg:jobs"
JOBS_DUE = "jg:jobs:due"

EVENTS = "jg:events"
EVENTS_PENDING = "jg:events:pending"
TRIGGERS = "jg:triggers"


def event(event_id: str) -> str:
    """An event's record."""
    return f"jg:ev:{event_id}"


def events_named(name: str) -> str:
    """The events of one name, id → accepted ms."""
    return f"jg:events:n:{name}"


@dataclass(frozen=True, slots=True)
class JobKeys:
    """The keys of one job, all under its hash tag."""

    job: str
    pending: str
    runs: str
    run: str

    @classmethod
    def of(cls, job_id: str) -> JobKeys:
        p = f"jg:{{job:{job_id}}}:"
        return cls(job=p + "job", pending=p + "pending", runs=p + "runs", run=p + "run")

    def all(self) -> tuple[str, ...]:
        return (self.job, self.pending, self.runs, self.run)


def event_waits(event: str) -> str:
    """The queues whose ``waits`` index may hold entries for events named ``event``."""
    return f"jg:waits:{event}"


def sessions(fingerprint: str) -> str:
    """The open admin UI sessions of the API key with this fingerprint."""
    return f"jg:sessions:{fingerprint}"


def sign_in_nonce(digest: str) -> str:
    return f"jg:{{signin}}:nonce:{digest}"


def sign_in_address(address: str) -> str:
    return f"jg:{{signin}}:addr:{address}"


_QUARTER = {c: str(i & 3) for i, c in enumerate("0123456789ABCDEFGHJKMNPQRSTVWXYZ")}


def task_index(task_id: str) -> str:
    """The id index's bucket that holds ``task_id``'s field: the id's low 12 bits, as the low
    2 bits of its third character from the end (``0``-``3``) and its last two characters."""
    return f"jg:ix:{_QUARTER.get(task_id[-3:-2], '0')}{task_id[-2:]}"


INDEX_SUSPECTS = "jg:ix:suspects"
INDEX_TURN = "jg:ix:turn"


def legacy_task_index(task_id: str) -> str:
    """The key per task that older versions wrote as the id index.

    Read when the bucket has no field for the id, and deleted with the task. Such keys expire
    by themselves at the latest ``INDEX_TTL_MS`` (two years) after their task's ``run_at``, and
    are deleted sooner with their task by the sweep: once no ``jg:idx:*`` key is left on a
    deployment (two years after upgrading at the latest; sooner when every task enqueued
    before the upgrade has been swept), this fallback and this function can go."""
    return f"jg:idx:{task_id}"


INDEX_TTL_MS = 730 * 86_400_000
"""How long older versions kept a task's ``jg:idx:<id>`` key after the task's ``run_at``: two
years, the longest retention a policy allows (365 days) plus a year for the task's own run."""


def idempotency(digest: str) -> str:
    return f"jg:idem:{digest}"


def done_channel(task_id: str) -> str:
    return f"{DONE_CHANNEL_PREFIX}{task_id}"
