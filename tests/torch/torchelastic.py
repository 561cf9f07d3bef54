"""Run under horovodrun: horovod.torch.elastic (hvd.elastic.run,
TorchState, ElasticSampler) with real torch, and the restore-and-reset
loop of horovod.common.elastic.

    torchelastic.py np2 STATEFILE     (-np 2) checks a, b, c below, and
                                      leaves a half-processed epoch's
                                      sampler state in STATEFILE
    torchelastic.py resized STATEFILE (-np 3) finishes that epoch

a: every rank raises HorovodInternalError at the same step once (as when
   a peer is lost): the TorchState goes back to its last commit (model,
   optimizer, plain attributes), the ranks reset (shutdown, init: counted
   by a reset callback), training goes on and ends with the same weights
   on every rank, and with the weights of a run without the failure.
b: ElasticSampler across a reset in the middle of an epoch: the batches
   after the last commit are undone, and the epoch processes every sample
   exactly once.
c: HostsUpdatedInterrupt from the internal notice hook, which reports an
   update on rank 0 only: every rank raises at the same step, the state
   is kept (never restored), synchronized after hosts were added and not
   after they were only removed.

Each rank prints "torchelastic: rank R: ..." lines; the lines that must
agree between ranks start with "same:". Any failed check raises.
"""

import copy
import json
import sys

import torch

import horovod.torch as hvd
from horovod.common import elastic as common_elastic

torch.set_num_threads(1)
hvd.init()


def say(*words):
    print("torchelastic: rank %d:" % hvd.rank(), *words, flush=True)


def weights(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def same_on_every_rank(t):
    every = hvd.allgather_object(t.tolist(), name="same")
    return all(v == every[0] for v in every)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# a: restore after HorovodInternalError, reset, same weights.

STEPS, COMMIT_EVERY = 8, 2


def train(fail_at):
    torch.manual_seed(10 + hvd.rank())  # unequal until the first sync
    model = torch.nn.Linear(4, 1)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, epoch=0, batch=0)
    committed = {}
    resets = []

    def on_reset():
        # After restore() and the reset, before the next sync.
        check(hvd.is_initialized(), "initialized again after the reset")
        check(torch.equal(weights(model), committed["w"]),
              "model restored to the commit")
        check(str(opt.state_dict()["state"]) == committed["opt"],
              "optimizer restored to the commit")
        resets.append(state.batch)

    state.register_reset_callbacks([on_reset])
    failed = []

    @hvd.elastic.run
    def loop(state):
        while state.batch < STEPS:
            if state.batch == fail_at and not failed:
                failed.append(state.batch)
                raise hvd.HorovodInternalError("simulated lost peer")
            g = torch.Generator().manual_seed(100 * state.batch + hvd.rank())
            x = torch.randn(8, 4, generator=g)
            opt.zero_grad()
            loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
            loss.backward()
            opt.step()
            state.batch += 1
            if state.batch % COMMIT_EVERY == 0:
                state.commit()
                committed["w"] = weights(model).clone()
                committed["opt"] = str(opt.state_dict()["state"])
        return weights(model)

    return loop(state), resets


def check_a():
    w_failed, resets = train(fail_at=5)
    check(resets == [4], "one reset, state back at batch 4: %s" % resets)
    check(same_on_every_rank(w_failed), "same weights on every rank")
    w_plain, none = train(fail_at=None)
    check(none == [], "no reset without a failure")
    check(torch.allclose(w_failed, w_plain, rtol=0, atol=1e-6),
          "the failure changed the result: %s %s" % (w_failed, w_plain))
    say("same: a: resets at batches %s, weights %s" %
        (resets, [round(v, 5) for v in w_failed.tolist()]))


# b: ElasticSampler across a reset in the middle of an epoch.

DATASET = list(range(24))
BATCH = 2


def sampler_state(stop_at=None, fail_at=None, load=None):
    """Processes the epoch of a TorchState's ElasticSampler in batches
    of BATCH per rank, committing every 2 batches; state.seen is every
    rank's processed indices. Returns the state."""
    sampler = hvd.elastic.ElasticSampler(DATASET, shuffle=True, seed=7)
    state = hvd.elastic.TorchState(sampler=sampler, seen=[], batch=0)
    if load is not None:  # rank 0 only: the others take it from the sync
        sampler.load_state_dict(load["sampler"])
        state.seen, state.batch = load["seen"], load["batch"]
        state.save()
    resets = []
    state.register_reset_callbacks([lambda: resets.append(
        (len(state.seen), state.sampler.processed_num))])
    failed = []

    @hvd.elastic.run
    def epoch(state):
        loader = torch.utils.data.DataLoader(DATASET, batch_size=BATCH,
                                             sampler=state.sampler)
        check(len(state.sampler) == (len(DATASET) - state.sampler
                                     .processed_num) // hvd.size(),
              "the sampler splits what is left among hvd.size() ranks")
        for i, idx in enumerate(loader):
            if state.batch == stop_at:
                return
            if state.batch == fail_at and not failed:
                failed.append(state.batch)
                raise hvd.HorovodInternalError("simulated lost peer")
            every = hvd.allgather_object(idx.tolist(), name="seen")
            state.seen = state.seen + [j for part in every for j in part]
            state.sampler.record_batch(i, BATCH)
            state.batch += 1
            if state.batch % 2 == 0:
                state.commit()
        state.sampler.set_epoch(state.sampler.epoch + 1)
        state.commit()

    epoch(state)
    state.resets = resets
    return state


def check_b(statefile):
    # 24 samples, 4 per step at -np 2: 6 steps; commits after steps 2
    # and 4; the failure at step 5 undoes step 5's 4 samples.
    state = sampler_state(fail_at=5)
    check(state.resets == [(16, 16)], "back at the commit: %s" % state.resets)
    check(sorted(state.seen) == DATASET,
          "every sample exactly once: %s" % sorted(state.seen))
    check(state.sampler.epoch == 1 and state.sampler.processed_num == 0,
          "next epoch")
    say("same: b: resets %s, seen %s" % (state.resets, state.seen))
    # Half an epoch (3 steps, 12 samples) for the -np 3 job to finish.
    half = sampler_state(stop_at=3)
    check(half.sampler.processed_num == 12, "12 processed")
    if hvd.rank() == 0:
        with open(statefile, "w") as f:
            json.dump(dict(sampler=half.sampler.state_dict(), seen=half.seen,
                           batch=half.batch), f)


def check_resized(statefile):
    load = None
    if hvd.rank() == 0:
        with open(statefile) as f:
            load = json.load(f)
    state = sampler_state(load=load)
    check(sorted(state.seen) == DATASET,
          "every sample exactly once over both jobs: %s" % sorted(state.seen))
    say("same: resized: size %d, seen %s" % (hvd.size(), state.seen))


# c: HostsUpdatedInterrupt through the notice hook, on rank 0 only.

class CountingState(hvd.elastic.TorchState):
    """TorchState that counts its restores and syncs."""

    def __init__(self, *args, **kwargs):
        self.counts = dict(restore=0, sync=0)
        super().__init__(*args, **kwargs)

    def restore(self):
        self.counts["restore"] += 1
        super().restore()

    def sync(self):
        self.counts["sync"] += 1
        super().sync()


def check_c():
    notices = []
    previous = common_elastic._set_host_update_source(
        lambda: [notices.pop()] if notices else [])
    try:
        model = torch.nn.Linear(2, 1)
        state = CountingState(model, None, batch=0, marker=0)
        seen = []

        def on_reset():
            seen.append((state.batch, state.marker, dict(state.counts)))
        state.register_reset_callbacks([on_reset])

        @hvd.elastic.run
        def loop(state):
            while state.batch < 6:
                state.batch += 1
                if state.batch == 2 and hvd.rank() == 0 and not seen:
                    notices.append((1, common_elastic.HostUpdateResult.added))
                if state.batch == 4 and len(seen) == 1:
                    if hvd.rank() == 0:
                        notices.append(
                            (2, common_elastic.HostUpdateResult.removed))
                    state.marker = 100 + hvd.rank()  # not committed
                    state.check_host_updates()
                    raise AssertionError("no HostsUpdatedInterrupt")
                state.commit()
            return state.batch

        check(loop(state) == 6, "finished")
        # added at batch 2: raised in that commit, synced again after;
        # removed at batch 4: raised by check_host_updates, the
        # uncommitted marker kept, no sync (skip_sync).
        check(seen == [(2, 0, dict(restore=0, sync=1)),
                       (4, 100 + hvd.rank(), dict(restore=0, sync=2))],
              "interrupts: %s" % seen)
        check(state.counts == dict(restore=0, sync=2), str(state.counts))
        say("same: c: interrupts at batches %s" % [s[0] for s in seen])
    finally:
        common_elastic._set_host_update_source(previous)


def main():
    mode, statefile = sys.argv[1], sys.argv[2]
    if mode == "np2":
        check_a()
        check_b(statefile)
        check_c()
    else:
        check_resized(statefile)
    say("ok")
    hvd.shutdown()


if __name__ == "__main__":
    main()
