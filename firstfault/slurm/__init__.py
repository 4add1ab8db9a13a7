"""SLURM integration, beside the pipeline: act on jobs as the scheduler runs and ends them.

* :mod:`~firstfault.slurm.epilog`: a job epilog (or ``strigger --fini`` program) that, when a
  job ended badly, submits its bundle to a running ``firstfault serve`` or analyses it locally;
  never fails the job, never hangs slurmd.
* :mod:`~firstfault.slurm.monitor`: follows every running job with a command of the operator's
  choosing (``firstfault watch`` by default) and collects the verdicts when the job ends.
* :mod:`~firstfault.slurm.operator`: what an operator acts on, an exclude list in SLURM's
  hostlist form and an optional ``scontrol update ... State=DRAIN`` (dry run unless asked).

Everything talks to SLURM through its own client programs (``scontrol``, ``squeue``,
``sacct``), each call bounded in time, and calls the pipeline (``firstfault analyze``) rather
than reimplementing any of it.
"""
