"""GPU utilisation sampled in a thread while a benchmark runs (CUDA machines only).

``GpuSampler(device)`` reads the GPU's utilisation (%) every ``SAMPLE_S`` seconds, from
``torch.cuda.utilization`` (which needs NVML through ``pynvml``), else from ``nvidia-smi``;
``mean(start, end)`` averages the readings taken between two ``time.perf_counter`` marks. No
reading source at all leaves ``source == "unavailable"`` and no samples.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Any

import numpy as np
import torch

SAMPLE_S = 0.5


class GpuSampler(threading.Thread):
    """GPU utilisation (%) of ``device`` every SAMPLE_S seconds, as ``(perf_counter, %)``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(daemon=True)
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        self.samples: list[tuple[float, float]] = []
        self.source = "none"
        self._stop_event = threading.Event()

    def read(self) -> float | None:
        """One reading: ``torch.cuda.utilization`` (needs pynvml), else ``nvidia-smi``."""
        if self.source in ("none", "torch.cuda.utilization"):
            try:
                value = float(torch.cuda.utilization(self.index))
                self.source = "torch.cuda.utilization"
                return value
            except Exception:  # pynvml missing or NVML error: fall back once
                self.source = "nvidia-smi"
        cmd = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        cmd += ["-i", ids[self.index] if self.index < len(ids) else str(self.index)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=True)
            return float(out.stdout.strip().splitlines()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            self.source = "unavailable"
            return None

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_S) and self.source != "unavailable":
            value = self.read()
            if value is not None:
                self.samples.append((time.perf_counter(), value))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def mean(self, start: float, end: float) -> dict[str, Any]:
        """Mean utilisation and number of samples taken between ``start`` and ``end``."""
        values = [v for t, v in self.samples if start <= t <= end]
        return {"gpu_util_mean": float(np.mean(values)) if values else None, "n": len(values)}
