"""The buffer hand-over of conv_halo3x3s2_pingpong (benchmarks/conv2_pingpong.cuh), simulated before it ever ran.

One producer stream fills stage q into buffer q % 3 after waiting on EMPTY[b] (parity (q // 3 - 1) & 1, from the
fourth stage on) and arrives on FULL[b]; two consumer groups take alternate tiles (group g: tiles g, g + 2, ...,
stages 2k and 2k + 1 of tile k), wait on FULL[b] (parity (q // 3) & 1), read, and arrive on EMPTY[b] when stage
q + 3 exists. An mbarrier's try_wait.parity is true when the phase of that parity has completed, i.e. when the
number of completed phases has the other parity. Random interleavings of the three actors, 1 to 11 tiles per block:
every run must end with every stage read by its group from its own buffer, no deadlock.
Usage: python3 benchmarks/conv2_pingpong_protocol.py   (a second, numpy-free)
"""
import random

BUFFERS = 3


class Barrier:
    """An mbarrier with one arriving agent per phase (a group's or the producers' threads arrive together)."""

    def __init__(self):
        self.completed = 0

    def arrive(self):
        self.completed += 1

    def try_wait(self, parity: int) -> bool:
        return (self.completed & 1) != parity


def run(tiles: int, seed: int) -> str:
    rnd = random.Random(seed)
    stages = 2 * tiles
    full = [Barrier() for _ in range(BUFFERS)]
    empty = [Barrier() for _ in range(BUFFERS)]
    content = [None] * BUFFERS
    produced = 0
    todo = {g: [2 * k + h for k in range(g, tiles, 2) for h in (0, 1)] for g in (0, 1)}
    while produced < stages or any(todo.values()):
        actors = (["producer"] if produced < stages else []) + [g for g in (0, 1) if todo[g]]
        rnd.shuffle(actors)
        for actor in actors:
            if actor == "producer":
                q, b = produced, produced % BUFFERS
                if q >= BUFFERS and not empty[b].try_wait((q // BUFFERS - 1) & 1):
                    continue
                content[b] = q
                full[b].arrive()
                produced += 1
                break
            q = todo[actor][0]
            b = q % BUFFERS
            if not full[b].try_wait((q // BUFFERS) & 1):
                continue
            if content[b] != q:
                return f"group {actor} found stage {content[b]} where stage {q} should be"
            if q + BUFFERS < stages:
                empty[b].arrive()
            todo[actor].pop(0)
            break
        else:
            return f"deadlock: {produced} stages produced, left {todo}"
    return "ok"


if __name__ == "__main__":
    for tiles in range(1, 12):
        outcomes = {run(tiles, seed) for seed in range(300)}
        print(f"{tiles:2d} tiles: {', '.join(sorted(outcomes))}")
        assert outcomes == {"ok"}, outcomes
