"""The pinned base image every component and every TrainJob worker runs (lesson step 9).

It holds exactly the versions in manifests/image/requirements.lock plus this project, so a task
starts without installing anything. manifests/runtime.yaml names the same tag for the workers.
"""

from __future__ import annotations

from backend.project import MANIFESTS

BASE_IMAGE = "kfcockpit-base:0.1.0"

IMAGE_DIR = MANIFESTS / "image"
LOCK_FILE = IMAGE_DIR / "requirements.lock"
DOCKERFILE = IMAGE_DIR / "Dockerfile"

# Lesson step 8 asks for the Ray Train component to declare ray in its packages to install. The
# pin is the lock's (a test checks), so on the pinned image pip finds it already satisfied.
RAY_PACKAGES = ["ray[train]==2.60.0"]
