"""The machine room: hosts x GPUs, NVLink domains, NICs on IB rails, leaf and spine switches.

A rank's place in the cluster decides which evidence names it: the kernel log of *its* host
prints its GPU's PCI address in an Xid line, NCCL prints its host, pid and CUDA device, and a
port that goes down takes the traffic of one rail on one host. The model is the common
rail-optimised H100/H200 layout: 8 GPUs per host behind NVSwitch (one NVLink domain), one
ConnectX HCA per GPU (GPU *k* uses ``mlx5_k`` on rail *k*), each rail's hosts grouped under a
leaf switch per pod, leaves under spines.

Values (PCI bus ids, IPs, names) are data, not wording; where they imitate a real machine the
source is named: the GPU bus ids are those ``nccl-tests`` printed for an 8 x H100 80GB HBM3 host
(NVIDIA/nccl-tests#322: ``device 0 [0000:0a:00]`` ... ``device 7 [0000:c2:00]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

# nccl-tests#322 (8 x "NVIDIA H100 80GB HBM3" on host HCA-7): device k -> PCI bus id
H100_GPU_BUS = ("0a", "18", "23", "2c", "87", "90", "b9", "c2")
# ConnectX-7 HCAs sit next to their GPU's PCIe switch on these hosts; one per GPU (rail).
H100_NIC_BUS = ("0c", "1a", "25", "2e", "89", "92", "bb", "c4")


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """How many of everything. ``nvlink_domain`` is GPUs per NVLink domain (8 on HGX, 72 on NVL72)."""

    hosts: int
    gpus_per_host: int = 8
    hosts_per_leaf: int = 32
    nvlink_domain: int = 0
    host_prefix: str = "gpu"

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.gpus_per_host < 1:
            raise ValueError("a cluster needs at least one host with one GPU")
        if self.gpus_per_host > 16:
            raise ValueError("at most 16 GPUs per host")

    @property
    def world(self) -> int:
        return self.hosts * self.gpus_per_host


class Cluster:
    """Names and addresses of every host, GPU, NIC and switch; rank placement (block order)."""

    def __init__(self, shape: ClusterShape):
        self.shape = shape
        self.gph = shape.gpus_per_host
        width = max(4, len(str(shape.hosts)))
        self._fmt = f"{shape.host_prefix}%0{width}d"
        self.width = width

    # ------------------------------------------------------------------ hosts
    @cached_property
    def hosts(self) -> list[str]:
        return [self._fmt % (i + 1) for i in range(self.shape.hosts)]

    def host(self, i: int) -> str:
        return self._fmt % (i + 1)

    def host_index(self, name: str) -> int:
        digits = name[len(self.shape.host_prefix) :]
        if not name.startswith(self.shape.host_prefix) or not digits.isdigit():
            raise ValueError(f"unknown host {name!r}")
        i = int(digits) - 1
        if not 0 <= i < self.shape.hosts:
            raise ValueError(f"unknown host {name!r}")
        return i

    def ip(self, i: int) -> str:
        """The host's OOB / IPoIB address (10.x.y.z, one per host, never .0 or .255)."""
        n = i + 1
        return f"10.{64 + (n >> 14)}.{(n >> 6) & 255}.{(n & 63) + 10}"

    def nodelist(self) -> str:
        """SLURM's compressed hostlist for all hosts (``gpu[0001-2048]``)."""
        p = self.shape.host_prefix
        if self.shape.hosts == 1:
            return self.hosts[0]
        return f"{p}[{1:0{self.width}d}-{self.shape.hosts:0{self.width}d}]"

    # ------------------------------------------------------------------ ranks
    def rank_host(self, rank: int) -> int:
        return rank // self.gph

    def rank_local(self, rank: int) -> int:
        return rank % self.gph

    def host_ranks(self, i: int) -> range:
        return range(i * self.gph, (i + 1) * self.gph)

    # ------------------------------------------------------------------ GPUs
    def gpu_bus(self, local: int) -> str:
        """PCI bus id as NVRM prints it in an Xid line: ``0000:18:00``."""
        if local < len(H100_GPU_BUS):
            return f"0000:{H100_GPU_BUS[local]}:00"
        return f"0000:{0xD0 + local:02x}:00"

    def gpu_pci(self, local: int) -> str:
        """Canonical ``dddd:bb:dd.f`` (what firstfault's verdict names)."""
        return self.gpu_bus(local) + ".0"

    def nccl_busid(self, local: int) -> str:
        """NCCL's ``busId %lx`` (``18000`` for 0000:18:00.0)."""
        bus = int(self.gpu_bus(local).split(":")[1], 16)
        return f"{bus << 12:x}"

    def nvlink_domain(self, rank: int) -> int:
        size = self.shape.nvlink_domain or self.gph
        return rank // size

    # ------------------------------------------------------------------ network
    @property
    def rails(self) -> int:
        return self.gph

    def nic(self, local: int) -> str:
        return f"mlx5_{local}"

    def nic_pci(self, local: int) -> str:
        if local < len(H100_NIC_BUS):
            return f"0000:{H100_NIC_BUS[local]}:00.0"
        return f"0000:{0xE0 + local:02x}:00.0"

    def netdev(self, local: int) -> str:
        """The Ethernet/IPoIB name the kernel gives that HCA's port (``ibp12s0`` style)."""
        bus = int(self.nic_pci(local).split(":")[1], 16)
        return f"ibp{bus}s0"

    def pod(self, i: int) -> int:
        return i // self.shape.hosts_per_leaf

    def leaf(self, i: int, rail: int) -> str:
        """The leaf switch host ``i``'s rail ``rail`` cable goes to."""
        return f"leaf-p{self.pod(i):03d}-r{rail}"

    def leaf_port(self, i: int) -> int:
        return i % self.shape.hosts_per_leaf + 1

    def spine(self, rail: int) -> str:
        return f"spine-r{rail}"

    def link_name(self, i: int, local: int) -> str:
        """The cable: host HCA port <-> leaf switch port, as truth.json's ``culprit_links`` names it."""
        return f"{self.host(i)}:{self.nic(local)}/1<->{self.leaf(i, local)}:{self.leaf_port(i)}"

    def describe(self) -> dict[str, object]:
        return {
            "hosts": self.shape.hosts,
            "gpus_per_host": self.gph,
            "world_size": self.shape.world,
            "nvlink_domain_gpus": self.shape.nvlink_domain or self.gph,
            "hosts_per_leaf": self.shape.hosts_per_leaf,
            "rails": self.rails,
            "leaves": ((self.shape.hosts - 1) // self.shape.hosts_per_leaf + 1) * self.rails,
            "spines": self.rails,
            "nodelist": self.nodelist(),
        }
