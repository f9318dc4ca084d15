#!/usr/bin/python3
"""A model of the root check (root_check.cc) and the rooted algorithms'
frames, checking the rule that makes it sound: ranks whose calls differ
(any mix of broadcast, reduce, gather and scatter with any roots) never all
return, and never all wait with nothing to find.

Each rank follows its own view of the call: the check frame to its right
neighbour (on lane 1) unless its tree's first send stands in for it, the
tree's steps (on lane 0), then the check frame from its left neighbour
unless its tree's first receive stood in for it. Frames carry the call. A
rank detects a mismatch when a frame it reads names another call, or, when
it waits for good, when an unread frame on any of its sockets does (the
look LaneLinks takes after 100 ms). The stand-in rules mirror
broadcast_binomial.cc, reduce_binomial.cc and rooted_direct.cc: change
them together.

Exhaustive at 2 to 4 ranks, random mixes at 5 to 7.
"""
import itertools
import random
import sys


def plan(kind, root, rank, n):
    """This rank's steps as (sends, receives) of (peer, lane, tag)."""
    rel = (rank - root) % n
    at = lambda r: (r + root) % n
    tree = []
    if kind == "broadcast":
        sent_by, received_by = n == 2 and rel == 0, n == 2 and rel == 1
        mask = 1
        while mask < n:
            if rel & mask:
                tree.append(([], [(at(rel - mask), 0, mask)]))
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if rel + mask < n:
                tree.append(([(at(rel + mask), 0, mask)], []))
            mask >>= 1
    elif kind == "reduce":
        sent_by, received_by = n == 2 and rel == 1, n == 2 and rel == 0
        mask = 1
        while mask < n:
            if rel & mask:
                tree.append(([(at(rel - mask), 0, mask)], []))
                break
            if rel + mask < n:
                tree.append(([], [(at(rel + mask), 0, mask)]))
            mask <<= 1
    elif kind == "gather":
        sent_by, received_by = rel == n - 1, rel == 0
        if rel:
            tree.append(([(root, 0, 0)], []))
        else:
            tree.append(([], [(p, 0, 0) for p in range(n) if p != root]))
    else:  # scatter
        sent_by, received_by = rel == 0, rel == 1
        if rel:
            tree.append(([], [(root, 0, 0)]))
        else:
            tree.append(([(p, 0, 0) for p in range(n) if p != root], []))
    first = ([] if sent_by else [((rank + 1) % n, 1, "check")], [])
    last = ([], [] if received_by else [((rank - 1) % n, 1, "check")])
    return [first] + tree + [last]


def run(views, n):
    """Which ranks return and which detect a mismatch."""
    plans = [plan(kind, root, x, n) for x, (kind, root) in enumerate(views)]
    step = [0] * n
    sent = [False] * n
    sockets, read = {}, {}
    detected = set()
    moved = True
    while moved:
        moved = False
        for x in range(n):
            if x in detected or step[x] >= len(plans[x]):
                continue
            sends, receives = plans[x][step[x]]
            if not sent[x]:
                for peer, lane, tag in sends:
                    sockets.setdefault((x, peer, lane), []).append((views[x], tag))
                sent[x] = moved = True
            if any(len(sockets.get((p, x, l), [])) <= read.get((p, x, l), 0)
                   for p, l, _ in receives):
                continue
            for peer, lane, tag in receives:
                key = (peer, x, lane)
                call, their_tag = sockets[key][read.get(key, 0)]
                read[key] = read.get(key, 0) + 1
                if call != views[x] or their_tag != tag:
                    detected.add(x)
            if x not in detected:
                step[x] += 1
                sent[x] = False
            moved = True
    returned = [step[x] >= len(plans[x]) for x in range(n)]
    for x in range(n):
        if returned[x] or x in detected:
            continue
        for (src, dst, lane), frames in sockets.items():
            at = read.get((src, dst, lane), 0)
            if dst == x and len(frames) > at and frames[at][0] != views[x]:
                detected.add(x)
    return returned, detected


def main():
    kinds = ["broadcast", "reduce", "gather", "scatter"]
    rng = random.Random(32)
    failures = 0
    for n in range(2, 8):
        views = [(k, r) for k in kinds for r in range(n)]
        cases = (itertools.product(views, repeat=n) if n <= 4 else
                 (tuple(rng.choice(views) for _ in range(n)) for _ in range(20000)))
        for case in cases:
            returned, detected = run(list(case), n)
            if len(set(case)) == 1:
                if not all(returned) or detected:
                    print("matching calls did not all return:", n, case)
                    failures += 1
            elif not detected:
                print("differing calls, no rank detects it:", n, case, "returned", returned)
                failures += 1
    print("failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
