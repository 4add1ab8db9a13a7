# ruff: noqa: E501  (verbatim real text: lines are as long as the logs they quote)
"""Every line the cluster simulator writes, as a template with the real example it comes from.

Nothing here is invented wording: each template is the text real software prints, taken from
a real run (``firstfault simulate torch`` / ``simulate slurm`` captures under ``tests/fixtures``
and ``/tmp/ff_samples``), from the software's own format string, or from a public log quoted in
an issue. ``SOURCES`` maps template name -> source; ``docs/cluster-simulator.md`` prints the
table. Values in braces are filled in per rank/host; line numbers in ``file.cpp:NNN`` tags are
those of the log the template was copied from (they differ between torch releases; no parser
depends on them).

The torch "profile" is a torch 2.7/2.8 + NCCL 2.27.5 job on H100 hosts:

* c10d (ProcessGroupNCCL) lines are ``[rankN]:[E1202 HH:MM:SS.nnnnnnnnn ProcessGroupNCCL.cpp:LINE] ``
  + message; continuation lines of a multi-line message carry no prefix (real logs: the
  E709/E129/E512 examples below);
* torchrun (torchelastic agent) lines are ``W1202 HH:MM:SS.uuuuuu PID torch/distributed/...py:LINE] ``
  + message (python logging with torch's formatter);
* the trainer is firstfault's workload (``firstfault_sim/workload.py``): its progress lines,
  exceptions and Python frames are copied from real runs of it.
"""

from __future__ import annotations

from dataclasses import dataclass

NCCL_VERSION = "2.27.5"
NCCL_VERSION_LINE = "NCCL version 2.27.5+cuda12.9"
PY = "/opt/venv/lib/python3.12/site-packages"  # where torch lives in the simulated container
VENV_BIN = "/opt/venv/bin"
APP = "/workspace/firstfault/simulate"  # the trainer (firstfault's workload) inside the container
PYTHON = "/opt/venv/bin/python3"


@dataclass(frozen=True, slots=True)
class Src:
    text: str
    source: str


SOURCES: dict[str, Src] = {}


def _t(name: str, text: str, source: str) -> str:
    SOURCES[name] = Src(text, source)
    return text


# ----------------------------------------------------------------------------- the trainer
W_START = _t(
    "workload.start",
    "{ts} INFO [rank{rank}] start world_size={world} rank={rank} local_rank={lr} hostname={host} pid={pid} "
    "attempt=0 backend=nccl pg_timeout_s={timeout:g} tp_group={tp} dp_group={dp} steps={steps}",
    "firstfault_sim/workload.py main(): log.info('start world_size=%d rank=%d ...') with the "
    "'%(asctime)s %(levelname)s [rank{rank}] %(message)s' formatter; real line: /tmp/ff_samples/hang stdout.log",
)
W_STEP = _t(
    "workload.step",
    "%s INFO [rank%d] step %d loss %s step_time_ms %s data_ms %s compute_ms %s comm_ms %s",
    "firstfault_sim/workload.py _train(): log.info('step %d loss %.4f step_time_ms %.1f data_ms %.1f "
    "compute_ms %.1f comm_ms %.1f'); real lines: any /tmp/ff_samples/*/logs/*/stdout.log",
)
W_DONE = _t(
    "workload.done",
    "{ts} INFO [rank{rank}] training complete steps={steps}",
    "firstfault_sim/workload.py: log.info('training complete steps=%d'); real: /tmp/ff_samples/none",
)
W_EXC_MSG = _t(
    "workload.exception",
    "RuntimeError: expert capacity exceeded: expert {expert} was routed {tokens} tokens but capacity is {cap}",
    "firstfault_sim/workload.py _check_capacity(); real: /tmp/ff_samples/exception (rank 1 stderr)",
)
W_NAN_MSG = _t(
    "workload.nan",
    "FloatingPointError: loss is NaN at step {step}",
    "firstfault_sim/workload.py _train(): raise FloatingPointError(f'loss is NaN at step {step}'); "
    "real: /tmp/ff_samples/nan",
)

# Traceback frames of the workload, copied from real stderr.log files (torch 2.13 / CPython 3.11,
# with the install prefix replaced by the container's). {p} = rank prefix "[rankN]: ".
TB_HEAD = (
    "{p}Traceback (most recent call last):",
    '{p}  File "<frozen runpy>", line 198, in _run_module_as_main',
    '{p}  File "<frozen runpy>", line 88, in _run_code',
    '{p}  File "' + APP + '/workload.py", line 531, in <module>',
    "{p}    main()",
    '{p}  File "' + PY + '/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper',
    "{p}    return f(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + APP + '/workload.py", line 447, in main',
    "{p}    _train(args, plan, par, device)",
)
TB_MODEL = (
    '{p}  File "' + APP + '/workload.py", line 497, in _train',
    "{p}    logits = model(x, step)",
    "{p}             ^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl',
    "{p}    return self._call_impl(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1789, in _call_impl',
    "{p}    return forward_call(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + APP + '/workload.py", line 342, in forward',
    "{p}    h = self.block(h, step)",
    "{p}        ^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl',
    "{p}    return self._call_impl(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1789, in _call_impl',
    "{p}    return forward_call(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + APP + '/workload.py", line 310, in forward',
    "{p}    self.router(h, skew=faults.raises_in_model(self.plan, self.par.rank, step))",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl',
    "{p}    return self._call_impl(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/nn/modules/module.py", line 1789, in _call_impl',
    "{p}    return forward_call(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + APP + '/workload.py", line 283, in forward',
    "{p}    _check_capacity(counts, capacity)",
    '{p}  File "' + APP + '/workload.py", line 290, in _check_capacity',
    "{p}    raise RuntimeError(",
)
TB_NAN = (
    '{p}  File "' + APP + '/workload.py", line 501, in _train',
    "{p}    raise FloatingPointError(f\"loss is {{'NaN' if math.isnan(value) else 'inf'}} at step {{step}}\")",
)
TB_COLLECTIVE = (
    '{p}  File "' + APP + '/workload.py", line 510, in _train',
    '{p}    par.collective("grad all_reduce", dist.all_reduce, bucket)',
    '{p}  File "' + APP + '/workload.py", line 259, in collective',
    "{p}    return fn(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/distributed/c10d_logger.py", line 83, in wrapper',
    "{p}    return func(*args, **kwargs)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^",
    '{p}  File "' + PY + '/torch/distributed/distributed_c10d.py", line 2501, in all_reduce',
    "{p}    work = group.allreduce([tensor], opts)",
    "{p}           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
)
_t(
    "workload.traceback",
    "\n".join(TB_HEAD + TB_MODEL),
    "real stderr.log of /tmp/ff_samples/exception and tests/fixtures/slurm/torch_exception_torchrun (rank 1); "
    "the all_reduce frames: vllm-project/vllm#10453 ([rank1]: ... distributed_c10d.py line 2501 in all_reduce)",
)

# Checkpoint write on a full disk: torch.save's zip writer (torch/serialization.py)
TB_SAVE = (
    '{p}  File "' + APP + '/workload.py", line 520, in _train',
    "{p}    torch.save(state, path)",
    '{p}  File "' + PY + '/torch/serialization.py", line 652, in save',
    "{p}    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)",
    '{p}  File "' + PY + '/torch/serialization.py", line 866, in _save',
    "{p}    zip_file.write_record('data.pkl', data_value, len(data_value))",
)
SAVE_FAILED = _t(
    "torch.save_failed",
    "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data.pkl: file write failed",
    "SWivid/F5-TTS#458 ([rank0]: ... serialization.py line 652 in save / 866 in _save / RuntimeError: "
    "[enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data.pkl: file write failed); "
    "the same error on full disks: hiyouga/LlamaFactory#1223, h2oai/h2o-llmstudio#214",
)

# faulthandler output (CPython Modules/faulthandler.c), as the workload's faulthandler.enable()
# + register(SIGTERM) print it; frames from the real /tmp/ff_samples runs.
FH_CURRENT = _t(
    "faulthandler.current_thread",
    "Current thread 0x{tid:016x} (most recent call first):",
    "CPython faulthandler; real: /tmp/ff_samples/hang rank 2 stderr.log",
)
FH_THREAD = _t(
    "faulthandler.thread",
    "Thread 0x{tid:016x} (most recent call first):",
    "CPython faulthandler; real: /tmp/ff_samples/segfault rank 2 stderr.log",
)
FH_FATAL_ABORT = _t(
    "faulthandler.fatal_abort",
    "Fatal Python error: Aborted",
    "CPython faulthandler_fatal_error for SIGABRT ('Fatal Python error: Aborted'); "
    "python.toml example '[default1]:Fatal Python error: Aborted'",
)
FH_NO_FRAME = _t(
    "faulthandler.no_frame",
    "  <no Python frame>",
    "CPython faulthandler; real: /tmp/ff_samples/segfault rank 1 stderr.log",
)
FH_EXT = _t(
    "faulthandler.extension_modules",
    "Extension modules: torch._C, torch._C._dynamo.autograd_compiler, torch._C._dynamo.eval_frame, "
    "torch._C._dynamo.guards, torch._C._dynamo.utils, torch._C._fft, torch._C._linalg, torch._C._nested, "
    "torch._C._nn, torch._C._sparse, torch._C._special (total: 11)",
    "real: /tmp/ff_samples/segfault rank 2 stderr.log",
)
FH_STACK_COLLECTIVE = (
    '  File "' + PY + '/torch/distributed/distributed_c10d.py", line 3252 in all_reduce',
    '  File "' + PY + '/torch/distributed/c10d_logger.py", line 83 in wrapper',
    '  File "' + APP + '/workload.py", line 259 in collective',
    '  File "' + APP + '/workload.py", line 510 in _train',
    '  File "' + APP + '/workload.py", line 447 in main',
    '  File "' + PY + '/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367 in wrapper',
    '  File "' + APP + '/workload.py", line 531 in <module>',
    '  File "<frozen runpy>", line 88 in _run_code',
    '  File "<frozen runpy>", line 198 in _run_module_as_main',
)
FH_STACK_DATALOADER = (
    '  File "' + APP + '/workload.py", line 210 in __getitem__',
    '  File "' + PY + '/torch/utils/data/_utils/fetch.py", line 54 in <listcomp>',
    '  File "' + PY + '/torch/utils/data/_utils/fetch.py", line 54 in fetch',
    '  File "' + PY + '/torch/utils/data/dataloader.py", line 785 in _next_data',
    '  File "' + PY + '/torch/utils/data/dataloader.py", line 725 in __next__',
    '  File "' + APP + '/workload.py", line 472 in _train',
    '  File "' + APP + '/workload.py", line 447 in main',
    '  File "' + PY + '/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367 in wrapper',
    '  File "' + APP + '/workload.py", line 531 in <module>',
    '  File "<frozen runpy>", line 88 in _run_code',
    '  File "<frozen runpy>", line 198 in _run_module_as_main',
)
_t(
    "faulthandler.stacks",
    "\n".join(FH_STACK_COLLECTIVE + FH_STACK_DATALOADER),
    "real: /tmp/ff_samples/segfault rank 0 (blocked in all_reduce) and /tmp/ff_samples/hang rank 2 "
    "(blocked in Dataset.__getitem__) stderr.log",
)

# ----------------------------------------------------------------------------- c10d / ProcessGroupNCCL
# Prefixes: "[rankN]:[E1202 14:57:42.578407236 ProcessGroupNCCL.cpp:683] "; the [PG ...] tag is logPrefix().
C10 = "[rank{rank}]:[{lvl}{md} {hms}.{ns:09d} {file}:{line}] "
PG_TAG = "[PG ID {pg_id} PG GUID {guid}({desc}) Rank {pg_rank}]"
PG_TAG_DEFAULT = "[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
C_WD_TIMEOUT = _t(
    "c10d.watchdog_timeout",
    "[Rank {pg_rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
    "NumelIn={nin}, NumelOut={nout}, Timeout(ms)={tms}) ran for {ran} milliseconds before timing out.",
    "torch ProcessGroupNCCL.cpp WorkNCCL::checkTimeout; real: '[rank9]:[E129 16:38:47.714693059 "
    "ProcessGroupNCCL.cpp:683] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=49387, "
    "OpType=_ALLGATHER_BASE, NumelIn=442368, NumelOut=884736, Timeout(ms)=600000) ran for 600002 milliseconds "
    "before timing out.' (Megatron job, NCCL 2.27.5, public log); [Rank N] is the rank in that group",
)
C_FAIL_DETECTED = _t(
    "c10d.failure_detected",
    "{tag}  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {le}, "
    "last completed work: {lc}",
    "real: '[rank9]:[E129 16:38:47.714849575 ProcessGroupNCCL.cpp:2241] [PG ID 5 PG GUID "
    "37(TENSOR_MODEL_PARALLEL_GROUP) Rank 1]  failure detected by watchdog at work sequence id: 49387 PG status: "
    "last enqueued work: 49406, last completed work: 49386'",
)
C_STACK = _t(
    "c10d.stack_trace",
    "Stack trace of the failed collective: ",
    "torch ProcessGroupNCCL.cpp WorkNCCL::printTraceback ('Stack trace of the failed collective: \\n' + "
    "traceback); real: '[rank3]:[E710 18:00:32.427312432 ProcessGroupNCCL.cpp:801] Stack trace of the failed "
    "collective: \\n#0 all_reduce from /usr/local/lib/python3.12/dist-packages/torch/distributed/"
    "distributed_c10d.py:3174\\n#1 wrapper from .../c10d_logger.py:83'",
)
C_STACK_FRAMES = (
    "#0 {fn} from " + PY + "/torch/distributed/distributed_c10d.py:{c10d_line}",
    "#1 wrapper from " + PY + "/torch/distributed/c10d_logger.py:83",
    "#2 collective from " + APP + "/workload.py:259",
    "#3 _train from " + APP + "/workload.py:510",
    "#4 main from " + APP + "/workload.py:447",
    "#5 wrapper from " + PY + "/torch/distributed/elastic/multiprocessing/errors/__init__.py:367",
    "#6 <module> from " + APP + "/workload.py:531",
    "#7 _run_code from <frozen runpy>:88",
    "#8 _run_module_as_main from <frozen runpy>:198",
)
C_FIRST_PG = _t(
    "c10d.first_pg_dump",
    "{tag} First PG on this rank to signal dumping.",
    "real: '[rank9]:[E129 16:38:47.714884178 ProcessGroupNCCL.cpp:2573] [PG ID 5 PG GUID "
    "37(TENSOR_MODEL_PARALLEL_GROUP) Rank 1] First PG on this rank to signal dumping.'",
)
_DUMP_TAIL = (
    "Last enqueued NCCL work: {le}, last completed NCCL work: {lc}.This is most likely caused by incorrect "
    "usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all "
    "ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL "
    "deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc."
)
C_DUMP_LOCAL = _t(
    "c10d.dump_signal_local",
    "{tag} Received a dump signal due to a collective timeout from this local rank and we will try our best "
    "to dump the debug info. " + _DUMP_TAIL,
    "real: '[rank8]:[E129 16:38:47.801786726 ProcessGroupNCCL.cpp:1858] [PG ID 0 PG GUID 0(default_pg) Rank 8] "
    "Received a dump signal due to a collective timeout from this local rank and we will try our best to dump "
    "the debug info. Last enqueued NCCL work: 62, last completed NCCL work: 62.This is most likely ...'",
)
C_DUMP_OBSERVED = _t(
    "c10d.dump_signal_observed",
    "{tag} Observed flight recorder dump signal from another rank via TCPStore.",
    "real: '[rank0]:[E129 16:38:47.634597716 ProcessGroupNCCL.cpp:1794] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
    "Observed flight recorder dump signal from another rank via TCPStore.'",
)
C_DUMP_REMOTE = _t(
    "c10d.dump_signal_remote",
    "{tag} Received a dump signal due to a collective timeout from  rank {from_rank} and we will try our best "
    "to dump the debug info. " + _DUMP_TAIL,
    "real: '[rank0]:[E129 16:38:47.634726597 ProcessGroupNCCL.cpp:1858] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
    "Received a dump signal due to a collective timeout from  rank 8 and we will try our best to dump the debug "
    "info. ...' (two spaces before 'rank', as printed)",
)
C_PREPARE_DUMP = _t(
    "c10d.prepare_dump",
    "{tag} ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
    "real: '[rank8]:[E129 16:38:47.802073551 ProcessGroupNCCL.cpp:1575] [PG ID 0 PG GUID 0(default_pg) Rank 8] "
    "ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1'",
)
C_SOME_OPS = _t(
    "c10d.some_ops_failed",
    "[Rank {pg_rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
    "kernels, subsequent GPU operations might run on corrupted/incomplete data.",
    "real: '[rank0]:[E709 17:05:39.081662161 ProcessGroupNCCL.cpp:684] [Rank 0] Some NCCL operations have "
    "failed or timed out. ...' (torch 2.7 log, public)",
)
C_AVOID = _t(
    "c10d.taking_down",
    "[Rank {pg_rank}] To avoid data inconsistency, we are taking the entire process down.",
    "real: '[rank0]:[E709 17:05:39.081690629 ProcessGroupNCCL.cpp:698] [Rank 0] To avoid data inconsistency, "
    "we are taking the entire process down.'",
)
C_TERMINATED = _t(
    "c10d.watchdog_terminated",
    "{tag} Process group watchdog thread terminated with exception: {exc}",
    "real: '[rank0]:[E709 17:05:39.083402482 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
    "Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation "
    "timeout: ...'; with a CUDA error: '[rank0]:[E512 10:21:08.164595040 ProcessGroupNCCL.cpp:2057] [PG ID 12 "
    "PG GUID 35(EXPERT_MODEL_PARALLEL_GROUP) Rank 0] Process group watchdog thread terminated with exception: "
    "CUDA error: an illegal memory access was encountered'",
)
# "Exception raised from ..." + C++ frames, verbatim from the E709 log (paths: the container's)
CPP_CHECK_TIMEOUT = (
    "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7f92e62535e8 in "
    + PY
    + "/torch/lib/libc10.so)",
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x23d (0x7f92e756ea6d in "
    + PY
    + "/torch/lib/libtorch_cuda.so)",
    "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0xc80 (0x7f92e75707f0 in "
    + PY
    + "/torch/lib/libtorch_cuda.so)",
    "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f92e7571efd in "
    + PY
    + "/torch/lib/libtorch_cuda.so)",
    "frame #4: <unknown function> + 0xd8198 (0x7f92d7559198 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6)",
    "frame #5: <unknown function> + 0x7ea7 (0x7f933d48dea7 in /usr/lib/x86_64-linux-gnu/libpthread.so.0)",
    "frame #6: clone + 0x3f (0x7f933d25eadf in /usr/lib/x86_64-linux-gnu/libc.so.6)",
    "",
)
CPP_WATCHDOG = (
    "Exception raised from ncclCommWatchdog at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1905 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x98 (0x7f92e62535e8 in "
    + PY
    + "/torch/lib/libc10.so)",
    "frame #1: <unknown function> + 0x11b4abe (0x7f92e7540abe in " + PY + "/torch/lib/libtorch_cuda.so)",
    "frame #2: <unknown function> + 0xe07bed (0x7f92e7193bed in " + PY + "/torch/lib/libtorch_cuda.so)",
    "frame #3: <unknown function> + 0xd8198 (0x7f92d7559198 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6)",
    "frame #4: <unknown function> + 0x7ea7 (0x7f933d48dea7 in /usr/lib/x86_64-linux-gnu/libpthread.so.0)",
    "frame #5: clone + 0x3f (0x7f933d25eadf in /usr/lib/x86_64-linux-gnu/libc.so.6)",
    "",
)
CPP_NCCL_ERROR = (
    "Exception raised from checkForNCCLErrorsInternal at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1736 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x99 (0x7fcc0c99ad89 in "
    + PY
    + "/torch/lib/libc10.so)",
    "frame #1: c10d::ProcessGroupNCCL::checkForNCCLErrorsInternal(std::shared_ptr<c10d::NCCLComm>&) + 0x35d (0x7fcbaa1378dd in "
    + PY
    + "/torch/lib/libtorch_cuda.so)",
    "",
)
CPP_CUDA_CHECK = (
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0xb0 (0xede05571c700 in "
    + PY
    + "/torch/lib/libc10.so)",
    "frame #1: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x224 (0xede0557a4e24 in "
    + PY
    + "/torch/lib/libc10_cuda.so)",
    "frame #2: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56 (0x7fd3f0214726 in "
    + PY
    + "/torch/lib/libtorch_cuda.so)",
    "",
)
_t(
    "c10d.cpp_frames",
    "\n".join(CPP_CHECK_TIMEOUT + CPP_WATCHDOG + CPP_NCCL_ERROR + CPP_CUDA_CHECK),
    "checkTimeout / ncclCommWatchdog frames: the E709 torch 2.7 log (public); checkForNCCLErrorsInternal: "
    "deepseek-ai/DeepEP#106; c10_cuda_check_implementation: the E512 Megatron log and pytorch issue pastes",
)
TERMINATE = _t(
    "libstdc++.terminate",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "libstdc++ verbose terminate handler; real: E709 log and NVIDIA/Megatron-LM#935",
)
WHAT = _t(
    "libstdc++.what", "  what():  {what}", "libstdc++ verbose terminate handler ('  what():  ...'); real: E709 log"
)
CUDA_EXC = _t(
    "c10.cuda_error",
    "CUDA error: {msg}\nSearch for `{enum}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
    "for more information.\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with "
    "`TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
    "c10/cuda/CUDAException.cpp (c10_cuda_check_implementation); real: the E512 Megatron log ('CUDA error: an "
    "illegal memory access was encountered\\nSearch for `cudaErrorIllegalAddress' in https://docs.nvidia.com/...'), "
    "'CUDA error: unspecified launch failure / Search for `cudaErrorLaunchFailure'' (vllm issue digest); the "
    "messages are cudaGetErrorString's: 'unknown error', 'uncorrectable ECC error encountered', 'uncorrectable "
    "NVLink error was detected during the execution' (cuda.toml examples)",
)
NCCL_REMOTE_EXC = _t(
    "c10d.nccl_remote_error",
    "NCCL error: remote process exited or there was a network error, NCCL version " + NCCL_VERSION + "\n"
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
    "Last error:\n{last}",
    "real: '[rank9]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 9] Process group watchdog thread terminated with "
    "exception: NCCL error: remote process exited or there was a network error, NCCL version 2.20.5' + "
    "'ncclRemoteError: A call failed possibly due to ...' + 'Last error:' + the NCCL WARN text "
    "(deepseek-ai/DeepEP#106, NVIDIA/nccl#2076)",
)
DIST_BACKEND_INTERNAL = _t(
    "c10d.nccl_internal_error",
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
    "internal error - please report this issue to the NCCL developers, NCCL version " + NCCL_VERSION,
    "real: vllm-project/vllm#10453 ('[rank1]: torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, internal error - please report this issue to the NCCL "
    "developers, NCCL version 2.21.5' / '[rank1]: ncclInternalError: Internal check failed.' / '[rank1]: Last error:'); "
    "the last-error text 'Attribute busid of node nic not found': NVIDIA/nccl#1247",
)
NCCL_INTERNAL_LINES = (
    "ncclInternalError: Internal check failed.",
    "Last error:",
    "Attribute busid of node nic not found",
)
C_BARRIER_WARN = _t(
    "c10d.barrier_device_warning",
    "{tag0}  using GPU {lr} to perform barrier as devices used by this process are currently unknown. This can "
    "potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force "
    "use of a particular device,or call init_process_group() with a device_id.",
    "real: '[rank2]:[W219 03:41:15.167016385 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 2]  using GPU 2 "
    "to perform barrier as devices used by this process are currently unknown. ...' (benign warning at start-up)",
)

# ----------------------------------------------------------------------------- NCCL (stdout of each process)
NCCL_PFX = "{host}:{pid}:{tid} [{lr}] "
N_INFO_PLUGIN = _t(
    "nccl.plugin_path",
    "NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
    "NVIDIA/nccl#1029 ('rdma-gpu-train-worker-0:19488:21063 [4] NCCL INFO Plugin Path : "
    "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so')",
)
N_INFO_P2P_PLUGIN = _t(
    "nccl.p2p_plugin", "NCCL INFO P2P plugin IBext", "NVIDIA/nccl#1029 ('... NCCL INFO P2P plugin IBext')"
)
N_INFO_BOOTSTRAP = _t(
    "nccl.bootstrap",
    "NCCL INFO Bootstrap : Using eth0:{ip}<0>",
    "NCCL src/bootstrap.cc; real: 'ip-10-0-139-244:1465:1465 [0] NCCL INFO Bootstrap : Using "
    "eth0:10.0.139.244<0>' (nccl.toml example)",
)
N_INFO_NET_IB = _t(
    "nccl.net_ib_using",
    "NCCL INFO NET/IB : Using {devs} [RO]; OOB eth0:{ip}<0>",
    "real: 'gpu-a3:47021:47095 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; "
    "OOB eth0:10.4.2.31<0>' (nccl.toml example)",
)
N_INFO_USING_NET = _t(
    "nccl.using_network", "NCCL INFO Using network IBext", "NVIDIA/nccl#1029 ('... NCCL INFO Using network IBext')"
)
N_INFO_LOCAL = _t(
    "nccl.init_local_rank",
    "NCCL INFO comm {comm} rank {crank} nRanks {n} nNodes {nodes} localRanks {lranks} localRank {clr} MNNVL 0",
    "NCCL src/init.cc 2.20+; real: 'tpgds-aihub0003:3828979:3828979 [3] NCCL INFO comm 0x56396871db00 "
    "rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0' (nccl.toml example)",
)
N_INFO_COMPLETE = _t(
    "nccl.init_complete",
    "NCCL INFO comm {comm} rank {crank} nranks {n} cudaDev {lr} nvmlDev {lr} busId {bus} commId {cid} - Init COMPLETE",
    "real: 'hostname-test:984:1257 [4] NCCL INFO comm 0x557fe785f7a0 rank 36 nranks 64 cudaDev 4 "
    "nvmlDev 4 busId 9b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE' (NVIDIA/nccl#1814)",
)
N_VERSION = _t(
    "nccl.version",
    NCCL_VERSION_LINE,
    "real: 'NCCL version 2.27.5+cuda12.9' printed by a communicator's rank 0 (E129 Megatron log)",
)
N_WARN_COMPLETION = _t(
    "nccl.ib_completion_error",
    "ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer {peer}<{port}> with status=12 opcode={opcode} "
    "len=0 vendor err 129 (Recv) localGid ::ffff:{myip} remoteGids::ffff:{peer}",
    "real: NVIDIA/nccl#1405 ('kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion "
    "from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00:... "
    "remoteGidsfd00:...'); IPv4-mapped GIDs as in NVIDIA/nccl#1814 ('localGid ::ffff:29.87.4.221 "
    "remoteGids::ffff:29.87.88.182')",
)
N_INFO_PROXY = _t(
    "nccl.proxy_return",
    "NCCL INFO transport/net.cc:1302 -> 6\nNCCL INFO proxy.cc:698 -> 6\nNCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
    "real: NVIDIA/nccl#1405, the three lines after each completion error",
)
N_WARN_ASYNC = _t(
    "nccl.ib_async_event",
    "p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : {event}",
    "real: 'p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error' (OPT-175B training notes, "
    "nccl.toml example); 'port active' from rdma-core ibv_event_type_str (nccl.toml nccl.ib_async_port_active)",
)
N_INFO_INTERNAL = _t(
    "nccl.internal_return",
    "NCCL INFO graph/paths.cc:260 -> 3\nNCCL INFO transport/p2p.cc:123 -> 3\nNCCL INFO graph/paths.cc:588 -> 3\n"
    "NCCL INFO init.cc:1014 -> 3\nNCCL INFO init.cc:1548 -> 3\nNCCL INFO group.cc:64 -> 3 [Async thread]",
    "real: vllm-project/vllm#10453 ('h100-2:412:433 [0] NCCL INFO graph/paths.cc:260 -> 3' ... 'group.cc:64 -> 3 "
    "[Async thread]') before the ncclInternalError",
)

# ----------------------------------------------------------------------------- torchrun (torchelastic agent)
AGENT = "{lvl}{md} {hms}.{us:06d} {apid} {file}:{line}] "
A_OMP = _t(
    "torchrun.omp_warning",
    "\n*****************************************\nSetting OMP_NUM_THREADS environment variable for each process to "
    "be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal "
    "performance in your application as needed. \n*****************************************",
    "torch/distributed/run.py logger.warning (real: 'W1210 18:28:00.405000 1 site-packages/torch/distributed/"
    "run.py:793] Setting OMP_NUM_THREADS environment variable ...', one line per message line)",
)
A_CLOSING = _t(
    "torchrun.closing_signal",
    "Sending process {pid} closing signal {sig}",
    "real: 'W0116 02:43:46.376000 846088 torch/distributed/elastic/multiprocessing/api.py:1010] Sending "
    "process 846215 closing signal SIGTERM' and /tmp/ff_samples/hang launcher.log",
)
A_DEATH = _t(
    "torchrun.death_signal",
    "Received Signals.SIGTERM death signal, shutting down workers",
    "real: 'W0616 00:37:22.830000 4015698 torch/distributed/elastic/agent/server/api.py:719] Received "
    "Signals.SIGTERM death signal, shutting down workers'",
)
A_FAILED = _t(
    "torchrun.worker_failed",
    "failed (exitcode: {code}) local_rank: {lr} (pid: {pid}) of binary: " + PYTHON,
    "real: 'E0709 17:05:39.816000 56204 site-packages/torch/distributed/elastic/multiprocessing/"
    "api.py:874] failed (exitcode: -6) local_rank: 0 (pid: 56213) of binary: /opt/conda/bin/python3.10'",
)
A_NO_ERRFILE = _t(
    "torchrun.no_error_file",
    "no error file defined for parent, to copy child error file ({path})",
    "real: /tmp/ff_samples/hang launcher.log (errors/error_handler.py:145)",
)
A_CHILD_TB = (
    "Traceback (most recent call last):",
    '  File "' + VENV_BIN + '/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "' + PY + '/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper',
    "    return f(*args, **kwargs)",
    '  File "' + PY + '/torch/distributed/run.py", line 1028, in main',
    "    run(args)",
    '  File "' + PY + '/torch/distributed/run.py", line 1019, in run',
    "    elastic_launch(",
    '  File "' + PY + '/torch/distributed/launcher/api.py", line 194, in __call__',
    "    return launch_agent(",
    '  File "' + PY + '/torch/distributed/launcher/api.py", line 383, in launch_agent',
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "firstfault_sim.workload FAILED",
    "------------------------------------------------------------",
    "Failures:",
)
A_RECORD = (
    "[{idx}]:",
    "  time      : {time}",
    "  host      : {host}",
    "  rank      : {rank} (local_rank: {lr})",
    "  exitcode  : {code} (pid: {pid}) {sigtag}",
    "  error_file: {error_file}",
    "  traceback : {traceback}",
)
_t(
    "torchrun.child_failed",
    "\n".join(A_CHILD_TB + A_RECORD),
    "real: /tmp/ff_samples/hang launcher.log and tests/fixtures/slurm/torch_exception_torchrun/slurm-1.out "
    "(ChildFailedError summary, failure records with host/rank/exitcode/error_file/traceback)",
)
A_SIGNAL_TB = (
    "Traceback (most recent call last):",
    '  File "' + VENV_BIN + '/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "' + PY + '/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346, in wrapper',
    "    return f(*args, **kwargs)",
    '  File "' + PY + '/torch/distributed/run.py", line 779, in main',
    "    run(args)",
    '  File "' + PY + '/torch/distributed/run.py", line 770, in run',
    "    elastic_launch(",
    '  File "' + PY + '/torch/distributed/launcher/api.py", line 134, in __call__',
    "    return launch_agent(self._config, self._entrypoint, list(args))",
    '  File "' + PY + '/torch/distributed/launcher/api.py", line 241, in launch_agent',
    "    result = agent.run()",
    '  File "' + PY + '/torch/distributed/elastic/metrics/api.py", line 129, in wrapper',
    "    result = f(*args, **kwargs)",
    '  File "' + PY + '/torch/distributed/elastic/agent/server/api.py", line 723, in run',
    "    result = self._invoke_run(role)",
    '  File "' + PY + '/torch/distributed/elastic/agent/server/api.py", line 864, in _invoke_run',
    "    time.sleep(monitor_interval)",
    '  File "' + PY + '/torch/distributed/elastic/multiprocessing/api.py", line 62, in _terminate_process_handler',
    '    raise SignalException(f"Process {{os.getpid()}} got signal: {{sigval}}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process {apid} got signal: 15",
)
_t(
    "torchrun.signal_exception",
    "\n".join(A_SIGNAL_TB),
    "real: torchrun's traceback when its agent gets a signal (public Megatron-LM blog log, dist-packages "
    "python3.8: '... line 62, in _terminate_process_handler / raise SignalException(...) / "
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 5836 got signal: 2'), signal 15 as in "
    "a Megatron error.json ('SignalException: Process 17912 got signal: 15')",
)

# ----------------------------------------------------------------------------- SLURM (job output, slurmctld)
S_ENV = _t(
    "slurm.env_echo",
    "SLURM_JOB_ID={job} SLURM_JOB_NODELIST={nodelist} SLURM_NTASKS={ntasks} SLURM_TASKS_PER_NODE=1(x{nnodes})",
    "the batch script's echo in tests/fixtures/slurm/torch_exception_torchrun/job.sbatch (real capture)",
)
S_TASK_EXIT = _t(
    "slurm.task_exit",
    "srun: error: {host}: task {task}: Exited with exit code {code}",
    "real: tests/fixtures/slurm/torch_exception_torchrun/slurm-1.out",
)
S_TASK_TERM = _t(
    "slurm.task_terminated",
    "srun: error: {host}: task {task}: Terminated",
    "real: tests/fixtures/slurm/scancel (srun: error: node01: task 0: Terminated)",
)
S_TASK_OOM = _t(
    "slurm.task_oom",
    "srun: error: {host}: task {task}: Out Of Memory",
    "src/srun/launch.c _task_finish(); public: 'srun: error: nid005651: task 3: Out Of Memory' (slurm.toml)",
)
S_STEP_ABORTED = _t(
    "slurm.step_aborted",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
    "real: 'srun: Job step aborted: Waiting up to 32 seconds for job step to finish.' (public "
    "preemption log; KillWait=30 -> 32 s) and tests/fixtures/slurm/scancel (4 s)",
)
S_FORCE = _t("slurm.force_terminate", "srun: forcing job termination", "real: tests/fixtures/slurm/scancel")
S_GOT_SIGCONT = _t("slurm.got_sigcont", "srun: got SIGCONT", "real: tests/fixtures/slurm/scancel")
S_NODE_FAIL = _t("slurm.node_failure", "srun: error: Node failure on {host}", "real: tests/fixtures/slurm/node_failure")
S_STEPD_CANCEL = _t(
    "slurm.stepd_cancelled",
    "slurmstepd-{host}: error: *** {entity} {step} ON {host} CANCELLED AT {at}{why} ***",
    "real: tests/fixtures/slurm/{scancel,time_limit,node_failure} ('slurmstepd-node01: error: *** JOB 4 ON node01 "
    "CANCELLED AT 2026-12-02T14:54:20 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***'); ' DUE TO TIME "
    "LIMIT', ' DUE TO PREEMPTION' from slurmstepd req.c (public: '*** JOB 11509447 ON nodeau01 CANCELLED AT "
    "2026-03-25T10:34:07 DUE TO PREEMPTION ***')",
)
S_OOM_EVENT = _t(
    "slurm.oom_kill_event",
    "slurmstepd-{host}: error: Detected 1 oom_kill event in StepId={job}.0. Some of the step tasks have been OOM Killed.",
    "slurm.toml example 'slurmstepd: error: Detected 1 oom_kill event in StepId=1054.0. Some of the step "
    "tasks have been OOM Killed.' (task/cgroup plugin)",
)
CTLD = "[{iso}] "
S_CTLD_NOT_RESPONDING = _t(
    "slurmctld.not_responding",
    "error: Nodes {host} not responding, setting DOWN",
    "real: /tmp/slx/log/slurmctld.log and tests/fixtures/slurm/node_failure/slurmctld.log",
)
S_CTLD_KILL_FAILED = _t(
    "slurmctld.kill_on_failed_node",
    "Killing JobId={job} on failed node {host}",
    "real: tests/fixtures/slurm/node_failure/slurmctld.log",
)
S_CTLD_TIME_LIMIT = _t(
    "slurmctld.time_limit",
    "Time limit exhausted for JobId={job}",
    "real: /tmp/slx/log/slurmctld.log ('Time limit exhausted for JobId=3')",
)
S_CTLD_PREEMPT = _t(
    "slurmctld.preempted",
    "preempted JobId={job} has been killed to reclaim resources for JobId={by}",
    'slurm src/slurmctld/preempt.c slurm_job_preempt(): info("preempted %pJ has been killed to '
    "reclaim resources for %pJ\") (PreemptMode=CANCEL; %pJ prints 'JobId=N')",
)
S_CTLD_SUBMIT = _t(
    "slurmctld.submit",
    "_slurm_rpc_submit_batch_job: JobId={job} InitPrio=4294901756 usec=404",
    "real: tests/fixtures/slurm/node_failure/slurmctld.log",
)
S_CTLD_ALLOC = _t(
    "slurmctld.allocate",
    "sched: Allocate JobId={job} NodeList={nodelist} #CPUs={cpus} Partition=gpu",
    "real: tests/fixtures/slurm/node_failure/slurmctld.log ('sched: Allocate JobId=4 NodeList=node[01-02] "
    "#CPUs=4 Partition=debug')",
)
S_CTLD_COMPLETE = _t(
    "slurmctld.job_complete",
    "_job_complete: JobId={job} WEXITSTATUS {code}",
    "real: tests/fixtures/slurm/torch_exception_torchrun/slurmctld.log ('_job_complete: JobId=1 "
    "WEXITSTATUS 1', '_job_complete: JobId=1 done')",
)
S_TERMINATING = _t(
    "slurm.terminating_step",
    "srun: Terminating StepId={job}.0",
    "real (srun --kill-on-bad-exit): 'srun: error: nid001097: task 5: Exited with exit code 255' / "
    "'srun: Terminating StepId=40341.0' / 'srun: error: nid001096: tasks 0,2,4: Terminated' / "
    "'srun: Force Terminated StepId=40341.0' (public CSCS ICON log)",
)
S_FORCE_TERMINATED = _t(
    "slurm.force_terminated_step",
    "srun: Force Terminated StepId={job}.0",
    "same public log ('srun: Force Terminated StepId=40341.0')",
)
S_STEP_TIMEOUT = _t(
    "slurm.step_timeout",
    "srun: error: Timed out waiting for job step to complete",
    'slurm src/api/step_launch.c slurm_step_launch_wait_finish(): error("Timed out waiting for job step to '
    'complete") (slurm.toml slurm.step_timeout)',
)

# ----------------------------------------------------------------------------- kernel (dmesg -x --time-format iso)
KERN = "kern  :{lvl:<6}: {iso} "
K_XID79 = _t(
    "kernel.xid79",
    "NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "kernel.toml example '[...] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has "
    "fallen off the bus.'",
)
K_OFF_BUS = _t(
    "kernel.gpu_fallen_off_bus",
    "NVRM: GPU {bus}.0: GPU has fallen off the bus.",
    "kernel.toml example '[  228.414765] NVRM: GPU 0000:09:00.0: GPU has fallen off the bus.'",
)
K_XID48 = _t(
    "kernel.xid48",
    "NVRM: Xid (PCI:{bus}): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the "
    "framebuffer at partition {part}, subpartition {sub}.",
    "kernel.toml example '[Mon Oct 29 12:07:39 2018] NVRM: Xid (PCI:0000:8a:00): 48, An uncorrectable double "
    "bit error (DBE) has been detected on GPU in the framebuffer at partition 4, subpartition 1.'",
)
K_XID63 = _t(
    "kernel.xid63",
    "NVRM: Xid (PCI:{bus}): 63, Dynamic Page Retirement: New page retired, reboot to activate (0x{addr:016x}).",
    "kernel.toml example '[Mon Oct 29 12:07:40 2018] NVRM: Xid (PCI:0000:8a:00): 63, Dynamic Page "
    "Retirement: New page retired, reboot to activate (0x00000000002ce8ac).'",
)
K_XID94 = _t(
    "kernel.xid94",
    "NVRM: Xid (PCI:{bus}): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No",
    "kernel.toml example '[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', "
    "name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No'",
)
K_XID95 = _t(
    "kernel.xid95",
    "NVRM: Xid (PCI:{bus}): 95, pid={pid}, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No",
    "kernel.toml example 'NVRM: Xid (PCI:0000:01:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: "
    "Yes, D-RST: No'",
)
K_XID119 = _t(
    "kernel.xid119",
    "NVRM: Xid (PCI:{bus}): 119, pid={pid}, name=pt_main_thread, Timeout after 6s of waiting for RPC "
    "response from GPU{lr} GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c).",
    "/work/shared/peer-data/gpud-kernel-logs/accelerator_nvidia_xid_dmesg-with-xid-119.log ('NVRM: Xid "
    "(PCI:0000:9b:00): 119, pid=1263500, name=cache_mgr_main, Timeout after 6s of waiting for RPC response "
    "from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c).'); process name pt_main_thread "
    "as in the gpud segfault / Xid 43 lines",
)
K_GSP_BUFFER = _t(
    "kernel.gsp_rpc_buffer",
    "NVRM: GPU{lr} GSP RPC buffer contains function 76 (GSP_RM_CONTROL) and data 0x0000000020801813 0x000000000000004c.",
    "same gpud log ('NVRM: GPU4 GSP RPC buffer contains function 103 (GSP_RM_ALLOC) and data ...')",
)
K_GSP_RATE = _t(
    "kernel.gsp_rate_limit",
    "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:{bus} (printing 1 of every 30).  The GPU likely needs to be reset.",
    "same gpud log",
)
K_XID74 = _t(
    "kernel.xid74",
    "NVRM: Xid (PCI:{bus}): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link "
    "{link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    "kernel.toml example 'NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal "
    "error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)'",
)
K_PORT = _t(
    "kernel.ib_port_state",
    "mlx5_core {nic_pci} {nic}: Port: 1 Link {state}",
    "Linux drivers/infiniband/core/cache.c ib_cache_update (kernel.toml: 'mlx5_core 0000:08:00.0 mlx5_0: "
    "Port: 1 Link DOWN', 'mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT' / 'Link ACTIVE')",
)
K_OOM_CONSTRAINT = _t(
    "kernel.oom_constraint",
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/slurm/uid_1000/"
    "job_{job},task_memcg=/slurm/uid_1000/job_{job}/step_0/user/task_0,task=pt_main_thread,pid={pid},uid=1000",
    "kernel.toml / gpud memory_dmesg example 'oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=...,"
    "mems_allowed=0-1,oom_memcg=...' (cgroup paths: SLURM's cgroup v2 layout)",
)
K_OOM_KILLED = _t(
    "kernel.oom_killed",
    "Memory cgroup out of memory: Killed process {pid} (pt_main_thread) total-vm:{vm}kB, anon-rss:{rss}kB, "
    "file-rss:{frss}kB, shmem-rss:0kB",
    "kernel.toml example '[337533.314412] Memory cgroup out of memory: Killed process 23793 (leaker) "
    "total-vm:2623712kB, anon-rss:506500kB, file-rss:1268kB, shmem-rss:0kB'",
)
K_OOM_REAPED = _t(
    "kernel.oom_reaper",
    "oom_reaper: reaped process {pid} (pt_main_thread), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    "kernel.toml example 'oom_reaper: reaped process 23793 (leaker), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB'",
)
K_NOISE_NVSWITCH = _t(
    "kernel.nvswitch_open",
    "nvidia-nvswitch{n}: open (major=510)",
    "/work/shared/peer-data/gpud-kernel-logs/pkg_kmsg_kmsg.1.log",
)
K_NOISE_ADDRCONF = _t(
    "kernel.addrconf",
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "/work/shared/peer-data/gpud-kernel-logs/pkg_kmsg_kmsg.1.log",
)
K_NOISE_PCIE_CORRECTED = _t(
    "kernel.pcie_corrected",
    "nvidia {gpu}.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)",
    "kernel.toml example 'nvidia 0000:83:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, "
    "(Transmitter ID)' (benign: corrected)",
)


def table() -> list[tuple[str, str, str]]:
    """(name, first template line, source) for the docs."""
    return [(k, v.text.strip().split("\n")[0], v.source) for k, v in SOURCES.items()]
