"""The stand-in's heap: keep Python's cyclic garbage collector from
rescanning the stored database.

The stand-in holds its databases in memory: every stored row version is a
tracked object that lives until the row changes, and a benchmark fills it
with millions of them.  CPython runs a full collection each time the
objects promoted to its oldest generation since the last one reach a
quarter of those it holds, and each full collection walks every one of
them: measured in-process (the engine and the row encoder, no sockets),
a 200,000-row copy in 1,000-row keyset chunks cost 1.36 CPU-seconds next
to a 2,000,000-row table and 2.81 with the collector as it is, 1.24 s of
them in one full collection.  That is a cost of this process, not of SQL
Server, and it grows with whatever earlier phases left behind, so it made
the stand-in serve later phases slower than earlier ones.

After each full collection the survivors are moved to the permanent
generation (gc.freeze): a full collection then walks only what has been
promoted since, so each long-lived object is walked about once.  Garbage
still goes when its last reference does; what no longer goes is a
reference cycle among objects that were alive at a full collection and
die later, a small leak for a test server, the price of that.

--gc default keeps the collector as CPython sets it (run-standin)."""

import gc

POLICIES = ("freeze", "default")


def _freeze_after_full_collection(phase, info):
    # "stop" of the oldest generation: every list of the collector is
    # consistent again, and the survivors are what stays
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def policy():
    return "freeze" if _freeze_after_full_collection in gc.callbacks else "default"


def describe():
    """For the control command `heap`: the policy, how many objects are
    frozen, and the collector's counts per generation."""
    return {"policy": policy(), "frozen": gc.get_freeze_count(),
            "collections": [g["collections"] for g in gc.get_stats()]}


def apply_policy(wanted="freeze"):
    """Install `wanted` for this process (idempotent)."""
    if wanted not in POLICIES:
        raise ValueError("unknown heap policy %r (one of %s)" % (wanted, ", ".join(POLICIES)))
    if wanted != policy():
        if wanted == "freeze":
            gc.callbacks.append(_freeze_after_full_collection)
        else:
            gc.callbacks.remove(_freeze_after_full_collection)
