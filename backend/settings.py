"""Where the cockpit keeps its state and which platform it talks to (pydantic, from CLI/env)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from backend.home import default_home


class Settings(BaseModel):
    backend: Literal["local", "kube"] = "local"
    context: str | None = None  # kube context; None means the kubeconfig's current context
    namespace: str | None = None  # kube namespace; None: the context's own, else "default"
    kubeconfig: Path | None = None
    kfp_host: str | None = None  # Pipelines endpoint on kube; default: the port-forward address
    home: Path = Field(default_factory=default_home)

    @property
    def workspace(self) -> Path:
        """Lesson progress and notes, one folder per platform so switching loses nothing."""
        place = ("local" if self.backend == "local"
                 else f"kube-{self.context or 'current'}-{self.namespace or 'context-namespace'}")
        return self.home / "workspace" / place
