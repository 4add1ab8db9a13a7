"""Lines that report a symptom or show a job under way: read as what they say, never as more.

Each text is a real line from the public thread named beside it; none is invented. (Failures read
from their components' own wording are in test_component_wordings.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firstfault.discover import discover
from firstfault.match.registry import load_registry
from firstfault.parse.run import parse_bundle
from firstfault.vocab.errors import BundleError
from tests.paste_text import analyze_text

# pytorch/torchtune#2093: rank 3's process aborting when its watchdog timed out on an ALLREDUCE
_ABORT_ON_TIMEOUT = (
    "frame #6: <unknown function> + 0x129c3c (0x7af8b5129c3c in /lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=28956, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600058 milliseconds before timing out.\n"
    "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
    "(most recent call first):\n"
)


def test_an_abort_on_a_timeout_is_the_timeouts_victim_not_a_crash(tmp_path: Path) -> None:
    """ "terminate called after throwing" announces the what() line below it: here a watchdog
    re-raising the timeout it caught. The process died because it waited for a peer: rank 3 is a
    victim (a hang), not a process crash and not the culprit."""
    v = analyze_text(tmp_path, _ABORT_ON_TIMEOUT)
    assert str(v.category) == "hang"
    assert 3 not in v.culprit.ranks
    chain = {link.event.signature: link.role for link in v.causal_chain}
    assert str(chain["cpp.terminate"]) != "root"


def test_a_peer_closing_its_connection_is_not_called_the_network(tmp_path: Path) -> None:
    """pytorch/pytorch#78514: rank 0 returned before its isend completed and its process exited;
    rank 1's recv saw gloo's "Connection closed by peer". The peer left first, for a reason only
    its own output holds: unknown, and never a network fault or a set-up one."""
    v = analyze_text(
        tmp_path,
        '  File "/NFS/home/haokang/test.py", line 20, in main_worker\n'
        "    dist.recv(input,0)\n"
        '  File "/home/haokang/miniconda3/envs/3.8/lib/python3.8/site-packages/torch/distributed/'
        'distributed_c10d.py", line 1002, in recv\n'
        "    pg.recv([tensor], src, tag).wait()\n"
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
        "[18.25.6.30]:30872\n",
    )
    assert str(v.category) == "unknown"
    assert v.culprit.ranks == []
    assert any("18.25.6.30 closed its connection" in r for r in v.reasons)


# (thread, the lines as pasted there, the category they read as): one reading each
_READS_AS = [
    # the abort's announcement before a watchdog quoting a device error (the watchdog line of
    # kohya-ss/sd-scripts#1434): the quoted error is the fault, not the abort
    (
        "abort-on-ecc",
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: "
        "CUDA error: uncorrectable ECC error encountered\n",
        "gpu_hardware",
    ),
    # THUDM/slime#326: Megatron's async checkpoint writer logs the OSError as f"{e}" ("[Errno 5]
    # Input/output error", CPython's OSError text without the class name)
    (
        "slime-326",
        "ERROR: megatron.core.dist_checkpointing.strategies.filesystem_async: Local process 0 encountered "
        "an error: [Errno 5] Input/output error\n",
        "storage_io",
    ),
    # THUDM/ChatGLM2-6B#463: datasets' free-space check before building the dataset
    (
        "chatglm2-6b-463",
        "OSError: Not enough disk space. Needed: Unknown size (download: Unknown size, generated: Unknown size, "
        "post-processed: Unknown size)\n",
        "storage_io",
    ),
    # hiyouga/LLaMA-Factory#236: an 80-column console wrapped DeepSpeed's loss-scale exception
    # (". Exiting run." on a line of its own) and interleaved two ranks' copies
    (
        "llamafactory-236",
        "    self.loss_scaler.update_scale(has_overflow)\n"
        "    raise Exception(\n"
        'Exception  File "/home/xxx/miniconda3/lib/python3.11/site-packages/deepspeed/r\n'
        'untime/fp16/loss_scaler.py", line 175, in update_scale\n'
        ": Current loss scale already at minimum - cannot decrease scale anymore. Exiting\n"
        " run.\n"
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore\n"
        ". Exiting run.\n",
        "numerical",
    ),
    # hpcaitech/ColossalAI#4551 (a healthy run): the tqdm bar's redraws were lost in the capture, so
    # the logger's line sits on the bar's. The bar is peeled as a prefix, and it is what shows training
    (
        "colossalai-4551",
        "Step:  20%|██        | 1/5 [00:22<01:31, 22.90s/it][08/30/23 07:07:54] INFO     colossalai - "
        "colossalai - INFO:                    \n"
        "                    INFO     colossalai - colossalai - INFO: Step time: 19.714  \n",
        "none",
    ),
    # deepspeedai/DeepSpeed#255 (a healthy run): ThroughputTimer's "{epoch}/{step}, SamplesPerSec={}"
    (
        "deepspeed-255",
        ">[INFO 2020-06-08 05:26:19] 0/2650, SamplesPerSec=13.19749106827976\n"
        "[INFO 2020-06-08 05:26:34] 0/2700, SamplesPerSec=13.198177991591365\n",
        "none",
    ),
    # speechbrain/speechbrain#1939: the watchdog's message quoted without its "[Rank N] " head
    (
        "speechbrain-1939",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=588758, OpType=ALLREDUCE, "
        "Timeout(ms)=3600000) ran for 3602438 milliseconds before timing out.\n",
        "hang",
    ),
    # alan-turing-institute/autocast#381: the WorkNCCL(...) wrapped onto the next lines of the paste;
    # rank 0 waits alone (its peers had finished): a collective only it called
    (
        "autocast-381",
        "[Rank 0] Watchdog caught collective operation timeout:\n"
        "  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)\n"
        "  ran for 1800090 milliseconds before timing out.\n",
        "collective_mismatch",
    ),
    # heronsystems/adeptRL#13: the last lines of a SLURM job's output. The memory-limit kill is the
    # excerpt's first timed line, so nothing shows it came at start-up: host memory, not set-up
    (
        "adeptrl-13",
        "[cuda-24-0.local:08642] 2 more processes have sent help message help-mpi-btl-openib.txt / no active ports found\n"
        "slurmstepd: Job 1171978 exceeded memory limit (18202456 > 16384000), being killed\n"
        "slurmstepd: *** JOB 1171978 ON cuda-24-0 CANCELLED AT 2018-10-16T13:24:27 ***\n"
        "slurmstepd: Exceeded step memory limit at some point.\n",
        "host_oom",
    ),
    # mit-han-lab/spvnas#10: mpirun asked for more processes than its hosts offer slots
    (
        "spvnas-10",
        "--------------------------------------------------------------------------\n"
        "There are not enough slots available in the system to satisfy the 8 slots \n"
        "that were requested by the application:\n"
        "  python\n",
        "configuration",
    ),
    # torch/csrc/DataLoader.cpp: a worker dead of SIGKILL (strsignal: "Killed") reads as a rank's
    # bare SIGKILL does, a suspected OOM kill; another signal stays a crash
    ("dl-worker-sigkill", "RuntimeError: DataLoader worker (pid 15838) is killed by signal: Killed. \n", "host_oom"),
    (
        "dl-worker-segv",
        "RuntimeError: DataLoader worker (pid 20532) is killed by signal: Segmentation fault.\n",
        "process_crash",
    ),
    # open-mmlab/mmdetection#9291: the detector's check before all-reducing the loss dict
    (
        "mmdetection-9291",
        "AssertionError: loss log variables are different across GPUs!\n"
        "rank 1 len(log_vars): 3 keys: loss_rpn_cls,loss_rpn_bbox,s0.loss_bbox\n",
        "collective_mismatch",
    ),
    # libstdc++'s terminate handler on an allocation that found no memory
    (
        "bad-alloc",
        "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\nAborted\n",
        "host_oom",
    ),
]


@pytest.mark.parametrize(("text", "category"), [c[1:] for c in _READS_AS], ids=[c[0] for c in _READS_AS])
def test_a_real_paste_reads_as_its_fault(tmp_path: Path, text: str, category: str) -> None:
    assert str(analyze_text(tmp_path, text).category) == category


def test_an_abort_after_the_watchdogs_teardown_is_that_teardown(tmp_path: Path) -> None:
    """ultralytics/yolov5#4409 (torch 1.x wording): ranks 1-3 time out in a BROADCAST while rank 0
    validates; the watchdog says it takes the process down, and the paste ends with the bare
    "terminate called" of that abort. The abort is the tear-down, not a crash that came first."""
    v = analyze_text(
        tmp_path,
        "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 66858 milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:566] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 66854 milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:566] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 66664 milliseconds before timing out.\n"
        "\n"
        "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous "
        "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid "
        "this inconsistency, we are taking the entire process down.\n"
        "terminate called after throwing an instance of 'std::runtime_error'\n",
    )
    assert str(v.category) == "hang"
    assert v.culprit.ranks[:1] == [0]


def test_a_teardown_with_no_error_is_never_a_healthy_job(tmp_path: Path) -> None:
    """A paste holding only the watchdog's tear-down (the form of the torch 2.5 example in
    nccl.async_error_teardown): the job failed, though not a line says why. Never `none`."""
    v = analyze_text(
        tmp_path,
        "[rank1]:[E1118 20:32:23.957487695 ProcessGroupNCCL.cpp:681] [Rank 1] Some NCCL operations have failed "
        "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.\n",
    )
    assert str(v.category) == "configuration"  # no line shows training: the set-up's, as an unexplained error
    assert "torn down" in v.summary
    trained = analyze_text(
        tmp_path,
        "[rank1]: step 12 loss 2.3412\n"
        "[rank1]:[E1118 20:32:23.957487695 ProcessGroupNCCL.cpp:681] [Rank 1] Some NCCL operations have failed "
        "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.\n",
    )
    assert str(trained.category) == "unknown" and "torn down" in trained.summary


def test_memory_registration_failing_at_start_up_is_the_set_up(tmp_path: Path) -> None:
    """hhhyunwoo.github.io/posts/infiniband-nccl-issue: NCCL could not register memory with the HCA
    at start-up; the author raised the locked-memory limit (memlock) and the job ran."""
    v = analyze_text(
        tmp_path,
        "ibvwrap.c: 106 NCCL WARN Call to ibv_reg_mr failed\n"
        "NCCL INFO ib_plugin.c:448 -> 2\n"
        "NCCL INFO include/net.h:23 -> 2\n"
        "NCCL INFO transport/net.cc:248 -> 2\n",
    )
    assert str(v.category) == "configuration"
    assert v.root_event is not None and v.root_event.signature == "nccl.call_failed_memory_registration"


def test_naming_the_lowest_of_several_silent_ranks_says_it_is_a_choice(tmp_path: Path) -> None:
    """huggingface/finetrainers#114's first line: only rank 3's timeout is in the paste; ranks 0-2 printed
    nothing. Rank 0 is named (it validates alone), and the verdict says so rather than implying
    that anything rank 0 printed singled it out."""
    v = analyze_text(
        tmp_path,
        "[rank3]:[E1205 04:35:53.584483882 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=3348, OpType=BROADCAST, NumelIn=54607872, NumelOut=54607872, "
        "Timeout(ms)=1800000) ran for 1800098 milliseconds before timing out.\n",
    )
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [0]
    assert any("printed nothing either" in r and "not from anything it printed" in r for r in v.reasons)


@pytest.mark.parametrize(
    "text",
    [
        # torch's rank prefix on a healthy run's own prints
        "[rank0]: epoch done, saving\n[rank1]: epoch done, saving\n",
        # mpirun --tag-output (Open MPI orte/mca/iof)
        "[1,0]<stdout>: hello from the first process\n",
        # a Ray Train worker's lines, as Ray prefixes them
        "(RayTrainWorker pid=1234, ip=10.0.0.2) Setting up process group for: env:// [rank=0, world_size=2]\n",
    ],
    ids=["torch-rank", "mpirun-tag", "ray-train-worker"],
)
def test_a_rank_tagged_line_is_a_jobs_output(tmp_path: Path, text: str) -> None:
    """A line the job's own machinery tagged with its rank makes the file a job's log: with no
    error it reads as healthy, never "not the output of a training job"."""
    assert str(analyze_text(tmp_path, text).category) == "none"


def test_an_untagged_numbered_list_is_still_not_a_job(tmp_path: Path) -> None:
    """srun's "3: " label is not taken alone: any numbered list looks the same."""
    with pytest.raises(BundleError):
        analyze_text(tmp_path, "0: apples\n1: pears\n")


_HVD_WARNING = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
    "for remainder of ranks for more than {s} seconds. This may indicate that different ranks are trying to submit "
    "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. "
)


def test_horovods_ready_ranks_name_the_rank_that_never_submitted(tmp_path: Path) -> None:
    """horovod/horovod#215 (Horovod <= 0.13): the coordinator lists the ranks that are ready; of
    mpirun's 32, rank 16 is not among them."""
    ready = "21, 25, 26, 27, 28, 29, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 1, 3, 0, 15, 17, 18, 20, 22, 23, 24, 31, 8, 19, 2, 30"
    v = analyze_text(
        tmp_path,
        "mpirun -np 32 - H s1:4,s2:4,...s8:4 -bind-to none -map-by slot -x LD_LIBRARY_PATH python "
        "keras_imagenet_resnet50.py\n"
        "Epoch 1/90\n"
        "WARNING: " + _HVD_WARNING.format(s=60) + "Stalled ops: training/SGD/DistributedSGD_Allreduce/"
        f"HorovodAllreduce_training_SGD_gradients_AddN_335_0 [ready ranks: {ready}]\n",
    )
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [16]
    assert any("name rank 16 as the rank they waited for" in r for r in v.reasons)


def test_horovods_stalled_ops_line_alone_names_the_missing_rank(tmp_path: Path) -> None:
    """horovod/horovod#530: seven workers, the ready list of each stalled broadcast lacks rank 2."""
    v = analyze_text(
        tmp_path,
        "Stalled ops: HorovodBroadcast_InceptionV3_Logits_Conv2d_1c_1x1_weights_0 [ready ranks: 5, 6, 3, 1, 4, 0]。\n",
    )
    assert str(v.category) == "hang" and v.culprit.ranks[:1] == [2]


def test_horovods_missing_ranks_list_below_the_warning(tmp_path: Path) -> None:
    """Horovod 0.20+: a "Missing ranks:" header and one "N: [tensors]" line per missing rank (a real
    TF desync report: rank 0, the coordinator itself, is the one missing)."""
    v = analyze_text(
        tmp_path,
        "[2021-02-02 21:19:07.345988: W /tmp/pip-install-dxtho7yu/horovod_0bde588442554cf4b80c76441efc4e03/"
        "horovod/common/stall_inspector.cc:105] " + _HVD_WARNING.format(s=10) + "\n"
        "Missing ranks:\n"
        "0: [cond_1/then/_10/cond_1/SGD/PartitionedCall/DistributedSGD_Allreduce/cond/then/_79/"
        "DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]\n",
    )
    assert str(v.category) == "hang"
    assert v.root_event is not None and v.root_event.fields.get("awaited_rank") == "0"


def test_rank0_waiting_alone_is_a_collective_only_it_called(tmp_path: Path) -> None:
    """pytorch/pytorch#97066 (kwen2501's hang.py): rank 0 all-reduces what its peers never do and
    times out alone. One rank waiting alone, with no other rank's line, is read as a collective
    only rank 0 called, and the verdict says it rests on the absent lines."""
    v = analyze_text(
        tmp_path,
        "[E ProcessGroupNCCL.cpp:464] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, Timeout(ms)=10000) ran for 10917 milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:478] Some NCCL operations have failed or timed out. Due to the asynchronous "
        "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n",
    )
    assert str(v.category) == "collective_mismatch" and v.culprit.ranks == [0]
    assert any("rests on the other ranks' lines being absent" in r for r in v.reasons)


def test_a_peer_timing_out_too_keeps_the_hang_reading(tmp_path: Path) -> None:
    """Two ranks waiting is a hang of a third (or of the collective), never rank 0's own branch."""
    v = analyze_text(
        tmp_path,
        "[E ProcessGroupNCCL.cpp:464] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, Timeout(ms)=10000) ran for 10917 milliseconds before timing out.\n"
        "[E ProcessGroupNCCL.cpp:464] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, Timeout(ms)=10000) ran for 10920 milliseconds before timing out.\n",
    )
    assert str(v.category) == "hang"


def test_a_ready_list_claiming_a_huge_rank_is_not_turned_into_millions(tmp_path: Path) -> None:
    """A ready list becomes the ranks it lacks: a rank at or above ``Limits.max_world`` in it is a
    claim, not a rank, so "0, 9999999" does not become ten million awaited ranks."""
    (tmp_path / "log.txt").write_text("Stalled ops: x [ready ranks: 0, 9999999]\nStalled ops: y [ready ranks: 0, 2]\n")
    bundle = discover(tmp_path / "log.txt")
    try:
        events = parse_bundle(bundle, load_registry()).events
    finally:
        bundle.close()
    awaited = [e.fields.get("awaited_rank") for e in events]
    assert awaited == [None, "1"]  # the first lacks no rank below its believable ones; the second lacks 1


_STORE_CONNECT = [
    # torch 2.x (pytorch/pytorch#107021), torch 1.x (pytorch/pytorch#69197): one event, two wordings
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
    "failed. See inner exception for details.\n",
    "RuntimeError: connect() timed out. Original timeout was 60000 ms.\n",
    "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
    "(node-017, 29500).\n",
]


@pytest.mark.parametrize("line", _STORE_CONNECT)
def test_reaching_the_store_failing_at_start_up_is_the_set_up(tmp_path: Path, line: str) -> None:
    """A job that never reached its rendezvous store was set up wrong (endpoint, port, name, firewall),
    as the client socket's own timeout already read; the torch 1.x and 2.x wordings read alike."""
    v = analyze_text(tmp_path, line)
    assert str(v.category) == "configuration"


def test_losing_the_store_after_training_began_keeps_the_network_reading(tmp_path: Path) -> None:
    v = analyze_text(tmp_path, "[rank1]: step 120 loss 2.3412\n" + _STORE_CONNECT[0])
    assert str(v.category) == "network"


def test_a_programming_error_with_no_traceback_is_a_frameworks_bug_not_the_set_up(tmp_path: Path) -> None:
    """OpenRLHF/OpenRLHF#101: the strategy class lacked the method its own trainer called (fixed in
    OpenRLHF). A missing attribute is a mistake in code, early or late; with no frame to say whose,
    it is read as the framework's, not as the set-up's."""
    v = analyze_text(
        tmp_path,
        "    strategy.save_hf_format(model, tokenizer, args.save_path + '/sft_hf')\n"
        "AttributeError: 'DeepspeedStrategy' object has no attribute 'save_hf_format'\n",
    )
    assert str(v.category) == "software_bug"
    assert any("mistake in code" in r for r in v.reasons)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # hpcaitech/ColossalAI#4681: an argument the installed version no longer takes is versions
        # disagreeing (the user pins them), not a bug in either
        ("TypeError: __init__() got an unexpected keyword argument 'device'\n", "configuration"),
        # a class attribute a newer release removed (Pillow 10 dropped Image.ANTIALIAS): versions again
        ("AttributeError: type object 'Image' has no attribute 'ANTIALIAS'\n", "configuration"),
        # the variable torchrun sets, read by a script started with plain python: the set-up, not the code
        ("    local_rank = int(os.environ['LOCAL_RANK'])\nKeyError: 'LOCAL_RANK'\n", "configuration"),
        # raised in the user's own script (its frame is not an installed package's): the application's
        (
            "Traceback (most recent call last):\n"
            '  File "/home/user/project/train.py", line 41, in <module>\n'
            "    optimizer = build_optimizer(args.lr, model)\n"
            "AttributeError: 'Namespace' object has no attribute 'lr'\n",
            "application_error",
        ),
    ],
)
def test_whose_code_a_start_up_error_is(tmp_path: Path, text: str, category: str) -> None:
    assert str(analyze_text(tmp_path, text).category) == category


def test_a_set_up_failure_on_the_only_rank_in_the_log_names_no_rank(tmp_path: Path) -> None:
    """modelscope/ms-swift#3171: reentrant gradient checkpointing under plain DDP fails on every rank;
    the paste holds rank 3's copy. Naming rank 3 would blame the rank the user happened to copy, and
    the headline says so instead of naming it."""
    line = (
        "[rank3]: RuntimeError: Expected to mark a variable ready only once. This error is caused by one of "
        "the following reasons: 1) Use of a module parameter outside the `forward` function.\n"
    )
    v = analyze_text(tmp_path, line)
    assert str(v.category) == "configuration" and v.culprit.ranks == []
    assert "only rank 3 is in the log" in v.summary and "on rank 3" not in v.summary
    # with another rank in the log that went on, the failing rank is the culprit
    w = analyze_text(tmp_path, "[rank0]: step 3 loss 2.3412\n" + line)
    assert w.culprit.ranks == [3]
    # a mistake in the user's own code after training began may be one rank's (a data-dependent
    # path): the rank keeps its name, as before
    late = analyze_text(
        tmp_path,
        "[rank3]: step 120 loss 2.3412\n"
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/home/user/project/train.py", line 88, in <module>\n'
        "[rank3]:     target = batch['labels']\n"
        "[rank3]: KeyError: 'labels'\n",
    )
    assert str(late.category) == "application_error" and late.culprit.ranks == [3]


def test_a_metric_line_repeated_is_one_process_not_every_rank(tmp_path: Path) -> None:
    """microsoft/DeepSpeedExamples#444: rank 0 logs the PPO losses step after step; two inf lines
    are a time series, not two ranks failing the same way, so the headline claims no rank."""
    v = analyze_text(
        tmp_path,
        "epoch: 0|step: 3184|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\n"
        "average reward score: -6.359375\n"
        "epoch: 0|step: 3185|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0\n",
    )
    assert str(v.category) == "numerical"
    assert "every rank" not in v.summary


@pytest.mark.parametrize(
    "text",
    [
        # pytorch/pytorch#128998, a job system's prefix before torch's warning ("training proceeds correctly")
        "2024-05-22 06:25:20.552227-04:00 Error From <host>: [W socket.cpp:436] [c10d] The server socket cannot "
        "be initialized on [::]:22010 (errno: 97 - Address family not supported by protocol).\n",
        # helmholtz-analytics/heat#1003, a unittest's name before it ("tests do not fail, just a ton of warnings")
        "test_daso (heat.optim.tests.test_dp_optimizer.TestDASO) ... [W socket.cpp:401] [c10d] The server socket "
        "cannot be initialized on [::]:29500 (errno: 97 - Address family not supported by protocol).\n"
        "[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to [localhost]:29500 "
        "(errno: 97 - Address family not supported by protocol).\n",
    ],
)
def test_c10d_trying_an_address_family_the_host_lacks_is_no_failure(tmp_path: Path, text: str) -> None:
    """c10d tries each address of the store in turn; IPv6's errno 97 on a host without it is one
    try of several, which healthy jobs print at start-up."""
    v = analyze_text(tmp_path, text)
    assert str(v.category) == "none"


def test_ncclinternalerror_alone_is_read_as_the_set_up(tmp_path: Path) -> None:
    """A multi-node job whose NCCL picked the wrong socket interface (fixed with
    NCCL_SOCKET_IFNAME; rhkb.cn/news/463024.html): "internal error - please report this issue"
    is what NCCL returns after such set-up faults, far more often than for a bug of its own."""
    v = analyze_text(
        tmp_path,
        "torch.distributed.DistBackendError: NCCL error in: …/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
        "internal error - please report this issue to the NCCL developers, NCCL version 2.18.1 ainode01: "
        "ncclInternalError: Internal check failed. ainode01: Last error\n",
    )
    assert str(v.category) == "configuration"


def test_megatrons_dataset_set_up_is_a_jobs_log(tmp_path: Path) -> None:
    """argonne-lcf/Megatron-DeepSpeed#28, a merged pull request's run: a paste of only Megatron's
    dataset set-up is a training job's start, healthy so far, not a file to refuse."""
    v = analyze_text(
        tmp_path,
        "    [2024-06-16 18:24:28][INFO][training:1634] - > building train, validation, and test datasets ...\n"
        "    [2024-06-16 18:24:28][INFO][training:1617] -  > datasets target sizes (minimum size):\n"
        "    [2024-06-16 18:24:28][INFO][training:1618] -     train:      10172544\n",
    )
    assert str(v.category) == "none"
