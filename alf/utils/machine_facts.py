"""Facts about the machine and the Python environment a run started in.

What ``run_info/start-*.json`` records besides the code (``alf.trainers.run_provenance``):
the host, the accelerator, the installed packages and the environment variables that
change what a run does or how fast. Each function is quick (the package list reads only
the two header lines of each distribution's metadata: ~0.1 s for 150 packages) and
raises nothing for a missing source; it leaves the field out or says "unknown".
"""
import datetime
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any, Dict, List, Mapping, Optional, Tuple

from alf.utils.cpu_budget import usable_cpus

#: environment variables recorded by name
ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS", "PYTHONHASHSEED", "PYTHONPATH", "CUBLAS_WORKSPACE_CONFIG",
    "MUJOCO_GL", "PYOPENGL_PLATFORM", "SDL_VIDEODRIVER", "MINARI_DATASETS_PATH",
    "VIRTUAL_ENV", "CONDA_DEFAULT_ENV", "CONDA_PREFIX", "RANK", "LOCAL_RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_PROCID")
#: ... and by prefix (threading, CUDA and torch settings, alf's own)
ENV_PREFIXES = ("ALF_", "CUDA_", "CUDNN_", "NCCL_", "TORCH_", "PYTORCH_", "OMP_", "KMP_",
                "GOMP_", "MKL_", "NVIDIA_")
#: never recorded, whatever the prefix: a run directory is often shared
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


def relevant_environ(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The variables of :data:`ENV_NAMES` / :data:`ENV_PREFIXES` that are set, minus any
    whose name looks like a secret (``*_API_KEY``, ``*_TOKEN``, ...)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items())
            if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and not _SECRET.search(k)}


def start_time() -> Dict[str, Any]:
    """Now, as UTC and local ISO 8601 times and a Unix time."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"utc": now.isoformat(timespec="seconds"),
            "local": now.astimezone().isoformat(timespec="seconds"),
            "unix": round(now.timestamp(), 3)}


def host_facts() -> Dict[str, Any]:
    """Hostname, OS, Python, CPU model and counts (all CPUs, and those this process may
    use: affinity and cgroup quota, as alf's thread budget sees them)."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "python": sys.version.split()[0],
            "python_implementation": platform.python_implementation(),
            "python_executable": sys.executable, "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(), "usable_cpus": usable_cpus()}


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_facts() -> Dict[str, Any]:
    """torch's version and build, and the CUDA devices.

    Device names come from torch when this process has initialised CUDA (a run on the
    GPU has); otherwise from ``nvidia-smi``, so a CPU run on a GPU host does not create
    a CUDA context (GPU memory, and no CUDA in forked workers) just to name the GPUs."""
    import torch  # deferred: only the facts need it
    cuda = torch.cuda.is_available()
    facts: Dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
                             "cuda_available": cuda}
    if cuda:
        facts["cudnn"] = torch.backends.cudnn.version()
        if torch.cuda.is_initialized():
            facts["cuda_devices"] = [torch.cuda.get_device_name(i)
                                     for i in range(torch.cuda.device_count())]
        else:
            facts["cuda_device_count"] = torch.cuda.device_count()
            facts["nvidia_smi_gpus"] = _nvidia_smi_gpus()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        facts["mps_available"] = True
    return facts


def _nvidia_smi_gpus() -> List[str]:
    """Every GPU of the host (``nvidia-smi`` ignores ``CUDA_VISIBLE_DEVICES``)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def installed_packages() -> List[str]:
    """Every installed distribution as ``name==version`` (``pip freeze``'s form), with
    `` @ URL`` for one installed from a path or URL (an editable checkout, like alf's),
    sorted case-insensitively."""
    found: Dict[str, str] = {}
    for dist in metadata.distributions():  # in sys.path order: the first one is imported
        name, version = _name_version(dist)
        key = re.sub(r"[-_.]+", "-", name).lower()
        if not name or (key in found and not found[key].endswith(f"=={version}")):
            continue
        url = _direct_url(dist)
        if key not in found or url:  # a second copy of one version (egg-info) may say where
            found[key] = f"{name}=={version}" + (f" @ {url}" if url else "")
    return sorted(found.values(), key=str.lower)


def _name_version(dist: metadata.Distribution) -> Tuple[str, str]:
    """Name and version from the metadata header (faster than parsing it all)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = ""
    for line in text.splitlines():
        if not line.strip():
            break  # end of the header
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Version:"):
            version = line[8:].strip()
    return name, version


def _direct_url(dist: metadata.Distribution) -> Optional[str]:
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    m = re.search(r'"url"\s*:\s*"([^"]+)"', text)
    return m.group(1) if m else None
