"""Horovod's elastic training API, shared by the framework front ends
(horovod.torch.elastic, horovod.tensorflow.elastic).

A training function decorated with ``hvd.elastic.run`` takes a ``State``
as its first argument. The state keeps the last committed copy of what
it tracks (model, optimizer, plain attributes such as ``epoch``).
When a collective fails with ``HorovodInternalError`` the state goes back
to that copy; when the job's hosts change, ``commit()`` (or
``check_host_updates()``) raises ``HostsUpdatedInterrupt`` on every rank
at the same step and the state is kept. Either way the rank leaves the
job (``shutdown``), joins it again (``init``), runs the reset callbacks,
takes rank 0's state (``sync``) and calls the function again.

Under ``horovodrun --host-discovery-script`` (or ``--min-np``) the
launcher keeps the job going when ranks fail or hosts change: it gives
each process its new rank when it joins again, starts processes for new
slots, and sends notices of host changes, which
``pending_host_updates()`` reads from libhvd.
"""

import enum
import functools
import queue

from horovod.common.exceptions import (HorovodInternalError,
                                       HostsUpdatedInterrupt)

__all__ = ["HostUpdateResult", "ObjectState", "State", "notification_manager",
           "pending_host_updates", "run_fn"]


class HostUpdateResult(enum.IntFlag):
    """What changed in a notice of host changes (Horovod's values):
    ``removed`` and ``added`` combine into ``mixed``."""
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


_host_update_source = None


def pending_host_updates():
    """The notices of host changes this rank has received since the last
    call, as a list of ``(timestamp, HostUpdateResult)`` pairs.

    horovodrun's host discovery runs in the launcher, which sends its
    notices to every rank of an elastic job; libhvd keeps them until
    they are read here (``hvd_host_updates``). The list is empty in a
    fixed job. An internal source installed with
    ``_set_host_update_source`` replaces libhvd's (the tests use one to
    drive the ``HostsUpdatedInterrupt`` path). Only rank 0's notices
    count: ``State.check_host_updates`` broadcasts rank 0's view to
    every rank.
    """
    if _host_update_source is not None:
        return list(_host_update_source())
    from horovod.common import libhvd
    timestamp, changes = libhvd.host_updates()
    return [(timestamp, HostUpdateResult(changes))] if changes else []


def _set_host_update_source(source):
    """Installs source, a function of no arguments returning a list of
    ``(timestamp, HostUpdateResult)`` pairs, as what
    ``pending_host_updates`` reads; None removes it. Returns the
    previous source. Internal: horovodrun's notices will arrive here."""
    global _host_update_source
    previous, _host_update_source = _host_update_source, source
    return previous


class WorkerNotificationManager:
    """Hands notices of host changes to the states that listen (those
    of a running ``hvd.elastic.run`` function), as Horovod's worker-side
    manager of the same name does. There is no thread: notices are
    collected from ``pending_host_updates()`` when a state checks for
    them, or pushed with ``handle_hosts_updated``."""

    def __init__(self):
        self._listeners = []

    def init(self):
        """Nothing to start: notices are collected when checked."""

    def register_listener(self, listener):
        """Sends later notices to listener (a State)."""
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener):
        """Stops sending notices to listener."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def handle_hosts_updated(self, timestamp, update_res):
        """Passes one notice to every listener."""
        for listener in list(self._listeners):
            listener.on_hosts_updated(timestamp, update_res)

    def poll(self):
        """Passes the notices pending_host_updates() returns to every
        listener."""
        for timestamp, update_res in pending_host_updates():
            self.handle_hosts_updated(timestamp, update_res)


notification_manager = WorkerNotificationManager()


class State:
    """What an elastic job keeps across resets: saved by ``commit()``,
    put back by ``restore()``, taken from rank 0 by ``sync()``.

    Subclasses define ``save``, ``restore`` and ``sync`` (and may define
    ``reset``).

    Arguments:
        bcast_object: a function of one object that returns rank 0's
            (the framework's ``broadcast_object``).
        get_rank: a function returning this process's rank.
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Adds callbacks (a list of functions of no arguments) to call
        after each reset, once the rank has joined the job again, for
        instance to scale the learning rate by the new ``hvd.size()``."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Called by ``hvd.elastic.run`` after a reset: drops the notices
        received so far, calls ``reset()``, then the reset callbacks."""
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Records a notice of host changes (a HostUpdateResult at
        timestamp) for the next ``check_host_updates()``."""
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """Saves the state (``save()``), then checks for host changes
        (``check_host_updates()``), which may raise
        ``HostsUpdatedInterrupt``.

        Every rank must commit at the same points, since the check is a
        collective. A commit copies the state (from the GPU too): commit
        less often than every batch where steps are cheap to redo.
        """
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises ``HostsUpdatedInterrupt`` on every rank when rank 0 has
        received a notice of host changes newer than the last one seen.

        A collective: rank 0's view is broadcast, so that every rank
        raises at the same step. The exception's ``skip_sync`` is true
        when hosts were only removed (the survivors' state is already
        the same everywhere).
        """
        notification_manager.poll()
        prev_timestamp = last_timestamp = self._last_updated_timestamp
        update = HostUpdateResult.no_update
        while True:
            try:
                timestamp, res = self._host_messages.get_nowait()
            except queue.Empty:
                break
            if timestamp > last_timestamp:
                last_timestamp = timestamp
                update |= res
        prev_timestamp, last_timestamp, update = self._bcast_object(
            (prev_timestamp, last_timestamp, int(update)))
        self._last_updated_timestamp = last_timestamp
        if last_timestamp > prev_timestamp:
            raise HostsUpdatedInterrupt(update == HostUpdateResult.removed)

    def save(self):
        """Keeps the current values as the committed ones."""
        raise NotImplementedError()

    def restore(self):
        """Puts back the committed values, undoing what came after."""
        raise NotImplementedError()

    def sync(self):
        """Gives every rank rank 0's values (a collective)."""
        raise NotImplementedError()

    def reset(self):
        """Called after a reset, before ``sync()``: for what depends on
        the job's size or ranks."""


class ObjectState(State):
    """State of plain Python objects, given as keyword arguments and
    exposed as attributes (``state.epoch``).

    ``save()`` keeps a reference to each attribute's value, as Horovod's
    does: assign new values (``state.seen = state.seen + [x]``) rather
    than changing a kept object in place, or ``restore()`` cannot undo
    the change.

    Arguments:
        bcast_object: a function of one object that returns rank 0's.
        get_rank: a function returning this process's rank.
        kwargs: the attributes to keep, with their first values.
    """

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {k: getattr(self, k) for k in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for k, v in self._saved_state.items():
            setattr(self, k, v)


def _sync_needed(skip_sync):
    """Whether any rank must take rank 0's state: survivors of a removal
    may skip the sync, but processes that joined since (they waited for
    hosts with them, Horovod #3494) must sync, and a sync is a collective
    of every rank. Asked of every rank, each round."""
    from horovod.common import libhvd
    return libhvd.any_rank(not skip_sync, "elastic.sync_needed")


def run_fn(func, reset):
    """Horovod's elastic loop around func(state, *args, **kwargs), for
    the front ends' ``hvd.elastic.run``; reset is the function that
    leaves and joins the job again (``shutdown(); init()``).

    Each round: ``state.sync()`` (skipped after a
    ``HostsUpdatedInterrupt`` whose ``skip_sync`` is true, unless a rank
    that must sync joined meanwhile), then func.
    Its return value is returned. On ``HorovodInternalError`` the state
    is restored to its last commit; on ``HostsUpdatedInterrupt`` it is
    kept. Then ``reset()``, ``state.on_reset()`` and the next round.
    Other exceptions propagate.
    """

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification_manager.init()
        notification_manager.register_listener(state)
        skip_sync = False
        try:
            while True:
                try:
                    if _sync_needed(skip_sync):
                        state.sync()
                    return func(state, *args, **kwargs)
                except HorovodInternalError:
                    state.restore()
                    skip_sync = False
                except HostsUpdatedInterrupt as e:
                    skip_sync = e.skip_sync
                reset()
                state.on_reset()
        finally:
            notification_manager.remove_listener(state)
    return wrapper
