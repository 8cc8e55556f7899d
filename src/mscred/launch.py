"""Processes for multi-process work: one per rank, started here (``nproc``) or by ``torchrun``.

Two ways in, one worker body:

* ``launch(fn, nproc, args)`` spawns ``nproc`` processes (``torch.multiprocessing``, start method ``spawn``: fork
  is unsafe once CUDA or threads exist), joins the default process group in each through a ``FileStore`` in a
  fresh temporary folder (no port to pick, so no race for one), calls ``fn(rank, *args)`` and returns every rank's
  JSON result, rank 0 first.
* under ``torchrun`` (``under_torchrun()``), ``setup()`` reads RANK / WORLD_SIZE / LOCAL_RANK and joins through
  ``env://``; the caller runs ``fn`` in its own process.

Every process sets the NVLink-multicast switches of ``SAFE_ENV`` off before NCCL starts (the shared H200 hosts
forbid multicast: it can put every GPU of the host out of service), unless the user set them already.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from mscred.atomic import scratch_dir
from mscred.errors import InputError

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
_ERROR_FILE = "error.{rank}.txt"
_FAILED_FILE = "failed.{rank}.json"
_RESULT_FILE = "result.{rank}.json"


@dataclass(frozen=True)
class Rank:
    """Where this process stands: its rank, the world size, its local rank and its device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def apply_safe_env() -> None:
    """Keep NVLink multicast off in NCCL, PyTorch symmetric memory and NVSHMEM (user settings win)."""
    for key, value in SAFE_ENV.items():
        os.environ.setdefault(key, value)


def under_torchrun() -> bool:
    """True in a process started by torchrun (or any launcher that sets RANK, WORLD_SIZE and LOCAL_RANK)."""
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def rank_device(name: str, local_rank: int) -> torch.device:
    """The device of one rank: ``cuda:<local_rank>`` when ``name`` resolves to CUDA, else the CPU.

    Raises InputError when the ranks of this host outnumber its GPUs (NCCL cannot share one GPU between ranks).
    """
    from mscred.train import resolve_device

    device = resolve_device(name)
    if device.type != "cuda":
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise InputError(f"rank with local index {local_rank} needs GPU {local_rank}, but this host has {count} "
                         f"GPU(s): use at most {count} processes per host, or --device cpu")
    torch.cuda.set_device(local_rank)  # "cuda" without an index means this GPU from now on in this process
    return torch.device("cuda", local_rank)


def setup(device: str = "auto", backend: Optional[str] = None, init_method: Optional[str] = None,
          rank: Optional[int] = None, world_size: Optional[int] = None, local_rank: Optional[int] = None) -> Rank:
    """Join the default process group (NCCL on CUDA, gloo on the CPU unless ``backend`` says otherwise).

    Without explicit ``rank``/``world_size``/``local_rank`` they come from torchrun's environment variables.
    """
    apply_safe_env()
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    local_rank = int(os.environ.get("LOCAL_RANK", rank)) if local_rank is None else local_rank
    dev = rank_device(device, local_rank)
    backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method=init_method or "env://", rank=rank, world_size=world_size)
    if rank != 0:
        logging.getLogger("mscred").setLevel(logging.WARNING)  # rank 0 alone logs progress and information
    return Rank(rank, world_size, local_rank, dev)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _entry(index: int, fn: Callable, nproc: int, folder: str, device: str, backend: Optional[str],
           args: tuple) -> None:
    """Body of one spawned process: join the group, run ``fn``, write its result (or its InputError) for the
    parent. Any exception propagates, so that the parent's join stops the other ranks instead of leaving them in a
    collective that never completes."""
    os.environ.update(RANK=str(index), WORLD_SIZE=str(nproc), LOCAL_RANK=str(index), LOCAL_WORLD_SIZE=str(nproc))
    if device == "cpu" or not torch.cuda.is_available():
        # the host's cores split between the ranks instead of each rank spinning up a thread per core
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // nproc))
    try:
        rank = setup(device, backend, init_method=f"file://{folder}/store", rank=index, world_size=nproc,
                     local_rank=index)
        result = fn(rank, *args)
        Path(folder, _RESULT_FILE.format(rank=index)).write_text(json.dumps(result))
        # Every rank reaches here before any tears the group down: a gloo rank destroyed while its peer still
        # talks to it aborted the peer ("terminate called without an active exception") in about 1 run of 4.
        dist.barrier()
    except InputError as err:
        Path(folder, _ERROR_FILE.format(rank=index)).write_text(str(err))
        raise
    except BaseException as err:
        # When and why, for the parent to name the rank that failed first: one rank's failure makes its peers fail
        # too (a gloo rank still connecting loses its peer: "Gloo connectFullMesh failed"), and torch reports
        # whichever failed process its join finds first.
        line = " ".join(f"{type(err).__name__}: {err}".split())
        Path(folder, _FAILED_FILE.format(rank=index)).write_text(json.dumps({"time": time.time(), "error": line}))
        raise
    finally:
        teardown()
    # A rank that succeeded leaves without the interpreter's finalisation: objects still holding the process group
    # (a DDP reducer, say) would otherwise be destroyed during it, and a gloo rank then sometimes aborted at exit
    # ("terminate called without an active exception", SIGABRT, ~1 run in 20 on the 2-core box, after the
    # barrier above). Its result is written and the group destroyed; nothing else is left to do.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def first_failure(folder: str | Path, nproc: int) -> Optional[tuple[int, str]]:
    """(rank, its exception's line) of the rank whose failure came first, by the records ``_entry`` leaves in
    ``folder``; None when no rank left one."""
    failures = []
    for rank in range(nproc):
        path = Path(folder, _FAILED_FILE.format(rank=rank))
        if path.exists():
            record = json.loads(path.read_text())
            failures.append((record["time"], rank, record["error"]))
    if not failures:
        return None
    _, rank, error = min(failures)
    return rank, error


def _stop(processes, grace: float = 5.0) -> None:
    """Terminate the rank processes still alive, and kill those that have not exited after ``grace`` seconds."""
    alive = [p for p in processes if p.is_alive()]
    for process in alive:
        process.terminate()
    end = time.monotonic() + grace
    for process in alive:
        process.join(max(0.0, end - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def launch(fn: Callable[..., Any], nproc: int, args: tuple = (), *, device: str = "auto",
           backend: Optional[str] = None, timeout: Optional[float] = None) -> list[Any]:
    """Run ``fn(rank: Rank, *args)`` in ``nproc`` spawned processes; returns their JSON results by rank.

    Parameters
    ----------
    fn : top-level function (it is pickled by name into the children)
        Returns something ``json.dumps`` takes (or None).
    nproc : int
        Processes; on CUDA one GPU each (``cuda:<rank>``).
    args : tuple
        Picklable arguments after the Rank.
    device : "auto" | "cpu" | "cuda"
    backend : "nccl" | "gloo" | None (NCCL on CUDA, gloo on the CPU)
    timeout : seconds, or None
        Stop every rank and raise TimeoutError after this long (a hung collective never returns by itself).

    Raises
    ------
    InputError
        Raised by ``fn`` on any rank (the first one's message).
    """
    import logging

    import torch.multiprocessing as mp

    apply_safe_env()  # the children inherit the parent's environment
    # torch logs a "Terminating process ... via signal SIGTERM" warning when one rank's failure stops the others:
    # a second line beside the one this function's caller prints.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    with scratch_dir("mscred-ranks-") as folder:
        context = mp.start_processes(_entry, args=(fn, nproc, folder, device, backend, args), nprocs=nproc,
                                     join=False, start_method="spawn")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not context.join(timeout=0.5):
                if deadline is not None and time.monotonic() > deadline:
                    _stop(context.processes)
                    raise TimeoutError(f"{nproc} ranks did not finish within {timeout:.0f} s")
        except mp.ProcessRaisedException as err:
            for rank in range(nproc):
                error = Path(folder, _ERROR_FILE.format(rank=rank))
                if error.exists():
                    raise InputError(error.read_text()) from None
            first = first_failure(folder, nproc)
            if first is not None:
                raise RuntimeError(f"rank {first[0]} failed: {first[1]}") from None
            # Not bad input: the child's traceback ends with its exception's own line; that line, not 30.
            last = next((line.strip() for line in reversed(str(err).splitlines()) if line.strip()), str(err))
            raise RuntimeError(f"rank {err.error_index} failed: {last}") from None
        except BaseException:
            # Ctrl-C (SIGINT) to this process alone, or any error here: the ranks are not daemons, so the parent's
            # exit would wait for them to finish the whole run (and write its outputs) after saying "aborted".
            _stop(context.processes)
            raise
        results = []
        for rank in range(nproc):
            path = Path(folder, _RESULT_FILE.format(rank=rank))
            results.append(json.loads(path.read_text()) if path.exists() else None)
        return results


__all__ = ["Rank", "SAFE_ENV", "apply_safe_env", "launch", "rank_device", "setup", "teardown", "under_torchrun"]
