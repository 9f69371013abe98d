"""GPU -> job attribution (Slurm and Kubernetes) and per-job host usage."""

from collectors.attribution.attributor import Job, JobAttributor

__all__ = ["Job", "JobAttributor"]
